/* scx_parkway -- a sched_ext scheduler that knows parkway's workers.
 *
 * What it does. Every task of the system (switch-all mode) goes through one
 * vtime-ordered queue, SHARED_DSQ. The clock is per *program* (tgid), not
 * per thread: all threads of a process charge the CPU time they use to the
 * same parkway_proc.vtime and are queued with it, so a program with eight
 * runnable threads gets about the share of one with two, not four times
 * more. A program that slept is not credited for it: its clock is pulled up
 * to at most one slice behind the global clock when it comes back.
 *
 * Slices shrink with the queue: a slice is latency_ns x CPUs / (tasks
 * queued + CPUs), between slice_min_ns and slice_ns; every offset below is
 * counted in slices, and a program's tasks are keyed at most
 * penalty_slices + 1 slices ahead of the global clock (program_base), so
 * the wait of any runnable task stays a small multiple of latency_ns while
 * slices are above their floor, and grows with the tasks queued only at
 * the floor, one tick per task per CPU (docs/design/sched-ext.md, "The
 * wait bound").
 *
 * Inside a parkway program, each worker thread registers itself by running
 * pw_register (a BPF_PROG_TYPE_SYSCALL program: the kernel's `current` is
 * the caller, so a thread can only register itself). Its task storage keeps
 * the address of the worker's state word, in the worker's own memory; the
 * scheduler reads that word only while the worker is the CPU's current task
 * (worker_state), after Balanced Work Stealing (Ding et al., EuroSys 2012):
 *  - busy: a busy worker that lost its CPU is keyed one slice ahead of its
 *    program's clock ("busy_promote"). When its slice runs out, the kernel
 *    asks ops.dispatch for the next task *before* re-queueing it, so
 *    dispatch compares its key with the queue's head and lets it keep the
 *    CPU if it is still ahead ("keep_prev"); without that, the head (often
 *    a thief of the same program) took the core at every slice end. A
 *    keep is a new turn: it is charged and moves the global clock like a
 *    start, or a task that keeps its CPU would freeze the clock.
 *  - searching: keyed penalty_slices behind its program's clock, so busy
 *    siblings go first; while a busy sibling waits, a running thief gives
 *    up its slice at the next tick or sched_yield() ("yield_to_busy").
 *  - parked: asleep on a futex, not runnable, costs nothing, and sleeping
 *    earns its program no credit.
 * Wakeups that find an idle CPU go straight to it, like scx_simple. When an
 * RT, deadline or stop task takes a CPU, ops.cpu_release sends the tasks
 * waiting on that CPU's local DSQ back through ops.enqueue (SCX_ENQ_REENQ),
 * as preempted tasks, so they can run on another CPU.
 * Each busy_promote, keep_prev and yield_to_busy of a registered worker is
 * also one record in the `events` ring buffer, which `parkway trace record`
 * drains (lost while nobody does: the ring is full).
 *
 * Why this shape: one queue with a per-program key keeps the policy in a
 * few lines and makes fairness between programs (parkway or not) the
 * default. The state offsets reorder a program's threads; they let a busy
 * worker run at most one slice early, which its program pays for on its
 * clock, so they cannot shift CPU between programs beyond that. A program
 * can only publish for its own threads. Threat model and limits:
 * docs/design/sched-ext.md.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "parkway_compat.bpf.h"
#include "parkway_sched.h"

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 0
#define PW_OP(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, ##args)
#define PW_OP_SLEEPABLE(name, args...) SEC("struct_ops.s/" #name) BPF_PROG(name, ##args)

#define EINVAL 22
#define EFAULT 14
#define ENOMEM 12
#define ENOSPC 28
#define E2BIG 7
/* x86-64 user addresses lie below this (4-level paging; 5-level is larger,
 * a stricter check only refuses more). */
#define USER_ADDR_END 0x00007ffffffff000ULL

const volatile struct parkway_cfg cfg SEC(".rodata.cfg") = {
	.slice_ns = 5000000,
	.slice_min_ns = 500000,
	.latency_ns = 50000000,
	.penalty_slices = 20,
	.nr_cpus = 1,
	.max_workers = PARKWAY_DEFAULT_MAX_WORKERS,
};

struct parkway_exit_info uei SEC(".data.uei");

