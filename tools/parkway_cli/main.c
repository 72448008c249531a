/* main.c -- the `parkway` command: usage, option parsing, dispatch. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../trace/trace_cli.h"
#include "sched_cli.h"
#include "sched_common.h"

#ifndef PARKWAY_VERSION
#define PARKWAY_VERSION "unknown"
#endif

static const char usage[] =
	"usage: parkway trace report|export ... FILE   (parkway trace --help)\n"
	"       parkway trace record [-o FILE] -p PID | -- COMMAND [ARGS...]\n"
	"       parkway sched load [--slice-us N] [--penalty-slices N] [--max-workers N]\n"
	"                          [--stats SECONDS] [-v]\n"
	"       parkway sched status\n"
	"       parkway sched unload\n"
	"       parkway --help\n"
	"       parkway --version\n"
	"\n"
	"trace         read a trace written with PARKWAY_TRACE=FILE: a report, or a\n"
	"              timeline for ui.perfetto.dev and an SVG (docs/tracing.md)\n"
	"sched load    load the parkway sched_ext scheduler (switch-all: every task), pin\n"
	"              the program parkway workers register with (any user's), and stay\n"
	"              in the foreground; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE,\n"
	"              SIGALRM, SIGUSR1/2 and the other signals that end a process\n"
	"              without a fault unload it and restore the default scheduler\n"
	"              (so does this process dying). Exits non-zero,\n"
	"              with the kernel's reason, if the kernel ejects the scheduler.\n"
	"  --slice-us N      longest time slice in microseconds (default 5000,\n"
	"                    100..1000000; refused above the wait bound: 20833 on\n"
	"                    2 CPUs, less on more); slices shrink as the queue grows\n"
	"  --penalty-slices N  slices a searching worker queues behind its program\n"
	"                    (default 20, 0..64)\n"
	"  --max-workers N   registered workers per program (default 256, 1..4096)\n"
	"  --stats SECONDS   print the counters every SECONDS seconds (default: never)\n"
	"  -v, --verbose     libbpf debug output; the verifier's log tail on rejection\n"
	"sched status  is sched_ext present and enabled, which scheduler; our counters\n"
	"              and per-program CPU time when ours is loaded\n"
	"sched unload  stop the running `parkway sched load` and wait until it has left\n"
	"              (a loader still starting is waited for, then stopped)\n"
	"\n"
	"test switches (for tools/vm tests; never use them otherwise):\n"
	"  --debug-stall-comm COMM   never dispatch tasks named COMM (the watchdog must\n"
	"                            eject the scheduler)\n"
	"  --debug-bad-verifier      load a program the verifier must reject\n"
	"  --debug-watchdog-ms N     the kernel's stall timeout (default 30000, its\n"
	"                            maximum)\n"
	"\n"
	"exit codes: 0 ok, 1 failed or ejected, 2 usage (also a slice over the wait\n"
	"bound), 3 environment (no sched_ext, not root, another scheduler loaded, an\n"
	"unsafe /run/parkway-sched)\n";

/* Prints "WHERE: WHY (see `parkway --help`)"; WHERE is the command the
 * error is in ("parkway", "parkway sched load"). */
static int bad_usage_in(const char *where, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int bad_usage_in(const char *where, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", where);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see `parkway --help`)\n", stderr);
	return EXIT_USAGE;
}

#define bad_usage(...) bad_usage_in("parkway", __VA_ARGS__)

/* The option getopt_long just stopped at, as the user wrote it: "--stats"
 * (without any "=VALUE"), or "-S" also inside a group such as "-vS". */
static void failed_option(char **argv, char *buf, size_t len)
{
	const char *arg = argv[optind - 1];

	if (optopt && strncmp(arg, "--", 2) != 0) {
		snprintf(buf, len, "-%c", optopt);
		return;
	}
	snprintf(buf, len, "%.*s", (int)strcspn(arg, "="), arg);
}

/* getopt_long's '?': an unknown option, a long one given a value it does
 * not take, or an abbreviation of more than one. */
