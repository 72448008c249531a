/* check_cli_load.c -- what `parkway sched load` does on its ways out that
 * needs no root or sched_ext: the verifier log's tail on a rejection (-v),
 * the signals that become an unload, and whom `unload` takes sched_ext's
 * sysfs files to name. Includes sched_load.c to reach
 * its static functions; run by `make test-cli` (tools/tools.mk).
 * One line per check, then "N passed, N failed, 0 skipped". */
#include "../tools/parkway_cli/sched_load.c"

const unsigned char parkway_bpf_obj[1];
const unsigned char parkway_bpf_obj_end[1];

static int pass, fail;

static void check(bool good, const char *what)
{
	printf("%s: %s\n", good ? "ok" : "FAIL", what);
	if (good)
		pass++;
	else
		fail++;
}

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	libbpf_print(LIBBPF_WARN, fmt, ap);
	va_end(ap);
}

/* libbpf prints a rejected program's whole verifier log as one message;
 * a real one is often far longer than a line. */
static void verifier_tail_of_a_long_log(void)
{
	char *log = malloc(1 << 20), out[8192] = "";
	size_t len = 0;
	FILE *f = tmpfile();
	int saved = dup(2);

	for (int i = 0; i < 20000; i++)
		len += (size_t)sprintf(log + len, "%d: (bf) r%d = r1 ; R1_w=ctx() R10=fp0\n", i, i % 10);
	strcpy(log + len, "invalid access to map value, value_size=8 off=512 size=8\n");
	say("libbpf: prog '%s': BPF program load failed: %s\n", "pw_enqueue", "Permission denied");
	say("libbpf: prog '%s': -- BEGIN PROG LOAD LOG --\n%s-- END PROG LOAD LOG --\n", "pw_enqueue", log);
	say("libbpf: prog '%s': failed to load: -13\n", "pw_enqueue");
	fflush(stderr);
	dup2(fileno(f), 2);
	print_verifier_tail(20);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	out[fread(out, 1, sizeof(out) - 1, f)] = 0;
	fclose(f);
	check(strstr(out, "verifier log, last 20 lines") && strstr(out, "19999: (bf)") &&
	      strstr(out, "invalid access to map value") && !strstr(out, "19980: (bf)"),
	      "-v on a rejection: the last 20 lines of a 1 MB verifier log");
	free(log);
}

/* Every signal whose default action ends the process, faults aside,
 * becomes a request to unload (so the pins, the mount and the pid file
 * go): the real-time signals and SIGSTKFLT too. */
static void every_ending_signal_is_caught(void)
{
	static const int not_ending[] = { SIGKILL, SIGSTOP, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE,
					  SIGSEGV, SIGSYS, SIGCHLD, SIGCONT, SIGURG, SIGWINCH,
					  SIGTSTP, SIGTTIN, SIGTTOU };
	char missed[256] = "";

	catch_exit_signals();
	for (int sig = 1; sig <= SIGRTMAX; sig++) {
		struct sigaction sa;
		bool skip = sig > SIGSYS && sig < SIGRTMIN; /* glibc's own */

		for (size_t i = 0; i < sizeof(not_ending) / sizeof(not_ending[0]); i++)
			skip = skip || sig == not_ending[i];
		if (skip || sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler != on_signal)
			snprintf(missed + strlen(missed), sizeof(missed) - strlen(missed), " %d", sig);
	}
	if (missed[0])
		printf("  not caught:%s\n", missed);
	check(!missed[0], "every signal that ends a process without a fault unloads");
}

/* A loader started with those signals blocked (a signal mask is inherited
 * across fork and exec) still hears them: a blocked SIGTERM would stay
 * pending, and `unload` would wait 30 s and leave the scheduler loaded. */
static void a_blocked_signal_still_unloads(void)
{
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &set, &old);
	stop_requested = 0;
	catch_exit_signals();
	raise(SIGTERM);
	check(stop_requested, "SIGTERM blocked when the loader starts: still a request to unload");
	sigprocmask(SIG_SETMASK, &old, NULL);
	stop_requested = 0;
}

/* `unload` reads state and root/ops apart; the kernel shows "enabling"
 * before root/ops exists. Such a pair is no other scheduler: unload must
 * wait for the name, not refuse a parkway loader that is starting. */
static void a_scheduler_without_a_name_is_not_another(void)
{
	static const struct {
		const char *state, *ops;
		enum scx_holder want;
	} pairs[] = {
		{"disabled", "", SCX_NOBODY},
		{"", "", SCX_NOBODY},
		{"enabling", "", SCX_UNNAMED},
		{"disabling", "", SCX_UNNAMED},
		{"enabled", "", SCX_UNNAMED},
		{"enabling", PARKWAY_OPS_NAME, SCX_PARKWAY},
		{"enabled", PARKWAY_OPS_NAME, SCX_PARKWAY},
		{"enabled", "rusty_1.0.4_x86_64", SCX_ANOTHER},
		{"disabled", "rusty_1.0.4_x86_64", SCX_NOBODY},
	};
	char what[128];

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		enum scx_holder got = scx_holder(pairs[i].state, pairs[i].ops);

		snprintf(what, sizeof(what), "state \"%s\", ops \"%s\": holder %d (want %d)",
			 pairs[i].state, pairs[i].ops, (int)got, (int)pairs[i].want);
		check(got == pairs[i].want, what);
	}
}

int main(void)
{
	verifier_tail_of_a_long_log();
	every_ending_signal_is_caught();
	a_blocked_signal_still_unloads();
	a_scheduler_without_a_name_is_not_another();
	printf("%d passed, %d failed, 0 skipped\n", pass, fail);
	return fail != 0;
}
