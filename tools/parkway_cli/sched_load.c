/* sched_load.c -- `parkway sched load`: take the loader's lock, check the
 * slice settings against the wait bound, open the embedded BPF object with
 * libbpf's object API, set its .rodata.cfg, load, pin the registration
 * program and the maps `status` needs into a bpffs of our own, attach the
 * struct_ops link, then wait: print a stats line every --stats seconds,
 * leave on any signal that would otherwise end the process (SIGINT,
 * SIGTERM, SIGHUP, SIGPIPE when --stats writes into a closed pipe, ...;
 * the kernel goes back to the default scheduler when the link is
 * destroyed, or when this process dies), and report the kernel's exit info
 * if it ejects us. Every way out after the lock removes the pins, the
 * mount and the pid file; only SIGKILL (and a crash) leaves them, for the
 * next load or `parkway sched unload` to remove. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "sched_cli.h"
#include "sched_common.h"
#include "sched_pins.h"

/* The scheduler object, linked in by bpf_obj.S. */
extern const unsigned char parkway_bpf_obj[];
extern const unsigned char parkway_bpf_obj_end[];

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

/* Every signal whose default action ends the process, faults aside: each
 * one becomes a request to unload, so the way out runs. No SA_RESTART: it
 * cuts the wait loop's sleep short. They are unblocked too: a mask
 * inherited across exec would keep them pending, and the scheduler
 * loaded. */
static void catch_exit_signals(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1,
				    SIGUSR2, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR };
	struct sigaction sa;
	sigset_t caught;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&caught);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&caught, sigs[i]);
	}
#ifdef SIGSTKFLT
	sigaction(SIGSTKFLT, &sa, NULL);
	sigaddset(&caught, SIGSTKFLT);
#endif
	/* The real-time signals end a process by default too. */
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++) {
		sigaction(sig, &sa, NULL);
		sigaddset(&caught, sig);
	}
	sigprocmask(SIG_UNBLOCK, &caught, NULL);
}

/* libbpf's messages: all printed with -v (PARKWAY_LIBBPF_WARN=1: its
 * warnings). A rejection is remembered as it is printed: libbpf names the
 * program in one message ("prog 'NAME': BPF program load failed") and
 * prints the whole verifier log in the next ("prog 'NAME': -- BEGIN PROG
 * LOAD LOG --\n...-- END PROG LOAD LOG --\n"), which can be megabytes: its
 * last lines are kept here, whatever its length. */
#define TAIL_LINES 20
static bool verbose;
static bool saw_verifier_log;
static char rejected[64] = "?";
static char verifier_tail[16384];

static void note_message(const char *msg)
{
	const char *fail = strstr(msg, "': BPF program load failed");
	const char *begin = strstr(msg, "-- BEGIN PROG LOAD LOG --");
	const char *start, *end, *p;
	size_t len;
	int lines = 0;

	if (fail) {
		for (p = fail; p > msg && strncmp(p, "prog '", 6) != 0; p--)
			;
		if (strncmp(p, "prog '", 6) == 0)
			snprintf(rejected, sizeof(rejected), "%.*s", (int)(fail - p - 6), p + 6);
	}
	if (!begin)
		return;
	saw_verifier_log = true;
	start = strchr(begin, '\n');
	start = start ? start + 1 : begin + strlen(begin);
	end = strstr(start, "-- END PROG LOAD LOG --");
	if (!end)
		end = start + strlen(start);
	for (p = end; p > start; p--)
		if (p[-1] == '\n' && ++lines > TAIL_LINES)
			break;
	len = (size_t)(end - p);
	if (len >= sizeof(verifier_tail)) { /* very long lines: keep their end */
		p = end - (sizeof(verifier_tail) - 1);
		len = sizeof(verifier_tail) - 1;
	}
	memcpy(verifier_tail, p, len);
	verifier_tail[len] = 0;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char small[1024], *msg = small;
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(small, sizeof(small), fmt, aq);
	va_end(aq);
	if (n < 0)
		return n;
	if ((size_t)n >= sizeof(small)) {
		msg = malloc((size_t)n + 1);
		if (!msg)
			return -1;
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
	}
	note_message(msg);
	if (verbose || (level == LIBBPF_WARN && getenv("PARKWAY_LIBBPF_WARN")))
		fputs(msg, stderr);
	if (msg != small)
		free(msg);
	return n;
}

/* The last `want` (at most TAIL_LINES) lines of the verifier log that
 * libbpf printed. */
