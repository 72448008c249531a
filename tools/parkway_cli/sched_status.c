/* sched_status.c -- `parkway sched status` and `parkway sched unload`. */
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
	return strcmp(state, "enabled") == 0 &&
	       strncmp(ops, PARKWAY_OPS_NAME, strlen(PARKWAY_OPS_NAME)) == 0;
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
 * to unload. With no loader at all, removes what a killed one left. */
int sched_unload(void)
{
	char state[32], ops[160];
	bool said_starting = false;
	int pid, waited_ms = 0;

	if (!check_sched_ext_present() || !check_root())
		return EXIT_ENV;
	for (;; waited_ms += POLL_MS, usleep(POLL_MS * 1000)) {
		int lock;

		scx_state(state, sizeof(state));
		scx_ops_name(ops, sizeof(ops));
		pid = loader_pid();
		if (strcmp(state, "disabled") != 0 &&
		    strncmp(ops, PARKWAY_OPS_NAME, strlen(PARKWAY_OPS_NAME)) != 0) {
			fprintf(stderr, "parkway: the loaded sched_ext scheduler is \"%s\", not parkway; "
					"not touching it\n", ops);
			return EXIT_ENV;
		}
		if (strcmp(state, "enabled") == 0 && pid)
			break; /* ours, with its loader: stop it */
		lock = pins_try_lock();
		if (lock >= 0) {
			/* No loader: remove what a killed one left. */
			pins_remove();
			close(lock);
			if (strcmp(state, "disabled") != 0) {
				fprintf(stderr, "parkway: the parkway scheduler is %s but no loader runs\n",
					state);
				return EXIT_FAIL;
			}
			printf(said_starting ? "parkway: the starting loader exited without loading the "
					       "scheduler; nothing to unload\n"
					     : "parkway: no sched_ext scheduler is loaded\n");
			return EXIT_OK;
		}
		if (lock != PINS_LOCK_HELD)
			return EXIT_ENV; /* said why */
		/* A loader holds the lock but the scheduler is not (or not yet)
		 * enabled with its pid file: it is starting, or leaving. */
		if (!said_starting) {
			printf("parkway: a `parkway sched load` holds %s but has not loaded the scheduler "
			       "yet (state %s); waiting up to %d s for it\n", PARKWAY_LOCK_FILE,
			       state[0] ? state : "?", UNLOAD_WAIT_MS / 1000);
			fflush(stdout);
			said_starting = true;
		}
		if (waited_ms >= UNLOAD_WAIT_MS) {
			fprintf(stderr, "parkway: the loader still had not loaded the scheduler or exited "
					"after %d s; not unloading\n", UNLOAD_WAIT_MS / 1000);
			return EXIT_FAIL;
		}
	}
	if (kill(pid, SIGTERM) != 0) {
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
