/* sched_cli.h -- the `parkway sched` subcommands. */
#ifndef PARKWAY_CLI_SCHED_CLI_H
#define PARKWAY_CLI_SCHED_CLI_H

#include <stdbool.h>

struct load_opts {
	unsigned slice_us;            /* --slice-us, the longest slice, default 5000 */
	bool slice_given;             /* --slice-us was given (else it may be lowered to fit) */
	unsigned penalty_slices;      /* --penalty-slices, default 20 */
	unsigned max_workers;         /* --max-workers per program, default PARKWAY_DEFAULT_MAX_WORKERS */
	unsigned stats_s;             /* --stats SECONDS, 0 = none */
	bool verbose;                 /* -v: libbpf debug output, verifier log tail */
	const char *debug_stall_comm; /* test switch: never dispatch this comm */
	bool debug_bad_verifier;      /* test switch: load a program the verifier rejects */
	unsigned debug_watchdog_ms;   /* test switch: the kernel's stall timeout, 0 = ours (30 s) */
};

int sched_load(const struct load_opts *o);
int sched_status(void);
int sched_unload(void);

#endif