static void print_verifier_tail(int want)
{
	const char *p = verifier_tail + strlen(verifier_tail);
	int lines = 0;

	if (!saw_verifier_log) {
		fprintf(stderr, "parkway: (libbpf printed no verifier log)\n");
		return;
	}
	while (p > verifier_tail && !(p[-1] == '\n' && ++lines > want))
		p--;
	fprintf(stderr, "parkway: verifier log, last %d lines:\n%s", want, p);
}

/* Pins the registration program (mode 0666: any user may run it; it acts
 * on the calling thread only) and the maps `parkway sched status` reads
 * (root only) into PARKWAY_PIN_DIR. */
static bool pin_all(struct bpf_object *obj)
{
	static const struct { const char *map, *path; } pins[] = {
		{ "stats", PARKWAY_PIN_STATS }, { "procs", PARKWAY_PIN_PROCS },
		{ "runtime", PARKWAY_PIN_RUNTIME }, { "events", PARKWAY_PIN_EVENTS },
	};
	struct bpf_program *reg = bpf_object__find_program_by_name(obj, "pw_register");
	int err;

	if (!pins_prepare())
		return false;
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, pins[i].map);

		err = m ? bpf_map__pin(m, pins[i].path) : -ENOENT;
		if (err) {
			fprintf(stderr, "parkway: cannot pin map %s at %s: %s\n", pins[i].map,
				pins[i].path, strerror(-err));
			return false;
		}
	}
	err = reg ? bpf_program__pin(reg, PARKWAY_PIN_REGISTER) : -ENOENT;
	if (!err && chmod(PARKWAY_PIN_REGISTER, 0666) != 0)
		err = -errno;
	if (err) {
		fprintf(stderr, "parkway: cannot pin the registration program at %s: %s\n",
			PARKWAY_PIN_REGISTER, strerror(-err));
		return false;
	}
	return true;
}

/* The slice settings, checked against the wait bound
 * (docs/design/sched-ext.md, "The wait bound"): with P penalty slices and
 * C CPUs, a queued task waits at most (2P + C + 6) x latency, plus tick
 * terms, while slices are above their floor. latency is chosen so that
 * this stays within WAIT_BUDGET_NS and at most MAX_LATENCY_NS; a longest
 * slice above latency would break the bound. */
#define WAIT_BUDGET_NS 1000000000ULL
#define MAX_LATENCY_NS 50000000ULL
#define SLICE_FLOOR_NS 500000ULL

static bool plan_slices(const struct load_opts *o, struct parkway_cfg *cfg)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t c = online > 0 ? (uint64_t)online : 1;
	uint64_t factor = 2 * (uint64_t)o->penalty_slices + c + 6;
	uint64_t latency = WAIT_BUDGET_NS / factor;
	uint64_t slice = (uint64_t)o->slice_us * 1000;

	if (latency > MAX_LATENCY_NS)
		latency = MAX_LATENCY_NS;
	if (slice > latency && !o->slice_given)
		slice = latency; /* the default does not fit this many CPUs */
	if (slice > latency) {
		fprintf(stderr, "parkway sched load: --slice-us %u breaks the wait bound: with %u CPUs and "
				"--penalty-slices %u, slices above %llu us let a queued task wait more than "
				"%llu ms ((2 x %u + %u + 6) latencies; docs/design/sched-ext.md, "
				"\"The wait bound\")\n",
			o->slice_us, (unsigned)c, o->penalty_slices, (unsigned long long)(latency / 1000),
			WAIT_BUDGET_NS / 1000000, o->penalty_slices, (unsigned)c);
		return false;
	}
	cfg->slice_ns = slice;
	cfg->slice_min_ns = slice < SLICE_FLOOR_NS ? slice : SLICE_FLOOR_NS;
	cfg->latency_ns = latency;
	cfg->penalty_slices = o->penalty_slices;
	cfg->nr_cpus = (uint32_t)c;
	cfg->max_workers = o->max_workers;
	return true;
}

/* Sets the ops' timeout_ms (the kernel's stall watchdog) before load,
 * finding the field through the object's BTF: this C file has no
 * struct sched_ext_ops. */
static bool set_watchdog_ms(struct bpf_object *obj, unsigned ms)
{
	struct bpf_map *ops = bpf_object__find_map_by_name(obj, "parkway_ops");
	struct btf *btf = bpf_object__btf(obj);
	size_t sz = 0;
	char *data = ops ? bpf_map__initial_value(ops, &sz) : NULL;
	int id = btf ? btf__find_by_name_kind(btf, "sched_ext_ops", BTF_KIND_STRUCT) : -1;
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, (__u32)id) : NULL;
	const struct btf_member *m = t ? btf_members(t) : NULL;

	for (int i = 0; data && m && i < btf_vlen(t); i++, m++) {
		size_t off = btf_member_bit_offset(t, (__u32)i) / 8;

		if (strcmp(btf__name_by_offset(btf, m->name_off), "timeout_ms") != 0)
			continue;
		if (off + sizeof(__u32) > sz)
			break;
		memcpy(data + off, &ms, sizeof(__u32));
		return true;
	}
	fprintf(stderr, "parkway: cannot find sched_ext_ops.timeout_ms in the BPF object\n");
	return false;
}

