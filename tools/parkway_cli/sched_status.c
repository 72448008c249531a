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

/* Waits up to `ms` for sched_ext to report `disabled`. */
static bool wait_disabled(int ms)
{
	char state[32];

	for (int i = 0; i < ms / 50; i++) {
		scx_state(state, sizeof(state));
		if (strcmp(state, "disabled") == 0)
			return true;
		usleep(50 * 1000);
	}
	return false;
}

int sched_unload(void)
{
	char state[32], ops[160];
	int pid;

	if (!check_sched_ext_present() || !check_root())
		return EXIT_ENV;
	scx_state(state, sizeof(state));
	scx_ops_name(ops, sizeof(ops));
	pid = loader_pid();
	if (strcmp(state, "disabled") == 0) {
		int lock = pid ? -1 : pins_lock();

		if (lock >= 0) { /* no loader: remove what a killed one left */
			pins_remove();
			close(lock);
		}
		printf("parkway: no sched_ext scheduler is loaded\n");
		return EXIT_OK;
	}
	if (strncmp(ops, PARKWAY_OPS_NAME, strlen(PARKWAY_OPS_NAME)) != 0) {
		fprintf(stderr, "parkway: the loaded sched_ext scheduler is \"%s\", not parkway; "
				"not touching it\n", ops);
		return EXIT_ENV;
	}
	if (!pid) {
		fprintf(stderr, "parkway: the parkway scheduler is loaded but its loader is not "
				"running (see %s)\n", PARKWAY_PID_FILE);
		return EXIT_FAIL;
	}
	if (kill(pid, SIGTERM) != 0) {
		perror("parkway: kill");
		return EXIT_FAIL;
	}
	if (!wait_disabled(10000)) {
		fprintf(stderr, "parkway: sched_ext still not disabled 10 s after SIGTERM to pid %d\n", pid);
		return EXIT_FAIL;
	}
	printf("parkway: unloaded (loader pid %d stopped, default scheduler restored)\n", pid);
	return EXIT_OK;
}
