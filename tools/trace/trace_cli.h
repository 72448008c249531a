/* trace_cli.h -- `parkway trace`, called from the C command (tools/parkway_cli/main.c). */
#ifndef PARKWAY_TRACE_CLI_H
#define PARKWAY_TRACE_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "trace"; returns the exit code (0 ok, 1 failed, 2 usage). */
int parkway_trace_main(int argc, char **argv);
/* The trace lines of `parkway --help`. */
extern const char parkway_trace_usage[];

#ifdef __cplusplus
}
#endif

#endif