/* The global clock: the largest program base (program_base) a task started
 * a turn with, by ops.running or by being kept (keep_prev). */
static u64 vtime_now;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PARKWAY_MAX_PROCS);
	__type(key, u32); /* tgid */
	__type(value, struct parkway_proc);
} procs SEC(".maps");

/* Per-program CPU time, per CPU (summed by `parkway sched status`). Keyed
 * by tgid and start time: the entry of a program whose tgid was reused is
 * never the new program's. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, PARKWAY_MAX_PROCS);
	__type(key, struct parkway_runtime_key);
	__type(value, u64);
} runtime SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PARKWAY_NR_STATS);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

/* Decisions about registered workers, for `parkway trace record`. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PARKWAY_EVENTS_BYTES);
} events SEC(".maps");

/* Per task, freed with the task. For a registered worker it is also the
 * registration: only pw_register, run by the thread itself, sets
 * state_addr. */
struct task_ctx {
	u64 started_ns;   /* when it last started running */
	u64 ready_ns;     /* when it last became runnable without a CPU; 0 = running or asleep */
	u64 base_key;     /* its program's base (program_base) when last queued */
	u64 group_start;  /* its program's start time (identity of the tgid) */
	u64 state_addr;   /* registered worker: its state word (user address); 0 = not a worker */
	u64 exec_id;      /* the thread's self_exec_id at registration: an execve ends it */
	u32 state;        /* the value last read from the state word */
	u32 index;        /* worker index inside its runtime */
	bool busy_queued; /* counted in its program's busy_waiting */
};
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* A decision about p, if it is a registered worker: one ring record, or
 * nothing when the ring is full (nobody reads it). */
