/* sched_load.c -- `parkway sched load`: open the embedded BPF object with
 * libbpf's object API, set its .rodata.cfg, load, attach the struct_ops
 * link, pin the maps the runtime and `status` need, then wait: print a
 * stats line every --stats seconds, leave on SIGINT/SIGTERM (the kernel
 * goes back to the default scheduler when the link is destroyed, or when
 * this process dies), and report the kernel's exit info if it ejects us. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sched_cli.h"
#include "sched_common.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

/* The scheduler object, linked in by bpf_obj.S. */
extern const unsigned char parkway_bpf_obj[];
extern const unsigned char parkway_bpf_obj_end[];

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

/* libbpf's messages: all printed with -v; always kept (last 64 KiB) so a
 * verifier rejection can be summarised. */
static bool verbose;
static char logbuf[65536];
static size_t loglen;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[4096];
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (n < 0)
		return n;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (loglen + (size_t)n >= sizeof(logbuf)) { /* keep the newest half */
		memmove(logbuf, logbuf + sizeof(logbuf) / 2, loglen - sizeof(logbuf) / 2);
		loglen -= sizeof(logbuf) / 2;
	}
	memcpy(logbuf + loglen, line, (size_t)n);
	loglen += (size_t)n;
	logbuf[loglen] = 0;
	if (verbose || (level == LIBBPF_WARN && getenv("PARKWAY_LIBBPF_WARN")))
		fputs(line, stderr);
	return n;
}

/* The last `want` lines of the verifier log that libbpf printed. */
static void print_verifier_tail(int want)
{
	const char *start = strstr(logbuf, "-- BEGIN PROG LOAD LOG --");
	const char *end = start ? strstr(start, "-- END PROG LOAD LOG --") : NULL;
	const char *p;
	int lines = 0;

	if (!start || !end) {
		fprintf(stderr, "parkway: (libbpf printed no verifier log)\n");
		return;
	}
	start = strchr(start, '\n') + 1;
	for (p = end; p > start; p--)
		if (p[-1] == '\n' && ++lines > want)
			break;
	fprintf(stderr, "parkway: verifier log, last %d lines:\n%.*s", want, (int)(end - p), p);
}

/* Name of the program libbpf says the kernel rejected, or "?". libbpf
 * logs "prog 'NAME': BPF program load failed: ...". */
static void rejected_prog(char *out, size_t len)
{
	const char *fail = strstr(logbuf, "': BPF program load failed");
	const char *p = fail;

	while (p && p > logbuf && strncmp(p, "prog '", 6) != 0)
		p--;
	if (!fail || !p || strncmp(p, "prog '", 6) != 0)
		snprintf(out, len, "?");
	else
		snprintf(out, len, "%.*s", (int)(fail - p - 6), p + 6);
}

static bool ensure_bpffs(void)
{
	struct statfs st;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC)
		return true;
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL) == 0)
		return true;
	fprintf(stderr, "parkway: /sys/fs/bpf is not a bpf filesystem and mounting one failed: %s\n",
		strerror(errno));
	return false;
}

static bool pin_maps(struct bpf_object *obj)
{
	static const struct { const char *map, *path; } pins[] = {
		{ "workers", PARKWAY_PIN_WORKERS }, { "tids", PARKWAY_PIN_TIDS },
		{ "stats", PARKWAY_PIN_STATS },     { "procs", PARKWAY_PIN_PROCS },
		{ "runtime", PARKWAY_PIN_RUNTIME },
	};

	if (!ensure_bpffs())
		return false;
	unpin_all(); /* pins left by a loader that was killed */
	mkdir(PARKWAY_PIN_DIR, 0755);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, pins[i].map);
		int err = m ? bpf_map__pin(m, pins[i].path) : -ENOENT;

		if (err) {
			fprintf(stderr, "parkway: cannot pin map %s at %s: %s\n", pins[i].map,
				pins[i].path, strerror(-err));
			return false;
		}
	}
	return true;
}

static void write_pid_file(void)
{
	FILE *f = fopen(PARKWAY_PID_FILE, "w");

	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
}

/* Refuses (naming it) when any sched_ext scheduler is loaded already. */
static bool check_not_loaded(void)
{
	char state[32], ops[160];
	int pid;

	scx_state(state, sizeof(state));
	if (strcmp(state, "disabled") == 0 || state[0] == 0)
		return true;
	scx_ops_name(ops, sizeof(ops));
	pid = loader_pid();
	if (strncmp(ops, PARKWAY_OPS_NAME, strlen(PARKWAY_OPS_NAME)) == 0 && pid)
		fprintf(stderr, "parkway: the parkway scheduler is already loaded (loader pid %d); "
				"`parkway sched unload` first\n", pid);
	else
		fprintf(stderr, "parkway: another sched_ext scheduler is already loaded: \"%s\" "
				"(state %s); unload it first\n", ops[0] ? ops : "?", state);
	return false;
}

/* True once SCX_SYSFS/state has read "disabled" for `ms` milliseconds of
 * consecutive polls (called every 100 ms). */
static bool scx_disabled_for(int ms)
{
	static int polls;
	char state[32];

	scx_state(state, sizeof(state));
	polls = strcmp(state, "disabled") == 0 ? polls + 1 : 0;
	return polls * 100 >= ms;
}

