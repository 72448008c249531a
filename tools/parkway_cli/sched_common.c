/* sched_common.c -- see sched_common.h. */
#include "sched_common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static void read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

bool check_sched_ext_present(void)
{
	if (access(SCX_SYSFS, F_OK) == 0)
		return true;
	fprintf(stderr, "parkway: this kernel was built without CONFIG_SCHED_CLASS_EXT "
			"(no %s): sched_ext schedulers cannot run here; parkway works without one\n",
		SCX_SYSFS);
	return false;
}

bool check_root(void)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "parkway: must be run as root: loading a BPF scheduler and reading its "
			"pinned maps need CAP_SYS_ADMIN and CAP_BPF (euid is %u)\n",
		(unsigned)geteuid());
	return false;
}

void scx_state(char *buf, size_t len) { read_line(SCX_SYSFS "/state", buf, len); }

void scx_ops_name(char *buf, size_t len)
{
	read_line(SCX_SYSFS "/root/ops", buf, len);
}

enum scx_holder scx_holder(const char *state, const char *ops)
{
	if (state[0] == 0 || strcmp(state, "disabled") == 0)
		return SCX_NOBODY;
	if (ops[0] == 0)
		return SCX_UNNAMED;
	return strncmp(ops, PARKWAY_OPS_NAME, strlen(PARKWAY_OPS_NAME)) == 0 ? SCX_PARKWAY : SCX_ANOTHER;
}

const char *exit_kind_name(int64_t kind)
{
	switch (kind) {
	case 0: return "none";
	case 1: return "done";
	case 64: return "unregistered (by user space)";
	case 65: return "unregistered (by the BPF scheduler)";
	case 66: return "unregistered (by the kernel)";
	case 67: return "sysrq-S";
	case 1024: return "error";
	case 1025: return "error (raised by the BPF scheduler)";
	case 1026: return "error (watchdog: runnable task stall)";
	default: return "unknown";
	}
}

int loader_pid(void)
{
	char buf[64], path[64], comm[32];
	int pid;

	read_line(PARKWAY_PID_FILE, buf, sizeof(buf));
	pid = atoi(buf);
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	read_line(path, comm, sizeof(comm));
	return strcmp(comm, "parkway") == 0 ? pid : 0;
}

bool read_stats(uint64_t out[PARKWAY_NR_STATS])
{
	int fd = bpf_obj_get(PARKWAY_PIN_STATS);
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	memset(out, 0, sizeof(uint64_t) * PARKWAY_NR_STATS);
	if (fd < 0 || ncpu <= 0) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	vals = calloc((size_t)ncpu, sizeof(uint64_t));
	for (uint32_t i = 0; vals && i < PARKWAY_NR_STATS; i++) {
		if (bpf_map_lookup_elem(fd, &i, vals))
			continue;
		for (int c = 0; c < ncpu; c++) {
			if (!PARKWAY_STAT_IS_MAX(i))
				out[i] += vals[c];
			else if (vals[c] > out[i])
				out[i] = vals[c];
		}
	}
	free(vals);
	close(fd);
	return true;
}

void print_stats_line(const char *prefix, const uint64_t s[PARKWAY_NR_STATS])
{
	static const char *names[] = PARKWAY_STAT_NAMES;

	printf("%s", prefix);
	for (int i = 0; i < PARKWAY_NR_STATS; i++)
		printf("%s%s=%llu", i ? " " : "", names[i], (unsigned long long)s[i]);
	printf("\n");
	fflush(stdout);
}

void print_programs(void)
{
	int pfd = bpf_obj_get(PARKWAY_PIN_PROCS);
	int rfd = bpf_obj_get(PARKWAY_PIN_RUNTIME);
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = ncpu > 0 ? calloc((size_t)ncpu, sizeof(uint64_t)) : NULL;
	uint32_t key, next, *prev = NULL, entries = 0, gone = 0, gone_ids[8];
	struct parkway_runtime_key rkey, rnext, *rprev = NULL;
	struct parkway_proc pr;
	uint64_t total = 0, gone_ns = 0;

	if (pfd < 0 || rfd < 0 || !vals)
		goto out;
	/* First pass: all programs' CPU time, for the shares; and the entries
	 * of programs that no longer run (the scheduler drops a program's
	 * entry once its last thread is freed: any left is a leak). An entry
	 * is a tgid and its leader's start time: one whose tgid now names
	 * another program (a procs record with another start time) is gone
	 * too. */
	while (!bpf_map_get_next_key(rfd, rprev, &rnext)) {
		uint64_t ns = 0;

		rkey = rnext;
		rprev = &rkey;
		if (!bpf_map_lookup_elem(rfd, &rkey, vals))
			for (int c = 0; c < ncpu; c++)
				ns += vals[c];
		total += ns;
		entries++;
		key = rkey.tgid;
		if ((kill((pid_t)key, 0) != 0 && errno == ESRCH) ||
		    (!bpf_map_lookup_elem(pfd, &key, &pr) && pr.start_ns != rkey.start_ns &&
		     pr.start_ns != ~0ULL)) {
			if (gone < 8)
				gone_ids[gone] = key;
			gone++;
			gone_ns += ns;
		}
	}
	prev = NULL;
	printf("programs (tgid comm cpu_ms share_of_all_cpu_time registered workers, by state):\n");
	while (!bpf_map_get_next_key(pfd, prev, &next)) {
		uint64_t ns = 0;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(pfd, &key, &pr))
			continue;
		rkey = (struct parkway_runtime_key){ .tgid = key, .start_ns = pr.start_ns };
		if (!bpf_map_lookup_elem(rfd, &rkey, vals))
			for (int c = 0; c < ncpu; c++)
				ns += vals[c];
		if (ns < 1000000 && !pr.workers && !pr.refused)
			continue; /* keep the table short: skip programs under 1 ms */
		printf("program %u %.16s cpu_ms=%llu share=%.1f%% workers=%u", key, pr.comm,
		       (unsigned long long)(ns / 1000000), total ? 100.0 * (double)ns / (double)total : 0.0,
		       pr.workers);
		if (pr.workers)
			printf(" (busy %u, searching %u, parked %u, off %u)",
			       pr.by_state[PARKWAY_W_BUSY], pr.by_state[PARKWAY_W_SEARCHING],
			       pr.by_state[PARKWAY_W_PARKED], pr.by_state[PARKWAY_W_OFF]);
		if (pr.refused)
			printf(" refused=%u", pr.refused);
		printf("\n");
	}
	printf("runtime: %u programs, %u of them exited (%llu ms)", entries, gone,
	       (unsigned long long)(gone_ns / 1000000));
	for (uint32_t i = 0; i < gone && i < 8; i++)
		printf("%s%u", i ? " " : ": ", gone_ids[i]);
	printf("%s\n", gone > 8 ? " ..." : "");
out:
	free(vals);
	if (pfd >= 0)
		close(pfd);
	if (rfd >= 0)
		close(rfd);
}