static void sched_event(struct task_struct *p, u32 worker, u32 kind)
{
	struct parkway_sched_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return;
	e->ns = bpf_ktime_get_ns();
	e->tgid = p->tgid;
	e->tid = p->pid;
	e->kind = kind;
	e->worker = worker;
	e->cpu = bpf_get_smp_processor_id();
	e->reserved = 0;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static void stat_inc(u32 idx)
{
	u64 *c = bpf_map_lookup_elem(&stats, &idx);

	if (c)
		(*c)++;
}

/* This CPU's maximum of a PARKWAY_STAT_IS_MAX stat. */
static void stat_max(u32 idx, u64 v)
{
	u64 *c = bpf_map_lookup_elem(&stats, &idx);

	if (c && *c < v)
		*c = v;
}

/* The current slice: latency_ns shared by everything queued, per CPU,
 * clamped to [slice_min_ns, slice_ns]. `joining` counts tasks about to be
 * queued that SHARED_DSQ does not hold yet (the one ops.enqueue inserts),
 * so every slice counts the queue the same way: the tasks in SHARED_DSQ
 * once the decision is made, plus the CPUs. */
static u64 slice_now(u32 joining)
{
	s32 queued = scx_bpf_dsq_nr_queued(SHARED_DSQ);
	u64 n = (queued > 0 ? (u64)queued : 0) + joining + cfg.nr_cpus;
	u64 s = n ? cfg.latency_ns * cfg.nr_cpus / n : cfg.slice_ns;

	if (s >= cfg.slice_ns)
		return cfg.slice_ns;
	return s < cfg.slice_min_ns ? cfg.slice_min_ns : s;
}

/* Atomic read-modify-writes on words that several CPUs update at once (a
 * plain load and store there loses another CPU's update, or, for a
 * decrement guarded by a plain test, wraps a count at 0 to its maximum:
 * busy_waiting at 2^64 - 1 would make the program's thieves yield at every
 * tick for ever). Bounded retries: a CAS fails only when another CPU
 * changed the word between the load and the CAS. */
#define PW_CAS_TRIES 16

/* *w = max(*w, v). */
static void raise_u64(u64 *w, u64 v)
{
	int i;

	for (i = 0; i < PW_CAS_TRIES; i++) {
		u64 cur = *(volatile u64 *)w;

		if (cur >= v || __sync_val_compare_and_swap(w, cur, v) == cur)
			return;
	}
}

/* *w -= 1, unless it is 0; for a word of type T. */
#define PW_DEC_UNLESS_ZERO(T, w)                                                     \
	do {                                                                         \
		for (int i_ = 0; i_ < PW_CAS_TRIES; i_++) {                          \
			T cur_ = *(volatile T *)(w);                                 \
			if (!cur_ || __sync_val_compare_and_swap((w), cur_, cur_ - 1) == cur_) \
				break;                                               \
		}                                                                    \
	} while (0)

static void dec_u64(u64 *w) { PW_DEC_UNLESS_ZERO(u64, w); }
static void dec_u32(u32 *w) { PW_DEC_UNLESS_ZERO(u32, w); }

/* start_ns of a record being reset for a new program (get_proc). */
#define PROC_RESETTING (~0ULL)

/* The program's record, or NULL (no memory, or another CPU is resetting
 * it this instant: the caller queues the task without a program clock, or
 * refuses the registration). A stale record (its tgid reused by a new
 * program) is reset in place for the new program, never replaced in the
 * map: procs is an LRU hash, whose update frees the element it replaces at
 * once, for the next insert of any tgid to take, so a CPU that had looked
 * the old element up would go on writing into another program's record;
 * and two CPUs replacing the same stale record (two threads of the new
 * program in their first ops.enqueue or registration at once) each made
 * an element, and the first one's counts (a registered worker, a queued
 * busy worker) went into the one freed. One CPU claims the reset with a
 * CAS on start_ns; the record shows the new start only once it is reset,
 * so no count is made in it and then cleared. Its name is the leader's
 * when the record is made; note_name keeps it current. */
static struct parkway_proc *get_proc(struct task_struct *p)
{
	u32 tgid = p->tgid;
	u64 start = p->group_leader->start_time;
	struct parkway_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	struct parkway_proc fresh = {};
	u64 old;
	int i;

	if (pr) {
		old = *(volatile u64 *)&pr->start_ns;
		if (old == start)
			return pr;
		if (old == PROC_RESETTING ||
		    __sync_val_compare_and_swap(&pr->start_ns, old, PROC_RESETTING) != old)
			return NULL;
		pr->vtime = vtime_now;
		pr->busy_waiting = 0;
		pr->workers = 0;
		pr->refused = 0;
		for (i = 0; i < PARKWAY_W_NR_STATES; i++)
			pr->by_state[i] = 0;
		bpf_probe_read_kernel_str(pr->comm, sizeof(pr->comm), p->group_leader->comm);
		__sync_lock_test_and_set(&pr->start_ns, start);
		stat_inc(PARKWAY_STAT_PROC_RESET);
		return pr;
	}
	fresh.vtime = vtime_now;
	fresh.start_ns = start;
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), p->group_leader->comm);
	bpf_map_update_elem(&procs, &tgid, &fresh, BPF_NOEXIST);
	pr = bpf_map_lookup_elem(&procs, &tgid);
	return pr && pr->start_ns == start ? pr : NULL;
}

static bool is_stall_target(struct task_struct *p)
{
	int i;

	if (!cfg.stall_comm[0])
		return false;
	for (i = 0; i < 16; i++) {
		if (p->comm[i] != cfg.stall_comm[i])
			return false;
		if (!cfg.stall_comm[i])
			break;
	}
	return true;
}

/* A registered worker's state changed from tc->state to v: move it in its
 * program's per-state count (shown by `parkway sched status`). */
static void set_state(struct task_struct *p, struct task_ctx *tc, u32 v)
{
	u32 tgid = p->tgid;
	struct parkway_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	u32 old = tc->state;

	tc->state = v;
	if (!pr)
		return;
	if (old < PARKWAY_W_NR_STATES)
		dec_u32(&pr->by_state[old]);
	if (v < PARKWAY_W_NR_STATES)
		__sync_fetch_and_add(&pr->by_state[v], 1);
}

static void drop_worker(struct task_struct *p, struct task_ctx *tc);

/* The state a registered worker published, or PARKWAY_W_OFF for a task
 * that is not one. The word is read only while p is the current task of
 * this CPU, so bpf_probe_read_user reads p's own address space; otherwise
 * (a wakeup from another task) the value read last stands. A value out of
 * range reads as OFF. A thread that called execve since it registered is
 * no longer a worker: the address named the old image (a registration
 * carried into a setuid program would let its caller pick the word). */