static int bad_option(const char *where, char **argv, const struct option *longopts)
{
	const char *arg = argv[optind - 1];
	char opt[64], names[128] = "";
	size_t n;
	int matches = 0;

	failed_option(argv, opt, sizeof opt);
	if (strncmp(opt, "--", 2) != 0)
		return bad_usage_in(where, "unknown option '%s'", opt);
	if (optopt && strchr(arg, '='))
		return bad_usage_in(where, "option %s takes no value", opt);
	n = strlen(opt + 2);
	for (const struct option *lo = longopts; lo->name; lo++) {
		if (n && !strncmp(lo->name, opt + 2, n)) {
			size_t used = strlen(names);
			snprintf(names + used, sizeof names - used, "%s--%s", matches ? ", " : "", lo->name);
			matches++;
		}
	}
	if (matches > 1)
		return bad_usage_in(where, "option %s is ambiguous (%s)", opt, names);
	return bad_usage_in(where, "unknown option '%s'", opt);
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	/* Digits only: strtoul would also take leading blanks, a '+', and a
	 * '-' that negates modulo 2^64 ("-18446744073709551615" is 1). */
	if (*s < '0' || *s > '9')
		return -1;
	v = strtoul(s, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int cmd_load(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "slice-us", required_argument, NULL, 's' },
		{ "penalty-slices", required_argument, NULL, 'P' },
		{ "max-workers", required_argument, NULL, 'W' },
		{ "stats", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "debug-stall-comm", required_argument, NULL, 'X' },
		{ "debug-bad-verifier", no_argument, NULL, 'B' },
		{ "debug-watchdog-ms", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const char where[] = "parkway sched load";
	struct load_opts o = { .slice_us = 5000, .penalty_slices = 20,
			       .max_workers = PARKWAY_DEFAULT_MAX_WORKERS };
	char opt[64];
	int c;

	/* getopt prints nothing; a leading ':' makes a missing value ':'
	 * rather than '?', so each gets its own message below. */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":s:S:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_uint(optarg, 100, 1000000, &o.slice_us))
				return bad_usage_in(where, "--slice-us takes 100..1000000, not '%s'", optarg);
			o.slice_given = true;
			break;
		case 'P':
			if (parse_uint(optarg, 0, 64, &o.penalty_slices))
				return bad_usage_in(where, "--penalty-slices takes 0..64, not '%s'", optarg);
			break;
		case 'W':
			if (parse_uint(optarg, 1, PARKWAY_MAX_WORKERS_LIMIT, &o.max_workers))
				return bad_usage_in(where, "--max-workers takes 1..%u, not '%s'",
						    PARKWAY_MAX_WORKERS_LIMIT, optarg);
			break;
		case 'S':
			if (parse_uint(optarg, 0, 86400, &o.stats_s))
				return bad_usage_in(where, "--stats takes 0..86400 seconds, not '%s'", optarg);
			break;
		case 'v': o.verbose = true; break;
		case 'X': o.debug_stall_comm = optarg; break;
		case 'B': o.debug_bad_verifier = true; break;
		case 'T':
			if (parse_uint(optarg, 1000, 30000, &o.debug_watchdog_ms))
				return bad_usage_in(where, "--debug-watchdog-ms takes 1000..30000, not '%s'", optarg);
			break;
		case 'h': fputs(usage, stdout); return EXIT_OK;
		case ':':
			failed_option(argv, opt, sizeof opt);
			return bad_usage_in(where, "option %s needs a value", opt);
		default:
			return bad_option(where, argv, longopts);
		}
	}
	if (optind != argc)
		return bad_usage_in(where, "unexpected argument '%s'", argv[optind]);
	return sched_load(&o);
}

static bool is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		fputs("\n", stdout);
		fputs(parkway_trace_usage, stdout);
		return EXIT_OK;
	}
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		if (argc > 2)
			return bad_usage("unexpected argument '%s'", argv[2]);
		printf("parkway %s\n", PARKWAY_VERSION);
		return EXIT_OK;
	}
	/* --help (-h) right after `sched`, `sched status` or `sched unload`
	 * prints the usage, as it does anywhere in `sched load`. */
	if (argc >= 3 && !strcmp(argv[1], "sched") &&
	    (is_help(argv[2]) ||
	     (argc == 4 && (!strcmp(argv[2], "status") || !strcmp(argv[2], "unload")) && is_help(argv[3])))) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (argc < 2)
		return bad_usage("missing command");
	if (argv[1][0] == '-')
		return bad_usage("unknown option '%s'", argv[1]);
	if (!strcmp(argv[1], "trace"))
		return parkway_trace_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "sched") != 0)
		return bad_usage("unknown command '%s'", argv[1]);
	if (argc < 3)
		return bad_usage("missing sched subcommand (load, status or unload)");
	if (!strcmp(argv[2], "load"))
		return cmd_load(argc - 2, argv + 2);
	if (strcmp(argv[2], "status") != 0 && strcmp(argv[2], "unload") != 0)
		return bad_usage("unknown sched subcommand '%s' (load, status or unload)", argv[2]);
	if (argc != 3)
		return bad_usage_in(argv[2][0] == 's' ? "parkway sched status" : "parkway sched unload",
				    "unexpected argument '%s'", argv[3]);
	if (!strcmp(argv[2], "status"))
		return sched_status();
	return sched_unload();
}
