/* sched_status.c -- `parkway sched status` and `parkway sched unload`. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sched_cli.h"
#include "sched_common.h"
#include "sched_pins.h"

static bool ours_loaded(const char *state, const char *ops)
{
	return strcmp(state, "enabled") == 0 && scx_holder(state, ops) == SCX_PARKWAY;
}

int sched_status(void)
{
	char state[32], ops[160];
	uint64_t st[PARKWAY_NR_STATS];

	if (access(SCX_SYSFS, F_OK) != 0) {
		printf("sched_ext: not available (this kernel was built without CONFIG_SCHED_CLASS_EXT)\n");
		return EXIT_OK;
	}
	scx_state(state, sizeof(state));
	scx_ops_name(ops, sizeof(ops));
	printf("sched_ext: present, state %s, ops %s\n", state[0] ? state : "?",
	       ops[0] ? ops : "(none)");
	if (!ours_loaded(state, ops))
		return EXIT_OK;
	printf("parkway scheduler: loaded by pid %d\n", loader_pid());
	if (geteuid() != 0) {
		printf("(counters need root)\n");
		return EXIT_OK;
	}
	if (read_stats(st))
		print_stats_line("counters: ", st);
	print_programs();
	return EXIT_OK;
}

/* How long `unload` waits for a loader to start or to leave. */
#define UNLOAD_WAIT_MS 30000
#define POLL_MS 50

/* Waits up to `ms` for the loader that holds the lock to exit or release
 * it: then it has detached the scheduler and removed its pins, mount and
 * pid file, and a new `load` can take the lock. */
static bool wait_loader_gone(int ms)
{
	for (int i = 0; i < ms / POLL_MS; i++) {
		int lock = pins_try_lock();

		if (lock >= 0) {
			close(lock);
			return true;
		}
		if (lock != PINS_LOCK_HELD)
			return false; /* said why */
		usleep(POLL_MS * 1000);
	}
	fprintf(stderr, "parkway: the loader still holds %s %d s later\n", PARKWAY_LOCK_FILE, ms / 1000);
	return false;
}

/* `parkway sched unload`: stop the loader and wait until it has left (its
 * lock released), so that `unload && load` works. A loader that is still
 * starting (it holds the lock, no scheduler attached yet) is waited for,
 * then stopped the same way; one that gives up on its own leaves nothing
 * to unload. With no loader at all, removes what a killed one left. A
 * scheduler whose name cannot be read yet (the kernel is still bringing
 * it in, or taking it out) is waited for too, then judged by its name. */
int sched_unload(void)
{
	char state[32], ops[160];
	bool said_waiting = false, saw_loader = false;
	int pid, waited_ms = 0;

	if (!check_sched_ext_present() || !check_root())
		return EXIT_ENV;
	for (;; waited_ms += POLL_MS, usleep(POLL_MS * 1000)) {
		enum scx_holder holder;
		int lock;

		scx_state(state, sizeof(state));
		scx_ops_name(ops, sizeof(ops));
		holder = scx_holder(state, ops);
		pid = loader_pid();
		if (holder == SCX_ANOTHER) {
			fprintf(stderr, "parkway: the loaded sched_ext scheduler is \"%s\", not parkway; "
					"not touching it\n", ops);
			return EXIT_ENV;
		}
		if (holder == SCX_PARKWAY && strcmp(state, "enabled") == 0 && pid)
			break; /* ours, with its loader: stop it */
		lock = pins_try_lock();
		if (lock >= 0 && holder == SCX_NOBODY) {
			/* No loader: remove what a killed one left. */
			pins_remove();
			close(lock);
			if (saw_loader)
				printf("parkway: the loader that held %s has exited; no sched_ext "
				       "scheduler is loaded\n", PARKWAY_LOCK_FILE);
			else
				printf("parkway: no sched_ext scheduler is loaded\n");
			return EXIT_OK;
		}
		if (lock >= 0 && holder == SCX_PARKWAY && strcmp(state, "enabled") == 0) {
			pins_remove();
			close(lock);
			fprintf(stderr, "parkway: the parkway scheduler is enabled but no loader runs\n");
			return EXIT_FAIL;
		}
		if (lock >= 0)
			close(lock); /* no loader; sched_ext is between two states */
		else if (lock != PINS_LOCK_HELD)
			return EXIT_ENV; /* said why */
		/* A loader holds the lock but the scheduler is not (or not yet)
		 * enabled with its pid file: it is starting, or leaving. Or no
		 * loader does and sched_ext is on its way between two states. */
		saw_loader |= lock == PINS_LOCK_HELD;
		if (!said_waiting) {
			if (lock == PINS_LOCK_HELD)
				printf("parkway: a `parkway sched load` holds %s but has not loaded the "
				       "scheduler yet (state %s); waiting up to %d s for it\n",
				       PARKWAY_LOCK_FILE, state[0] ? state : "?", UNLOAD_WAIT_MS / 1000);
			else
				printf("parkway: sched_ext is %s%s%s%s; waiting up to %d s for it to settle\n",
				       state, ops[0] ? " (" : "", ops, ops[0] ? ")" : "", UNLOAD_WAIT_MS / 1000);
			fflush(stdout);
			said_waiting = true;
		}
		if (waited_ms >= UNLOAD_WAIT_MS) {
			fprintf(stderr, "parkway: sched_ext was still %s after %d s (%s); not unloading\n",
				state, UNLOAD_WAIT_MS / 1000,
				lock == PINS_LOCK_HELD ? "a loader holds the lock" : "no loader runs");
			return EXIT_FAIL;
		}
	}
	/* ESRCH: the loader exited since its pid was read; it unloads on
	 * its way out, which wait_loader_gone sees. */
	if (kill(pid, SIGTERM) == 0) {
		/* A stopped loader (Ctrl-Z, SIGSTOP) keeps SIGTERM pending, and
		 * the scheduler loaded, until it is continued. */
		kill(pid, SIGCONT);
	} else if (errno != ESRCH) {
		perror("parkway: kill");
		return EXIT_FAIL;
	}
	if (!wait_loader_gone(UNLOAD_WAIT_MS))
		return EXIT_FAIL;
	scx_state(state, sizeof(state));
	if (strcmp(state, "disabled") != 0) {
		fprintf(stderr, "parkway: loader pid %d left but sched_ext is %s\n", pid, state);
		return EXIT_FAIL;
	}
	printf("parkway: unloaded (loader pid %d stopped, default scheduler restored)\n", pid);
	return EXIT_OK;
}
