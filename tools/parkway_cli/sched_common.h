/* sched_common.h -- what `parkway sched load|status|unload` share: the
 * checks behind the clear errors, sysfs state, and reading our pinned maps. */
#ifndef PARKWAY_CLI_SCHED_COMMON_H
#define PARKWAY_CLI_SCHED_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/parkway_sched.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_ENV = 3 };

#define SCX_SYSFS "/sys/kernel/sched_ext"

/* Prints the reason and returns false when this kernel has no sched_ext or
 * we are not root. */
bool check_sched_ext_present(void);
bool check_root(void);

/* Contents of SCX_SYSFS/state ("enabled", "disabled", ...) and
 * SCX_SYSFS/root/ops (the loaded scheduler's name), "" when unreadable. */
void scx_state(char *buf, size_t len);
void scx_ops_name(char *buf, size_t len);

/* Who holds sched_ext, from those two: nobody ("disabled", or no state
 * file), parkway, another scheduler, or not known yet. The last is a state
 * other than "disabled" with no ops name: the kernel enters "enabling"
 * before it adds root/ops (7.2 shows "enabling" with no root/ops for a
 * moment), so a scheduler on its way in has no name to read yet. */
enum scx_holder { SCX_NOBODY, SCX_PARKWAY, SCX_ANOTHER, SCX_UNNAMED };
enum scx_holder scx_holder(const char *state, const char *ops);

/* Kernel exit kinds by name (enum scx_exit_kind). */
const char *exit_kind_name(int64_t kind);

/* Pid of the running loader (from PARKWAY_PID_FILE, checked against
 * /proc/PID/comm), or 0. */
int loader_pid(void);

/* Sum of the per-CPU counters in the pinned stats map; false if unpinned. */
bool read_stats(uint64_t out[PARKWAY_NR_STATS]);
void print_stats_line(const char *prefix, const uint64_t s[PARKWAY_NR_STATS]);

/* Prints the per-program table (CPU time, registered workers). */
void print_programs(void);

#endif