static u32 worker_state(struct task_struct *p, struct task_ctx *tc)
{
	u32 v;

	if (!tc || !tc->state_addr)
		return PARKWAY_W_OFF;
	if (p->self_exec_id != tc->exec_id) {
		drop_worker(p, tc);
		stat_inc(PARKWAY_STAT_SLOT_FREED);
		return PARKWAY_W_OFF;
	}
	if ((u32)bpf_get_current_pid_tgid() == (u32)p->pid &&
	    !bpf_probe_read_user(&v, sizeof(v), (const void *)tc->state_addr)) {
		if (v >= PARKWAY_W_NR_STATES) {
			stat_inc(PARKWAY_STAT_BAD_STATE);
			v = PARKWAY_W_OFF;
		}
		if (v != tc->state)
			set_state(p, tc, v);
	}
	return tc->state;
}

/* Where a program's tasks queue: its clock (plus `ran`, time run but not yet
 * charged), but at most (penalty_slices + 1) slices ahead of the global
 * clock. Without that cap a program with many runnable threads runs its
 * clock ahead of the global clock by about one turn per queued thread, and
 * its last-queued thread waits that lead times the number of programs
 * (120 programs of 8 spinning threads on one CPU: 11.1 s, 2.3 times the
 * 4.8 s with the cap). With it, no task is keyed more than a bounded
 * amount ahead of the tasks now starting, whatever the thread count
 * (docs/design/sched-ext.md, "The wait bound"); programs within the lead
 * still share the CPU per program. */
static u64 program_base(struct parkway_proc *pr, u64 ran, u64 slice)
{
	u64 base = pr->vtime + ran;
	u64 cap = vtime_now + (u64)(cfg.penalty_slices + 1) * slice;

	return base < cap ? base : cap;
}

/* A task's place in SHARED_DSQ: its program's base, moved by the worker's
 * published state: a searching worker goes behind its busy siblings of the
 * last few slices, a busy one that lost its CPU (`preempted`) one slice
 * ahead of its program. */
static u64 task_key(struct parkway_proc *pr, u32 state, bool preempted, u64 ran, u64 slice)
{
	u64 key = program_base(pr, ran, slice);

	if (state == PARKWAY_W_SEARCHING)
		return key + cfg.penalty_slices * slice;
	if (state == PARKWAY_W_BUSY && preempted)
		return key > slice ? key - slice : 0;
	return key;
}

s32 PW_OP(pw_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);

	if (is_idle && !is_stall_target(p)) {
		pw_insert(p, SCX_DSQ_LOCAL, slice_now(0), 0);
		stat_inc(PARKWAY_STAT_DISPATCH);
		stat_inc(PARKWAY_STAT_DIRECT_IDLE);
	}
	return cpu;
}