static int report_exit(const struct parkway_exit_info *uei)
{
	printf("parkway: the kernel ended the scheduler: kind %lld (%s), exit code %lld\n",
	       (long long)uei->kind, exit_kind_name(uei->kind), (long long)uei->exit_code);
	printf("parkway: reason: %s\n", uei->reason[0] ? uei->reason : "(none)");
	if (uei->msg[0])
		printf("parkway: message: %s\n", uei->msg);
	fflush(stdout);
	return EXIT_FAIL;
}

int sched_load(const struct load_opts *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "scx_parkway");
	struct bpf_object *obj = NULL;
	struct bpf_link *link = NULL;
	struct bpf_map *ops, *m;
	struct parkway_cfg *cfg;
	volatile struct parkway_exit_info *uei;
	uint64_t st[PARKWAY_NR_STATS];
	size_t sz;
	int err, rc = EXIT_FAIL;
	bool pinned = false;
	struct timespec last, now;

	verbose = o->verbose;
	libbpf_set_print(libbpf_print);
	if (!check_sched_ext_present() || !check_root())
		return EXIT_ENV;
	if (!check_not_loaded())
		return EXIT_ENV;

	obj = bpf_object__open_mem(parkway_bpf_obj, (size_t)(parkway_bpf_obj_end - parkway_bpf_obj), &oo);
	if (!obj) {
		fprintf(stderr, "parkway: cannot open the embedded BPF object: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	m = bpf_object__find_map_by_name(obj, ".rodata.cfg");
	cfg = m ? bpf_map__initial_value(m, &sz) : NULL;
	if (!cfg || sz < sizeof(*cfg)) {
		fprintf(stderr, "parkway: BPF object has no .rodata.cfg section\n");
		goto out;
	}
	cfg->slice_ns = (uint64_t)o->slice_us * 1000;
	cfg->search_penalty_ns = 20 * cfg->slice_ns;
	cfg->bad_verifier = o->debug_bad_verifier;
	snprintf(cfg->stall_comm, sizeof(cfg->stall_comm), "%s", o->debug_stall_comm ? o->debug_stall_comm : "");

	err = bpf_object__load(obj);
	if (err) {
		char prog[64];

		rejected_prog(prog, sizeof(prog));
		if (strstr(logbuf, "BEGIN PROG LOAD LOG")) {
			fprintf(stderr, "parkway: the kernel's verifier rejected BPF program '%s' (%s)\n",
				prog, strerror(-err));
			if (verbose)
				print_verifier_tail(20);
			else
				fprintf(stderr, "parkway: rerun with -v to see the verifier's log\n");
		} else {
			fprintf(stderr, "parkway: loading the BPF scheduler failed: %s%s\n", strerror(-err),
				verbose ? "" : " (rerun with -v for libbpf's log)");
		}
		goto out;
	}

	/* Signals first: an unload that arrives from here on stops the loop
	 * below (or skips it) and still unpins and detaches. */
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	/* Pins before attach: a program that starts in between finds the new
	 * maps and, seeing no scheduler enabled yet, runs without one (it
	 * checks again at its next start); pinning after attach left a gap in
	 * which it could map a killed loader's stale pins while our scheduler
	 * was already enabled. */
	if (!pin_maps(obj))
		goto out;
	pinned = true;

	ops = bpf_object__find_map_by_name(obj, "parkway_ops");
	link = ops ? bpf_map__attach_struct_ops(ops) : NULL;
	if (!link) {
		err = -errno;
		if (err == -EEXIST || err == -EBUSY)
			check_not_loaded();
		fprintf(stderr, "parkway: attaching the scheduler failed: %s\n", strerror(-err));
		goto out;
	}
	/* libbpf 1.4 maps internal maps into memory only for skeletons: map the
	 * live .data.uei ourselves. */
	m = bpf_object__find_map_by_name(obj, ".data.uei");
	uei = m ? mmap(NULL, sizeof(*uei), PROT_READ, MAP_SHARED, bpf_map__fd(m), 0) : MAP_FAILED;
	if (uei == MAP_FAILED) {
		fprintf(stderr, "parkway: cannot map the exit-info section: %s\n", strerror(errno));
		goto out;
	}
	write_pid_file();
	printf("parkway: scheduler loaded (pid %d, slice %u us); Ctrl-C or `parkway sched unload` "
	       "restores the default scheduler\n", (int)getpid(), o->slice_us);
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &last);
	while (!stop_requested && !uei->kind) {
		usleep(100 * 1000);
		if (scx_disabled_for(2000))
			break; /* ejected, but ops.exit left no record */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (o->stats_s && now.tv_sec - last.tv_sec >= (time_t)o->stats_s) {
			last = now;
			if (read_stats(st))
				print_stats_line("parkway: ", st);
		}
	}
	if (uei->kind) {
		rc = report_exit((const struct parkway_exit_info *)uei);
	} else if (!stop_requested) {
		printf("parkway: sched_ext was disabled without an exit record from ops.exit\n");
		rc = EXIT_FAIL;
	} else {
		if (read_stats(st))
			print_stats_line("parkway: final: ", st);
		rc = EXIT_OK;
	}
out:
	if (link)
		bpf_link__destroy(link);
	if (pinned)
		unpin_all();
	if (link) {
		unlink(PARKWAY_PID_FILE);
		if (rc == EXIT_OK)
			printf("parkway: scheduler unloaded\n");
	}
	bpf_object__close(obj);
	return rc;
}
