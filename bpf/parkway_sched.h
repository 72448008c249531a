/* parkway_sched.h -- what the parkway BPF scheduler, its loader and the
 * runtime share: pin paths, the registration record, the per-program record,
 * the load-time settings and the stat indices. Plain C; included by
 * scx_parkway.bpf.c (after vmlinux.h), by tools/parkway_cli and by
 * userspace/sched_ext_link.hpp.
 *
 * The protocol (docs/design/sched-ext.md has the long form and the threat
 * model):
 *  - The loader pins PARKWAY_PIN_REGISTER, a BPF_PROG_TYPE_SYSCALL program,
 *    mode 0666 (bpf(2) needs write access to use a pinned program): any local user may run it, and it only ever acts on the
 *    thread that runs it (the kernel's `current`).
 *  - A worker thread runs it (BPF_PROG_TEST_RUN, one bpf(2) call) with a
 *    struct parkway_register naming the address of its state word, a
 *    32-bit word in its own memory. The program keeps that address in the
 *    thread's task storage, which dies with the thread.
 *  - The worker publishes its state with plain relaxed stores to that word.
 *    The scheduler reads it with bpf_probe_read_user only while the thread
 *    itself is the CPU's current task (tick, end of slice, preemption), so
 *    it reads that thread's own address space; elsewhere it uses the value
 *    it read last. Nobody else can write another program's state.
 *  - The scheduler forgets the worker at thread exit; a clean unregister
 *    runs the program again with op = PARKWAY_OP_UNREGISTER.
 */
#ifndef PARKWAY_SCHED_H
#define PARKWAY_SCHED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The layout version is part of the pin directory: bump it whenever
 * struct parkway_register or its meaning changes. A program built against
 * another layout then finds no pin and runs without the scheduler instead
 * of misusing one (programs linked with libparkway.a outlive scheduler
 * upgrades). */
#define PARKWAY_LAYOUT_VERSION "2"
/* The loader's own directory (root's /run, so nobody else can create the
 * path) holds its lock, its pid and a bpffs instance of its own, mounted
 * mode 0755, so no other user can have pre-created or replaced a pin. */
#define PARKWAY_RUN_DIR     "/run/parkway-sched"
#define PARKWAY_LOCK_FILE   PARKWAY_RUN_DIR "/lock"
#define PARKWAY_PID_FILE    PARKWAY_RUN_DIR "/loader.pid"
#define PARKWAY_BPFFS       PARKWAY_RUN_DIR "/bpf"
#define PARKWAY_PIN_DIR     PARKWAY_BPFFS "/v" PARKWAY_LAYOUT_VERSION
#define PARKWAY_PIN_REGISTER PARKWAY_PIN_DIR "/register"
#define PARKWAY_PIN_STATS   PARKWAY_PIN_DIR "/stats"
#define PARKWAY_PIN_PROCS   PARKWAY_PIN_DIR "/procs"
#define PARKWAY_PIN_RUNTIME PARKWAY_PIN_DIR "/runtime"
#define PARKWAY_PIN_EVENTS  PARKWAY_PIN_DIR "/events"
#define PARKWAY_OPS_NAME    "parkway"

#define PARKWAY_MAX_PROCS 4096
/* Registered workers per program (tgid): the default and the largest
 * --max-workers the loader accepts. */
#define PARKWAY_DEFAULT_MAX_WORKERS 256
#define PARKWAY_MAX_WORKERS_LIMIT 4096
/* Worker indices a registration may carry (range-checked). */
#define PARKWAY_MAX_WORKER_INDEX 65535

/* Values of a worker's state word; the same numbers as
 * parkway::detail::WorkerState. Any other value reads as OFF. */
enum parkway_worker_state {
	PARKWAY_W_OFF = 0,
	PARKWAY_W_BUSY = 1,      /* running tasks: preempting it stalls its program */
	PARKWAY_W_SEARCHING = 2, /* stealing; its core is worth less than a busy sibling's */
	PARKWAY_W_PARKED = 3,    /* asleep on its futex word (or about to be) */
	PARKWAY_W_NR_STATES,
};

enum parkway_register_op {
	PARKWAY_OP_UNREGISTER = 0,
	PARKWAY_OP_REGISTER = 1,
};

/* The context of PARKWAY_PIN_REGISTER (BPF_PROG_TEST_RUN's ctx_in; the
 * kernel copies it back, so `result` and `cap` are outputs). The program's
 * return value is `result` too. */
struct parkway_register {
	__u64 state_addr; /* in: address of the caller's 4-byte-aligned state word */
	__u32 op;         /* in: enum parkway_register_op */
	__u32 index;      /* in: worker index in its runtime, <= PARKWAY_MAX_WORKER_INDEX */
	__s32 result;     /* out: 0, or -EINVAL (bad op/index/address), -EFAULT
			   * (word unreadable), -E2BIG (per-program cap reached),
			   * -ENOSPC (no room for the program's record) */
	__u32 cap;        /* out: the per-program cap in force */
};

/* Per program (tgid), in the PARKWAY_PIN_PROCS hash. vtime is shared by
 * all threads of the program, which is what makes the sharing per
 * program rather than per thread. (CPU time per program is kept per CPU in
 * PARKWAY_PIN_RUNTIME, keyed by struct parkway_runtime_key.) Removed when
 * the program's last thread exits. */