void PW_OP(pw_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct parkway_proc *pr;
	struct task_ctx *tc;
	u64 key, floor, slice;
	bool preempted;
	u32 state;

	if (cfg.bad_verifier) {
		/* Test switch: a write past the end of an 8-byte map value. */
		u32 k = 0;
		u64 *v = bpf_map_lookup_elem(&stats, &k);

		if (v)
			v[64] += 1;
	}
	if (is_stall_target(p))
		return; /* test switch: the task is lost; the watchdog must catch it */

	slice = slice_now(1);
	if (slice < cfg.slice_ns)
		stat_inc(PARKWAY_STAT_SHORT_SLICE);
	stat_max(PARKWAY_STAT_MAX_QUEUED, scx_bpf_dsq_nr_queued(SHARED_DSQ) + 1);
	pr = get_proc(p);
	if (!pr) {
		pw_insert(p, SCX_DSQ_GLOBAL, slice, enq_flags);
		stat_inc(PARKWAY_STAT_DISPATCH);
		return;
	}
	/* No credit for sleeping: at most one slice behind the global clock. */
	floor = vtime_now > slice ? vtime_now - slice : 0;
	raise_u64(&pr->vtime, floor);
	tc = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (tc) {
		tc->base_key = program_base(pr, 0, slice);
		tc->group_start = p->group_leader->start_time;
	}

	/* Not a wakeup: p lost its CPU (its slice ran out, another task
	 * preempted it, or, SCX_ENQ_REENQ, an RT/DL/stop task took the CPU it
	 * was waiting on: pw_cpu_release). A re-enqueue is a preemption even
	 * for a task a wakeup had put on that CPU: it was runnable, waiting to
	 * run there. A busy worker queued twice before it runs (preempted,
	 * moved to a CPU's local DSQ, then re-enqueued from there) counts
	 * once in busy_waiting (busy_queued). */
	preempted = !(enq_flags & SCX_ENQ_WAKEUP) || (enq_flags & SCX_ENQ_REENQ);
	state = worker_state(p, tc);
	key = task_key(pr, state, preempted, 0, slice);
	/* A higher class took the CPU, not p's own use of it: p keeps its
	 * turn, queued with the tasks now starting. Behind its program's
	 * clock, a task taken off just after its dispatch (the softlockup
	 * watchdog's stop task, every 4 s) lost that turn unseen and waited
	 * a whole second round: 16 s between two of a spinner's turns in VM
	 * case 10, against a bound of 10.6 s. */
	if ((enq_flags & SCX_ENQ_REENQ) && key > floor)
		key = floor;
	if (state == PARKWAY_W_BUSY && preempted) {
		if (tc && !tc->busy_queued) {
			tc->busy_queued = true;
			__sync_fetch_and_add(&pr->busy_waiting, 1);
		}
		stat_inc(PARKWAY_STAT_BUSY_PROMOTE);
		if (tc && tc->state_addr)
			sched_event(p, tc->index, PARKWAY_EV_BUSY_PROMOTE);
	}
	pw_insert_vtime(p, SHARED_DSQ, slice, key, enq_flags);
	stat_inc(PARKWAY_STAT_DISPATCH);
	if (enq_flags & SCX_ENQ_REENQ) {
		/* Its CPU is taken: an idle CPU, if there is one, must come
		 * and get it (an idle CPU has no tick to notice the queue). */
		s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

		stat_inc(PARKWAY_STAT_REENQUEUED);
		if (cpu >= 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

/* An RT, deadline or stop task takes this CPU. The kernel has put the ext
 * task it preempted back at the head of this CPU's local DSQ without
 * calling ops.enqueue, and that DSQ is served only by this CPU, which is
 * no longer ours: its tasks would wait for the higher class to let go (an
 * RT spinner: about 5% of the CPU, what RT throttling leaves). A busy
 * worker waiting there would not count as waiting (busy_waiting), so its
 * searching siblings would keep their CPUs (VM case 16). Send them all
 * back through ops.enqueue (SCX_ENQ_REENQ): queued on SHARED_DSQ, promoted
 * and counted like any preempted task, runnable on any CPU. Kernels before
 * 6.19 have no deferred re-enqueue: there they wait (pw_reenqueue_local). */
void PW_OP(pw_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	pw_reenqueue_local();
}

/* The program's name is its leader's, which an execve or a
 * prctl(PR_SET_NAME) changes after the record was made (made at the first
 * enqueue or registration, often still under the parent's name from the
 * fork). Checked at every turn the leader ends, in charge_turn: a leader
 * that blocks right after its exec (a shell waiting for its child) may not
 * be enqueued again for a long time. The whole name is compared: a new
 * name often shares its first letters with the old ("sh" -> "sleep",
 * "pw_abuse" -> "pw_sh"; VM case 8). */
static void note_name(struct task_struct *p, struct parkway_proc *pr)
{
	int i;

	if (p->pid != p->tgid)
		return;
	for (i = 0; i < 16; i++) {
		if (pr->comm[i] != p->comm[i])
			break;
		if (!p->comm[i])
			return;
	}
	if (i < 16)
		bpf_probe_read_kernel_str(pr->comm, sizeof(pr->comm), p->comm);
}

/* p's turn, begun at tc->started_ns, ends at `now`: charge it to p's
 * program clock and CPU time. */
static void charge_turn(struct task_struct *p, struct task_ctx *tc, u64 now)
{
	u32 tgid = p->tgid;
	struct parkway_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	struct parkway_runtime_key rk = { .tgid = tgid, .start_ns = p->group_leader->start_time };
	u64 delta = now - tc->started_ns, *rt;

	if (pr) {
		__sync_fetch_and_add(&pr->vtime, delta);
		note_name(p, pr);
	}
	rt = bpf_map_lookup_elem(&runtime, &rk);
	if (!rt) {
		/* The program's first turn: make its entry. Another CPU may
		 * have made it since the lookup (two threads of a new program
		 * ending their first turns at once); then this turn goes into
		 * this CPU's slot of that entry, or it would be lost. */
		if (!bpf_map_update_elem(&runtime, &rk, &delta, BPF_NOEXIST))
			return;
		rt = bpf_map_lookup_elem(&runtime, &rk);
	}
	if (rt)
		*rt += delta;
}

/* A task starts a turn with its program at `base`: the global clock
 * follows (program bases, not the state-adjusted keys: a searcher's
 * penalty must not pull every program's floor up). */
static void clock_follow(u64 base)
{
	raise_u64(&vtime_now, base);
}

/* prev's slice ran out but it is still runnable. The kernel asks for the
 * next task before it puts prev back in the queue, so without this check
 * the head of SHARED_DSQ (say, a thief of prev's own program) would take
 * the CPU from a busy worker that would queue ahead of it. Keep prev if its
 * key, charged with the time it just ran, is still ahead of the head (or
 * nothing is queued).
 *
 * A kept task starts a new turn, but the kernel calls neither ops.stopping
 * nor ops.running for it, so the turn is closed and opened here: its time
 * is charged and the global clock follows its base, as if it had been
 * queued and picked again. Otherwise tasks that always keep their CPU
 * would freeze the clock, and with it the lead cap: a task queued above
 * the capped keys would never reach the head (docs/design/sched-ext.md,
 * "The wait bound", step 3; VM case 14). */
static bool keep_prev(struct task_struct *prev, u64 slice)
{
	u32 tgid = prev->tgid;
	struct parkway_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, prev, 0, 0);
	struct task_struct *q;
	u64 key, now = bpf_ktime_get_ns(), ran = 0;
	bool ahead = true;

	if (!pr || is_stall_target(prev))
		return false;
	if (tc && tc->started_ns)
		ran = now - tc->started_ns;
	key = task_key(pr, worker_state(prev, tc), true, ran, slice);
	bpf_for_each(scx_dsq, q, SHARED_DSQ, 0) {
		ahead = (s64)(key - q->scx.dsq_vtime) < 0;
		break;
	}
	if (!ahead)
		return false;
	if (tc && tc->started_ns) {
		charge_turn(prev, tc, now);
		tc->started_ns = now;
	}
	key = program_base(pr, 0, slice);
	if (tc)
		tc->base_key = key;
	clock_follow(key);
	if (tc && tc->state_addr)
		sched_event(prev, tc->index, PARKWAY_EV_KEEP_PREV);
	return true;
}

void PW_OP(pw_dispatch, s32 cpu, struct task_struct *prev)
{
	u64 slice = slice_now(0);

	if (prev && (prev->scx.flags & SCX_TASK_QUEUED) && keep_prev(prev, slice)) {
		prev->scx.slice = slice;
		stat_inc(PARKWAY_STAT_KEEP_PREV);
		return;
	}
	pw_move_to_local(SHARED_DSQ);
}

/* Every task_ctx names its program, whatever made it: pw_exit_task needs
 * that to drop the program's records when the program's last thread goes,
 * and that thread may never have passed through pw_enqueue (a wakeup onto
 * an idle CPU skips it). */
static void note_group(struct task_struct *p, struct task_ctx *tc)
{
	if (!tc->group_start)
		tc->group_start = p->group_leader->start_time;
}

/* p no longer waits as a preempted busy worker (it runs, or it left us
 * while queued): drop it from its program's busy_waiting, which makes the
 * program's searching workers yield (thief_should_yield). */
static void busy_unqueued(struct task_struct *p, struct task_ctx *tc)
{
	u32 tgid = p->tgid;
	struct parkway_proc *pr;

	if (!tc->busy_queued)
		return;
	tc->busy_queued = false;
	pr = bpf_map_lookup_elem(&procs, &tgid);
	if (pr)
		dec_u64(&pr->busy_waiting);
}

void PW_OP(pw_running, struct task_struct *p)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!tc)
		return;
	note_group(p, tc);
	clock_follow(tc->base_key);
	if (tc->state_addr)
		stat_inc(PARKWAY_STAT_WORKER_RUNS);
	tc->started_ns = bpf_ktime_get_ns();
	if (tc->ready_ns) {
		stat_max(PARKWAY_STAT_MAX_WAIT_US, (tc->started_ns - tc->ready_ns) / 1000);
		tc->ready_ns = 0;
	}
	busy_unqueued(p, tc);
}

