/* parkway_sched.h -- what the parkway BPF scheduler, its loader and the
 * runtime share: pin paths, the worker-slot layout, the per-program record
 * and the stat indices. Plain C; included by scx_parkway.bpf.c (after
 * vmlinux.h), by tools/parkway_cli and by userspace/sched_ext_link.hpp.
 *
 * The protocol (docs/design/sched-ext.md has the long form):
 *  - The loader pins PARKWAY_PIN_WORKERS, an mmapable BPF array of
 *    PARKWAY_MAX_SLOTS slots, one 64-byte cache line each.
 *  - A worker claims a free slot with a CAS of `owner` from 0 (or from the
 *    tgid of a dead process) to its tgid, fills tid/index, then adds
 *    tid -> slot to PARKWAY_PIN_TIDS (one bpf(2) call per worker start).
 *  - From then on the worker publishes `state` with plain relaxed stores;
 *    the scheduler reads it when it makes a decision. No syscall.
 *  - The scheduler frees the slot (owner = 0, tids entry deleted) when the
 *    thread exits; the worker does the same on a clean exit.
 */
#ifndef PARKWAY_SCHED_H
#define PARKWAY_SCHED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The layout version is part of the pin directory: bump it whenever
 * struct parkway_slot, the tids map or their meaning changes. A program
 * built against another layout then finds no map and runs without the
 * scheduler instead of misreading one (programs linked with libparkway.a
 * outlive scheduler upgrades). */
#define PARKWAY_LAYOUT_VERSION "1"
#define PARKWAY_PIN_DIR     "/sys/fs/bpf/parkway-v" PARKWAY_LAYOUT_VERSION
#define PARKWAY_PIN_WORKERS PARKWAY_PIN_DIR "/workers"
#define PARKWAY_PIN_TIDS    PARKWAY_PIN_DIR "/tids"
#define PARKWAY_PIN_STATS   PARKWAY_PIN_DIR "/stats"
#define PARKWAY_PIN_PROCS   PARKWAY_PIN_DIR "/procs"
#define PARKWAY_PIN_RUNTIME PARKWAY_PIN_DIR "/runtime"
#define PARKWAY_PID_FILE    "/run/parkway-sched.pid"
#define PARKWAY_OPS_NAME    "parkway"

#define PARKWAY_MAX_SLOTS 1024
#define PARKWAY_MAX_PROCS 4096

/* Values of parkway_slot.state; the same numbers as
 * parkway::detail::WorkerState. */
enum parkway_worker_state {
	PARKWAY_W_OFF = 0,
	PARKWAY_W_BUSY = 1,      /* running tasks: preempting it stalls its program */
	PARKWAY_W_SEARCHING = 2, /* stealing; its core is worth less than a busy sibling's */
	PARKWAY_W_PARKED = 3,    /* asleep on its futex word (or about to be) */
};

/* One worker, one cache line. Written by the worker (state, tag) and at
 * claim/release time (owner, tid, index); read by the scheduler. */
struct parkway_slot {
	__u32 state;   /* enum parkway_worker_state, relaxed store by the worker */
	__u32 tag;     /* reserved: nonzero while the worker holds a priority tag */
	__u32 owner;   /* tgid of the process holding the slot; 0 = free (CAS) */
	__u32 tid;     /* kernel tid of the worker thread */
	__u32 index;   /* worker index inside its runtime */
	__u32 _pad0;
	__u64 claims;  /* bumped on every claim, for debugging */
	__u8 _pad[32];
};

/* Per program (tgid), in the PARKWAY_PIN_PROCS hash. vtime is shared by
 * all threads of the program, which is what makes the sharing per
 * program rather than per thread. (CPU time per program is kept per CPU in
 * PARKWAY_PIN_RUNTIME.) */
struct parkway_proc {
	__u64 vtime;         /* ns of CPU received (floored), the fair-share clock */
	__u64 busy_waiting;  /* preempted busy workers queued right now */
	char comm[16];       /* the program's name */
};

/* Per-CPU counters (PARKWAY_PIN_STATS, a per-CPU array of __u64). */
enum parkway_stat {
	PARKWAY_STAT_DISPATCH,       /* tasks placed in a DSQ by us */
	PARKWAY_STAT_DIRECT_IDLE,    /* of those, straight to an idle CPU at wakeup */
	PARKWAY_STAT_WORKER_RUNS,    /* a registered worker started running */
	PARKWAY_STAT_BUSY_PROMOTE,   /* preempted busy worker queued ahead of thieves */
	PARKWAY_STAT_YIELD_TO_BUSY,  /* searching worker gave its core to a busy sibling */
	PARKWAY_STAT_SLOT_FREED,     /* slots released by the scheduler at thread exit */
	PARKWAY_STAT_KEEP_PREV,      /* a runnable task kept its CPU: still ahead of the queue */
	PARKWAY_NR_STATS,
};

#define PARKWAY_STAT_NAMES                                                   \
	{ "dispatch", "direct_idle", "worker_runs", "busy_promote",         \
	  "yield_to_busy", "slot_freed", "keep_prev" }

/* Load-time settings, in the BPF object's ".rodata.cfg" section (read-only
 * once loaded, so the verifier sees them as constants). */
struct parkway_cfg {
	__u64 slice_ns;        /* time slice of every task */
	__u64 search_penalty_ns; /* searching workers queue this far behind their program's clock */
	__u32 bad_verifier;    /* test only: keep a branch the verifier must reject */
	__u32 _pad;
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