/* Refuses (naming it) when any sched_ext scheduler is loaded already. */
static bool check_not_loaded(void)
{
	char state[32], ops[160];
	enum scx_holder holder;
	int pid;

	scx_state(state, sizeof(state));
	scx_ops_name(ops, sizeof(ops));
	holder = scx_holder(state, ops);
	if (holder == SCX_NOBODY)
		return true;
	pid = loader_pid();
	if (holder == SCX_PARKWAY && pid)
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
	int err, lock, rc = EXIT_FAIL;
	struct timespec last, now;

	verbose = o->verbose;
	libbpf_set_print(libbpf_print);
	if (!check_sched_ext_present() || !check_root())
		return EXIT_ENV;
	lock = pins_lock();
	if (lock < 0)
		return EXIT_ENV;
	/* From here on every way out removes what a loader leaves behind
	 * (ours, or a killed one's): we hold the lock, so no other loader's.
	 * A pid file now is a killed loader's: gone at once, so that nobody
	 * takes that pid for this loader's while it starts. */
	unlink(PARKWAY_PID_FILE);
	if (!check_not_loaded()) {
		rc = EXIT_ENV;
		goto out;
	}

	obj = bpf_object__open_mem(parkway_bpf_obj, (size_t)(parkway_bpf_obj_end - parkway_bpf_obj), &oo);
	if (!obj) {
		fprintf(stderr, "parkway: cannot open the embedded BPF object: %s\n", strerror(errno));
		goto out;
	}
	m = bpf_object__find_map_by_name(obj, ".rodata.cfg");
	cfg = m ? bpf_map__initial_value(m, &sz) : NULL;
	if (!cfg || sz < sizeof(*cfg)) {
		fprintf(stderr, "parkway: BPF object has no .rodata.cfg section\n");
		goto out;
	}
	if (!plan_slices(o, cfg)) {
		rc = EXIT_USAGE;
		goto out;
	}
	if (o->debug_watchdog_ms && !set_watchdog_ms(obj, o->debug_watchdog_ms))
		goto out;
	cfg->bad_verifier = o->debug_bad_verifier;
	snprintf(cfg->stall_comm, sizeof(cfg->stall_comm), "%s", o->debug_stall_comm ? o->debug_stall_comm : "");

	err = bpf_object__load(obj);
	if (err) {
		if (saw_verifier_log) {
			fprintf(stderr, "parkway: the kernel's verifier rejected BPF program '%s' (%s)\n",
				rejected, strerror(-err));
			if (verbose)
				print_verifier_tail(TAIL_LINES);
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
	catch_exit_signals();
	/* Pins before attach: a program that starts in between finds the new
	 * maps and, seeing no scheduler enabled yet, runs without one (it
	 * checks again at its next start); pinning after attach left a gap in
	 * which it could map a killed loader's stale pins while our scheduler
	 * was already enabled. */
	if (!pin_all(obj))
		goto out;

	ops = bpf_object__find_map_by_name(obj, "parkway_ops");
	link = ops ? bpf_map__attach_struct_ops(ops) : NULL;
	if (!link) {
		err = -errno;
		fprintf(stderr, "parkway: attaching the scheduler failed: %s\n", strerror(-err));
		if (err == -EEXIST || err == -EBUSY) {
			/* Another scheduler appeared after check_not_loaded. */
			if (check_not_loaded())
				fprintf(stderr, "parkway: another sched_ext scheduler was being loaded "
						"(it is gone again)\n");
			rc = EXIT_ENV;
		}
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
	if (!pins_write_pid())
		goto out;
	printf("parkway: scheduler loaded (pid %d, slice %llu us, down to %llu us as the queue grows; "
	       "wait bound %llu ms; at most %u workers per program); Ctrl-C or `parkway sched unload` "
	       "restores the default scheduler\n", (int)getpid(), (unsigned long long)(cfg->slice_ns / 1000),
	       (unsigned long long)(cfg->slice_min_ns / 1000),
	       (unsigned long long)((2 * o->penalty_slices + cfg->nr_cpus + 6) * cfg->latency_ns / 1000000),
	       o->max_workers);
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
	pins_remove();
	if (link && rc == EXIT_OK)
		printf("parkway: scheduler unloaded\n");
	bpf_object__close(obj);
	close(lock);
	return rc;
}