void PW_OP(pw_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	u64 now;

	if (!tc)
		return;
	worker_state(p, tc); /* p is still current: refresh what it published */
	if (!tc->started_ns)
		return;
	now = bpf_ktime_get_ns();
	tc->ready_ns = runnable ? now : 0; /* preempted: it waits from now */
	charge_turn(p, tc, now);
	tc->started_ns = 0;
}

/* p woke up (or was created): it waits for a CPU from now. */
void PW_OP(pw_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!tc)
		return;
	note_group(p, tc);
	tc->ready_ns = bpf_ktime_get_ns();
}

/* A searching worker hands the rest of its slice to a waiting busy sibling. */
static bool thief_should_yield(struct task_struct *p)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	struct parkway_proc *pr;
	u32 tgid = p->tgid;

	if (worker_state(p, tc) != PARKWAY_W_SEARCHING)
		return false;
	pr = bpf_map_lookup_elem(&procs, &tgid);
	if (!pr || !pr->busy_waiting)
		return false;
	if (tc)
		sched_event(p, tc->index, PARKWAY_EV_YIELD_TO_BUSY);
	return true;
}

void PW_OP(pw_tick, struct task_struct *p)
{
	if (p->scx.slice && thief_should_yield(p)) {
		p->scx.slice = 0;
		stat_inc(PARKWAY_STAT_YIELD_TO_BUSY);
	}
}