struct parkway_proc {
	__u64 vtime;         /* ns of CPU received (floored), the fair-share clock */
	__u64 busy_waiting;  /* preempted busy workers queued right now */
	__u64 start_ns;      /* its leader's start time: tells a reused tgid apart */
	__u32 workers;       /* registered worker threads (<= the cap) */
	__u32 refused;       /* registrations refused by the cap */
	__u32 by_state[PARKWAY_W_NR_STATES]; /* registered workers by last-seen state */
	char comm[16];       /* the program's name */
};

/* The key of PARKWAY_PIN_RUNTIME: a program is its tgid and its leader's
 * start time, so a tgid reused by a new program has an entry of its own. */
struct parkway_runtime_key {
	__u32 tgid;
	__u32 pad;           /* 0 */
	__u64 start_ns;      /* the leader's start time, as parkway_proc.start_ns */
};

/* Per-CPU counters (PARKWAY_PIN_STATS, a per-CPU array of __u64). */
enum parkway_stat {
	PARKWAY_STAT_DISPATCH,       /* tasks placed in a DSQ by us */
	PARKWAY_STAT_DIRECT_IDLE,    /* of those, straight to an idle CPU at wakeup */
	PARKWAY_STAT_WORKER_RUNS,    /* a registered worker started running */
	PARKWAY_STAT_BUSY_PROMOTE,   /* preempted busy worker queued ahead of thieves */
	PARKWAY_STAT_YIELD_TO_BUSY,  /* searching worker gave its core to a busy sibling */
	PARKWAY_STAT_SLOT_FREED,     /* registrations dropped by the scheduler (thread exit, execve) */
	PARKWAY_STAT_KEEP_PREV,      /* a runnable task kept its CPU: still ahead of the queue */
	PARKWAY_STAT_REGISTERED,     /* registrations accepted */
	PARKWAY_STAT_REFUSED,        /* registrations refused (cap, bad values) */
	PARKWAY_STAT_BAD_STATE,      /* state words read with a value out of range */
	PARKWAY_STAT_SHORT_SLICE,    /* slices shortened because many tasks were queued */
	PARKWAY_STAT_REENQUEUED,     /* tasks taken back from a CPU an RT/DL/stop task took (ops.cpu_release) */
	PARKWAY_STAT_PROC_RESET,     /* program records reset for a new program that reused the tgid */
	/* The two below are maxima (per CPU; readers take the largest), not counts. */
	PARKWAY_STAT_MAX_WAIT_US,    /* longest wait of a runnable task for a CPU, in us */
	PARKWAY_STAT_MAX_QUEUED,     /* most tasks seen queued at an enqueue */
	PARKWAY_NR_STATS,
};

#define PARKWAY_STAT_NAMES                                                   \
	{ "dispatch", "direct_idle", "worker_runs", "busy_promote",         \
	  "yield_to_busy", "slot_freed", "keep_prev", "registered",         \
	  "refused", "bad_state", "short_slice", "reenqueued",              \
	  "proc_reset", "max_wait_us", "max_queued" }

/* Whether a stat is a maximum (combined across CPUs with max, not sum). */
#define PARKWAY_STAT_IS_MAX(i) \
	((i) == PARKWAY_STAT_MAX_WAIT_US || (i) == PARKWAY_STAT_MAX_QUEUED)

/* The scheduler's decisions about registered workers, one record each in
 * a BPF ring buffer (PARKWAY_PIN_EVENTS) that `parkway trace record`
 * drains. With no reader the ring fills and further records are lost
 * (the reserve fails). */
enum parkway_sched_event_kind {
	PARKWAY_EV_BUSY_PROMOTE = 1,  /* a preempted busy worker queued ahead of its program's thieves */
	PARKWAY_EV_KEEP_PREV = 2,     /* a worker whose slice ran out kept its CPU: still ahead of the queue */
	PARKWAY_EV_YIELD_TO_BUSY = 3, /* a searching worker gave up its CPU to a waiting busy sibling */
};
struct parkway_sched_event {
	__u64 ns;      /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 tgid;
	__u32 tid;
	__u32 kind;    /* enum parkway_sched_event_kind */
	__u32 worker;  /* the worker index it registered with */
	__u32 cpu;
	__u32 reserved;
};
#define PARKWAY_EVENTS_BYTES (256 * 1024)

/* Load-time settings, in the BPF object's ".rodata.cfg" section (read-only
 * once loaded, so the verifier sees them as constants). The loader checks
 * them against the wait bound (docs/design/sched-ext.md, "The wait bound"). */
struct parkway_cfg {
	__u64 slice_ns;        /* longest time slice (queue short) */
	__u64 slice_min_ns;    /* shortest time slice (queue long) */
	__u64 latency_ns;      /* target: the queue drains in this much wall time */
	__u32 penalty_slices;  /* searching workers queue this many slices behind their program */
	__u32 nr_cpus;         /* CPUs the queue is served by (online) */
	__u32 max_workers;     /* registered workers per program */
	__u32 bad_verifier;    /* test only: keep a branch the verifier must reject */
	char stall_comm[16];   /* test only: never dispatch tasks with this comm */
};

/* Why the kernel ended the scheduler, copied in ops.exit into the object's
 * ".data.uei" section; the loader polls `kind` (nonzero once exited). */
struct parkway_exit_info {
	__s64 kind;            /* enum scx_exit_kind */
	__s64 exit_code;
	char reason[128];
	char msg[1024];
};

#endif /* PARKWAY_SCHED_H */
