/* main.c -- the `parkway` command: usage, option parsing, dispatch. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_cli.h"
#include "sched_common.h"

static const char usage[] =
	"usage: parkway sched load [--slice-us N] [--stats SECONDS] [-v]\n"
	"       parkway sched status\n"
	"       parkway sched unload\n"
	"       parkway --help\n"
	"\n"
	"sched load    load the parkway sched_ext scheduler (switch-all: every task), pin\n"
	"              the worker map parkway programs publish into, and stay in the\n"
	"              foreground; SIGINT/SIGTERM unload it and restore the default\n"
	"              scheduler (so does this process dying). Exits non-zero, with the\n"
	"              kernel's reason, if the kernel ejects the scheduler.\n"
	"  --slice-us N      time slice in microseconds (default 5000, 100..1000000)\n"
	"  --stats SECONDS   print the counters every SECONDS seconds (default: never)\n"
	"  -v, --verbose     libbpf debug output; the verifier's log tail on rejection\n"
	"sched status  is sched_ext present and enabled, which scheduler; our counters\n"
	"              and per-program CPU time when ours is loaded\n"
	"sched unload  stop the running `parkway sched load`\n"
	"\n"
	"test switches (for tools/vm tests; never use them otherwise):\n"
	"  --debug-stall-comm COMM   never dispatch tasks named COMM (the watchdog must\n"
	"                            eject the scheduler)\n"
	"  --debug-bad-verifier      load a program the verifier must reject\n"
	"\n"
	"exit codes: 0 ok, 1 failed or ejected, 2 usage, 3 environment (no sched_ext,\n"
	"not root, another scheduler loaded)\n";

static int bad_usage(const char *why)
{
	fprintf(stderr, "parkway: %s (see `parkway --help`)\n", why);
	return EXIT_USAGE;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int cmd_load(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "slice-us", required_argument, NULL, 's' },
		{ "stats", required_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "debug-stall-comm", required_argument, NULL, 'X' },
		{ "debug-bad-verifier", no_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct load_opts o = { .slice_us = 5000 };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:S:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (parse_uint(optarg, 100, 1000000, &o.slice_us))
				return bad_usage("--slice-us takes 100..1000000");
			break;
		case 'S':
			if (parse_uint(optarg, 0, 86400, &o.stats_s))
				return bad_usage("--stats takes 0..86400 seconds");
			break;
		case 'v': o.verbose = true; break;
		case 'X': o.debug_stall_comm = optarg; break;
		case 'B': o.debug_bad_verifier = true; break;
		case 'h': fputs(usage, stdout); return EXIT_OK;
		default: return bad_usage("unknown option");
		}
	}
	if (optind != argc)
		return bad_usage("unexpected argument");
	return sched_load(&o);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (argc == 3 && !strcmp(argv[1], "sched") && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
		fputs(usage, stdout);
		return EXIT_OK;
	}
	if (argc < 2)
		return bad_usage("missing command");
	if (strcmp(argv[1], "sched") != 0)
		return bad_usage("unknown command");
	if (argc < 3)
		return bad_usage("missing sched subcommand (load, status or unload)");
	if (!strcmp(argv[2], "load"))
		return cmd_load(argc - 2, argv + 2);
	if (argc != 3)
		return bad_usage("unexpected argument");
	if (!strcmp(argv[2], "status"))
		return sched_status();
	if (!strcmp(argv[2], "unload"))
		return sched_unload();
	return bad_usage("unknown sched subcommand");
}