bool PW_OP(pw_yield, struct task_struct *from, struct task_struct *to)
{
	if (thief_should_yield(from))
		stat_inc(PARKWAY_STAT_YIELD_TO_BUSY);
	from->scx.slice = 0;
	return false;
}

/* The worker registration of `p` ends (unregistered, or the thread died). */
static void drop_worker(struct task_struct *p, struct task_ctx *tc)
{
	u32 tgid = p->tgid;
	struct parkway_proc *pr = bpf_map_lookup_elem(&procs, &tgid);

	if (pr && pr->start_ns == tc->group_start) {
		dec_u32(&pr->workers);
		if (tc->state < PARKWAY_W_NR_STATES)
			dec_u32(&pr->by_state[tc->state]);
	}
	tc->state_addr = 0;
	tc->state = PARKWAY_W_OFF;
}

/* p leaves the ext class: sched_setscheduler() to SCHED_FIFO, SCHED_RR or
 * SCHED_DEADLINE, and also (before ops.exit_task) its exit or the
 * scheduler's unload. A busy worker that leaves while queued, preempted,
 * never reaches ops.running, so its count in busy_waiting goes here, or
 * its program's thieves would give up every slice to a sibling that no
 * longer runs under us (VM case 15). If it comes back, ops.enqueue counts
 * it again. */
void PW_OP(pw_disable, struct task_struct *p)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	if (tc)
		busy_unqueued(p, tc);
}

/* A task leaves us for good (it exited, or the scheduler is going away;
 * ops.disable has dropped its count in busy_waiting): drop its worker
 * registration, and once its program has no live thread left, the
 * program's records (a later program with the same tgid starts afresh).
 *
 * The two records are made apart: `procs` at the first ops.enqueue or
 * registration, `runtime` at the first charged turn (charge_turn), so a
 * program may have either alone: one whose every wakeup found an idle CPU
 * is never queued and has only `runtime` (VM case 17). And a thread's last
 * turn is charged when it stops, which can come after another thread of
 * the group, gone first, has deleted both: its charge makes `runtime`
 * again. So every exit_task with no live thread left deletes the
 * program's `runtime` entry, keyed by tgid and start time, so it is never
 * a new program's that reused the tgid (VM case 18): the group's last
 * thread to be freed deletes what the others' last turns left. */
