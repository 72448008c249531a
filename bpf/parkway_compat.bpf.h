/* parkway_compat.bpf.h -- the sched_ext kfuncs scx_parkway uses, under one
 * name each, on every kernel from 6.12 on.
 *
 * 6.13 renamed the dispatch kfuncs (scx_bpf_dispatch -> scx_bpf_dsq_insert,
 * scx_bpf_dispatch_vtime -> scx_bpf_dsq_insert_vtime, scx_bpf_consume ->
 * scx_bpf_dsq_move_to_local) and later kernels dropped the old names. Both
 * generations are declared here as weak ksyms: libbpf resolves the ones the
 * running kernel has and leaves the others NULL, bpf_ksym_exists() tells
 * which, and the verifier drops the branch that calls a missing one. The
 * prototypes match the kernels' own (a vmlinux.h generated from any of
 * them may declare the same functions; identical redeclarations are fine).
 */
#ifndef PARKWAY_COMPAT_BPF_H
#define PARKWAY_COMPAT_BPF_H

/* 6.13 and later. */
void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __weak __ksym;
void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			      u64 enq_flags) __weak __ksym;
bool scx_bpf_dsq_move_to_local(u64 dsq_id) __weak __ksym;

/* 6.12 names. */
void scx_bpf_dispatch(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __weak __ksym;
void scx_bpf_dispatch_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
			    u64 enq_flags) __weak __ksym;
bool scx_bpf_consume(u64 dsq_id) __weak __ksym;

/* Re-enqueueing the tasks of this CPU's local DSQ (ops.cpu_release). 7.1
 * added scx_bpf_dsq_reenq (any DSQ, from anywhere; done asynchronously,
 * through ops.enqueue with SCX_ENQ_REENQ). 6.19 added
 * scx_bpf_reenqueue_local___v2 (this CPU's local DSQ, from anywhere, also
 * deferred); it is declared here with one more ___ suffix because libbpf
 * strips only the last one when it matches a kfunc: declared as ___v2 it
 * would match the old scx_bpf_reenqueue_local. That old one (6.12 on,
 * synchronous, from ops.cpu_release only) is not used: on 6.16-6.18 it
 * never brought a preempted busy worker back (the kernel put it straight
 * back on the local DSQ), and the tasks it did send back, already chosen
 * to run next, waited a second round (2,000 spinners: 16.0 s against the
 * wait bound's 10.6 s; 8.0 s without it). VM cases 10 and 16;
 * docs/design/sched-ext.md, "What was seen, and what was not". */
void scx_bpf_dsq_reenq(u64 dsq_id, u64 reenq_flags) __weak __ksym;
void scx_bpf_reenqueue_local___v2___pw(void) __weak __ksym;

/* Unchanged since 6.12. */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __weak __ksym;
s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __weak __ksym;
s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
			   bool *is_idle) __weak __ksym;
int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __weak __ksym;
struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __weak __ksym;
void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __weak __ksym;
s32 scx_bpf_pick_idle_cpu(const struct cpumask *cpus_allowed, u64 flags) __weak __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __weak __ksym;

static __always_inline void pw_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert))
		scx_bpf_dsq_insert(p, dsq_id, slice, enq_flags);
	else
		scx_bpf_dispatch(p, dsq_id, slice, enq_flags);
}

static __always_inline void pw_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice,
					    u64 vtime, u64 enq_flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert_vtime))
		scx_bpf_dsq_insert_vtime(p, dsq_id, slice, vtime, enq_flags);
	else
		scx_bpf_dispatch_vtime(p, dsq_id, slice, vtime, enq_flags);
}

static __always_inline bool pw_move_to_local(u64 dsq_id)
{
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local))
		return scx_bpf_dsq_move_to_local(dsq_id);
	return scx_bpf_consume(dsq_id);
}

/* Sends the tasks waiting in this CPU's local DSQ back through
 * ops.enqueue (SCX_ENQ_REENQ), where the kernel can (6.19 and later).
 * Call from ops.cpu_release. */
static __always_inline void pw_reenqueue_local(void)
{
	if (bpf_ksym_exists(scx_bpf_dsq_reenq))
		scx_bpf_dsq_reenq(SCX_DSQ_LOCAL, 0);
	else if (bpf_ksym_exists(scx_bpf_reenqueue_local___v2___pw))
		scx_bpf_reenqueue_local___v2___pw();
}

#endif /* PARKWAY_COMPAT_BPF_H */