void PW_OP(pw_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	struct task_ctx *tc = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	u32 tgid = p->tgid;
	struct parkway_runtime_key rk = { .tgid = tgid };
	struct parkway_proc *pr;

	if (!tc)
		return;
	pr = bpf_map_lookup_elem(&procs, &tgid);
	if (tc->state_addr) {
		drop_worker(p, tc);
		stat_inc(PARKWAY_STAT_SLOT_FREED);
	}
	if (args->cancelled || p->signal->live.counter != 0 || !tc->group_start)
		return;
	/* The record goes only while it is still this program's: the CAS
	 * marks it (get_proc then neither uses nor resets it), so a new
	 * program with this tgid cannot have reset it for itself between
	 * the check and the delete, which would delete the new program's
	 * record under a CPU using it. A mark already there is another
	 * thread of this program deleting it, or a new program resetting
	 * it: either way not this thread's to delete. */
	if (pr && __sync_val_compare_and_swap(&pr->start_ns, tc->group_start, PROC_RESETTING) ==
			  tc->group_start)
		bpf_map_delete_elem(&procs, &tgid);
	rk.start_ns = tc->group_start;
	bpf_map_delete_elem(&runtime, &rk);
}

/* pw_register: run by a worker thread (BPF_PROG_TEST_RUN on the pinned
 * program) to register or unregister itself. It acts on `current` only, so
 * no caller can register or mark a thread it does not run on; values are
 * range-checked, and a program holds at most cfg.max_workers
 * registrations. */
static int reg_done(struct parkway_register *a, s32 result)
{
	a->result = result;
	if (result)
		stat_inc(PARKWAY_STAT_REFUSED);
	return result;
}

SEC("syscall")
int pw_register(struct parkway_register *a)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct parkway_proc *pr;
	struct task_ctx *tc;
	u64 addr = a->state_addr, start;
	u32 v;

	a->cap = cfg.max_workers;
	if (a->op == PARKWAY_OP_UNREGISTER) {
		tc = bpf_task_storage_get(&task_ctxs, cur, 0, 0);
		if (tc && tc->state_addr)
			drop_worker(cur, tc);
		return reg_done(a, 0);
	}
	if (a->op != PARKWAY_OP_REGISTER || a->index > PARKWAY_MAX_WORKER_INDEX || !addr ||
	    (addr & 3) || addr >= USER_ADDR_END)
		return reg_done(a, -EINVAL);
	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return reg_done(a, -EFAULT);
	tc = bpf_task_storage_get(&task_ctxs, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tc)
		return reg_done(a, -ENOMEM);
	pr = get_proc(cur);
	if (!pr)
		return reg_done(a, -ENOSPC);
	start = cur->group_leader->start_time;
	if (!tc->state_addr || tc->group_start != start) {
		if (__sync_fetch_and_add(&pr->workers, 1) >= cfg.max_workers) {
			__sync_fetch_and_sub(&pr->workers, 1);
			__sync_fetch_and_add(&pr->refused, 1);
			return reg_done(a, -E2BIG);
		}
		tc->group_start = start;
		tc->state = PARKWAY_W_OFF;
		__sync_fetch_and_add(&pr->by_state[PARKWAY_W_OFF], 1);
	}
	tc->index = a->index;
	tc->exec_id = cur->self_exec_id;
	tc->state_addr = addr;
	stat_inc(PARKWAY_STAT_REGISTERED);
	return reg_done(a, 0);
}

s32 PW_OP_SLEEPABLE(pw_init)
{
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

void PW_OP(pw_exit, struct scx_exit_info *ei)
{
	bpf_probe_read_kernel_str(uei.reason, sizeof(uei.reason), ei->reason);
	bpf_probe_read_kernel_str(uei.msg, sizeof(uei.msg), ei->msg);
	uei.exit_code = ei->exit_code;
	__sync_val_compare_and_swap(&uei.kind, 0, ei->kind ? ei->kind : -1);
}

SEC(".struct_ops.link")
struct sched_ext_ops parkway_ops = {
	.select_cpu = (void *)pw_select_cpu,
	.enqueue = (void *)pw_enqueue,
	.dispatch = (void *)pw_dispatch,
	.runnable = (void *)pw_runnable,
	.running = (void *)pw_running,
	.stopping = (void *)pw_stopping,
	.tick = (void *)pw_tick,
	.yield = (void *)pw_yield,
	.cpu_release = (void *)pw_cpu_release,
	.disable = (void *)pw_disable,
	.exit_task = (void *)pw_exit_task,
	.init = (void *)pw_init,
	.exit = (void *)pw_exit,
	.timeout_ms = 30000, /* the kernel's maximum; the loader may lower it */
	.name = PARKWAY_OPS_NAME,
};
