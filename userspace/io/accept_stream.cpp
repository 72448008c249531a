// accept_stream.cpp -- a multishot accept: one armed operation, many
// connections (docs/design/io.md, "The accept stream").
//
// The queue is shared by the ring that reaps the accept's CQEs and the
// coroutine that takes connections (which may run on any worker), so its
// state is under a small lock. The accept is armed on the ring of the
// worker that first waits with nothing queued, and re-armed the same way
// whenever it ended: a CQE without IORING_CQE_F_MORE (an error such as
// EMFILE, a CQ overflow, a cancel). Past kMaxQueued connections untaken
// the accept is paused: cancelled, and armed again by the next taker that
// finds the queue empty. References: the stream's, each awaiter's (from
// next() until the awaiter is destroyed, so an awaiter may outlive the
// stream), the armed accept's (dropped by its last CQE), the queued
// continuation's and re-arm's, a guard's and a posted cancel's.
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <stdexcept>
#include <utility>

#include "io/op_state.hpp"
#include "io/ring.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"

namespace parkway::io::detail {

using ::parkway::detail::Worker;

// Connections accepted and not taken past which the stream pauses its
// accept, so that further ones wait in the listener's backlog (as behind
// a one-shot accept) rather than each holding a descriptor here.
constexpr std::size_t kMaxQueued = 64;

struct AcceptQueue {
  int listen_fd = -1;
  std::atomic<std::uint32_t> refs{1};
  OpScope* scope = nullptr;  // the Listener's: closing it cancels the accept
  std::atomic<bool> lock_{false};
  // under the lock:
  std::deque<int> ready;  // accepted descriptors, or -errno
  std::coroutine_handle<> waiter;  // a taker waiting for a connection
  std::coroutine_handle<> resuming;  // the taker its queued continuation resumes
  // The taker resumed (by its continuation or its guard) and not yet in
  // its await_resume: the result at the queue's front is its own, which a
  // second taker calling next() on another worker meanwhile must not take.
  std::coroutine_handle<> handed;
  // The awaiter (AcceptStream::Next) that found a result queued and will
  // pop it in its await_resume (its await_ready, or its await_suspend
  // without waiting): the front is its own until then, or until it is
  // destroyed (then it stays queued for the next taker).
  const void* claimer = nullptr;
  OpState* guard = nullptr;  // the waiting taker's guard, if its next() has one
  bool armed = false;
  bool closed = false;
  // The pause's cancel was posted for the accept armed now: that
  // accept's ECANCELED is nobody's error (accept_cqe).
  bool pausing = false;
  bool rearm_queued = false;  // `rearm` is in a ready queue
  // The arm's generation, in the top byte of its user_data: a pause's
  // cancel still in a mailbox when its accept ended for another reason
  // (EMFILE) finds nothing in the next arm.
  std::uint8_t gen = 0;
  IoRing* ring = nullptr;  // where the accept is armed
  struct Continuation : ::parkway::detail::Task {
    AcceptQueue* q;
  } cont, rearm;
  CancelRequest cancel;        // the close's (stream destroyed, Listener closed): aimed at the arm of now
  CancelRequest pause_cancel;  // the pause's: aimed at the arm it paused
  StreamLink link;  // in the Listener's scope while armed

  void lock() noexcept {
    while (lock_.exchange(true, std::memory_order_acquire))
      while (lock_.load(std::memory_order_relaxed)) ::parkway::detail::cpu_relax();
  }
  void unlock() noexcept { lock_.store(false, std::memory_order_release); }
  void unref() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (int fd : ready)
      if (fd >= 0) ::close(fd);
    release_scope(scope);
    delete this;
  }
  std::uint64_t user_data() const noexcept {
    return reinterpret_cast<std::uint64_t>(this) | (std::uint64_t(gen) << kAcceptGenShift) | kTagAccept;
  }
};

namespace {
// The taker's continuation. It holds a reference on the queue (taken when
// it was pushed), and resumes nobody if the taker was destroyed meanwhile
// (AcceptStream::Next's destructor cleared `resuming`).
bool resume_taker(::parkway::detail::Task* t) noexcept {
  AcceptQueue* q = static_cast<AcceptQueue::Continuation*>(t)->q;
  q->lock();
  const std::coroutine_handle<> h = std::exchange(q->resuming, {});
  if (h) q->handed = h;  // until its await_resume: the front is its own
  q->unlock();
  if (h) ::parkway::detail::resume_from_outside(h);  // the taker's next wait comes after this
  q->unref();
  return true;
}
// The request is done (its ASYNC_CANCEL completed, or the ring's worker
// left before it was submitted): it may be posted again, for a later arm
// of the accept. It may run inside post_once, under the queue's or the
// scope's lock: it takes neither.
void release_cancel(CancelRequest* r) noexcept {
  r->posted.store(false, std::memory_order_release);
  static_cast<AcceptQueue*>(r->obj)->unref();
}
bool arm_for_waiter(AcceptQueue* q, IoRing& ring) noexcept;
// Arms the accept again for a taker that began to wait while it was
// armed and pausing (accept_cqe), on the ring of the worker that runs
// this. A refusal (the listener closed, a shutdown, no ring) resumes the
// taker with its error. So does a stream destroyed since the pause ended
// the accept (its destructor posted no cancel: nothing was armed), and a
// run off a worker (a bounded shutdown's drain, which takes the deque's
// tasks when the ready queue was full): ECANCELED.
bool rearm_for_taker(::parkway::detail::Task* t) noexcept {
  AcceptQueue* q = static_cast<AcceptQueue::Continuation*>(t)->q;
  Worker* w = Worker::current();
  int err = w ? 0 : -ECANCELED;
  IoRing* ring = w ? w->io_ring(&err) : nullptr;
  std::coroutine_handle<> h;
  q->lock();
  q->rearm_queued = false;
  if (q->waiter && !q->armed && q->ready.empty()) {
    if (q->closed) err = -ECANCELED;
    if (err) q->ready.push_back(err);
    if (err || !arm_for_waiter(q, *ring)) {  // arm_for_waiter queued its own error
      h = std::exchange(q->waiter, {});
      q->handed = h;  // until its await_resume: the error queued is its own
    }
  }
  q->unlock();
  if (h) ::parkway::detail::resume_from_outside(h);
  q->unref();
  return true;
}
void retain_for_cancel(CancelRequest* r) noexcept {
  static_cast<AcceptQueue*>(r->obj)->refs.fetch_add(1, std::memory_order_relaxed);
}

// ---- the taker's guard ------------------------------------------------------
// next(OpOptions) in a coroutine with a timeout, a CancelSource or a
// TaskGroup waits on two things: the stream, and a guard, an operation
// on the taker's own ring that never ends by itself (a timer as far away
// as the kernel's timers go, kAcceptGuardNs) but carries the options: its
// deadline, its CancelSource's scope, the group's scope, and the
// shutdown's cancel-everything. The deadline ends the guard through the
// ring's deadlines, as it ends any operation, not through its timer.
// Whichever of the two comes first resumes the taker, under the queue's
// lock: the accept by taking `waiter` (accept_cqe), the guard by taking
// it in guard_fired, which queues the guard's error ahead of any
// connection. The loser finds `waiter` gone: a connection waits for the
// next taker; a guard that lost is cancelled (take_guard, then
// cancel_op) and its completion does nothing. References: the guard
// holds one on the queue, and its own are the kernel's and its
// continuation's (guard_fired, which always runs once the CQE is reaped:
// nothing orphans a guard).

bool guard_fired(::parkway::detail::Task* t) noexcept {
  OpState* st = static_cast<OpState::Continuation*>(t)->st;
  auto* q = static_cast<AcceptQueue*>(st->guard_of);
  std::coroutine_handle<> h;
  q->lock();
  if (q->guard == st) {
    q->guard = nullptr;
    if (q->waiter) {
      h = std::exchange(q->waiter, {});
      q->handed = h;  // until its await_resume: the error pushed here is its own
      // -ECANCELED (its scope, its group, the shutdown), -ETIMEDOUT (its
      // deadline); the timer's own -ETIME (never, in practice) reads as a
      // timeout.
      q->ready.push_front(st->res == -ECANCELED ? -ECANCELED : -ETIMEDOUT);
    }
  }
  q->unlock();
  if (h) ::parkway::detail::resume_from_outside(h);
  q->unref();
  unref(st);
  return true;
}

// Under q's lock: takes the taker's guard from the queue and cancels it
// (nullptr: there is none, or it fired already). The cancel is posted
// under the lock: guard_fired needs the lock, so the guard's worker
// cannot finish with it, leave at a shutdown and free its ring before
// the post is done. Returns it with a reference for drop_guard.
OpState* take_guard(AcceptQueue* q) noexcept {
  OpState* st = std::exchange(q->guard, nullptr);
  if (!st) return nullptr;
  st->refs.fetch_add(1, std::memory_order_relaxed);
  cancel_op(st);
  return st;
}
// After the lock: the guard leaves its group's scope now, not when its
// cancel's CQE is reaped (maybe much later, on a busy worker): the taker
// goes on, and its group may end and be freed meanwhile.
void drop_guard(OpState* st) noexcept {
  if (!st) return;
  group_scope_remove(st);
  unref(st);
}

// The guard for a taker about to wait on `ring`: -ECANCELED if its scope
// or group is cancelled already (the taker does not wait); else 0 and
// *out, nullptr when the taker has no options and no group.
int make_guard(AcceptQueue* q, IoRing& ring, const OpOptions& o, OpScope* cancel, OpState** out) noexcept {
  *out = nullptr;
  const bool timed = o.timeout.count() != 0 || o.deadline.time_since_epoch().count() != 0;
  if (!timed && !cancel && !::parkway::detail::tls_group) return 0;
  OpState* st = new_op_state();
  st->cont.invoke = &guard_fired;  // its second reference is this continuation's
  st->guard_of = q;
  const OpArgs timer{.name = "accept", .opcode = IORING_OP_TIMEOUT, .off = kAcceptGuardNs};
  if (const int err = start_op(st, ring, nullptr, cancel, timer, o); err < 0) return err;
  q->refs.fetch_add(1, std::memory_order_relaxed);  // the guard's
  *out = st;
  return 0;
}
// The Listener's scope lists each armed accept (a Listener may have
// several streams), so that closing the listener cancels them all
// (cancel_scope), and counts them, keeping the listener's number open
// until the last one's last CQE (close_scope): an SQE names the
// descriptor by number. Arming is refused if the listener is closed
// already: false. Lock order: the queue's, then the scope's.
bool publish_armed(AcceptQueue* q) noexcept {
  OpScope* s = q->scope;
  StreamLink* l = &q->link;
  s->lock();
  const bool open = !s->cancelled.load(std::memory_order_relaxed);
  if (open) {
    l->next = s->streams;
    if (s->streams) s->streams->pprev = &l->next;
    l->pprev = &s->streams;
    s->streams = l;
    ++s->streams_in_kernel;
  }
  s->unlock();
  return open;
}
// Under the scope's lock: q's accept leaves the list, if it is there.
void unlist(StreamLink* l) noexcept {
  if (!l->pprev) return;
  *l->pprev = l->next;
  if (l->next) l->next->pprev = l->pprev;
  l->next = nullptr;
  l->pprev = nullptr;
}
// The stream no longer wants cancelling (it is being destroyed, and its
// cancel is posted already): the accept may still be in the kernel.
void unpublish(AcceptQueue* q) noexcept {
  q->scope->lock();
  unlist(&q->link);
  q->scope->unlock();
}
// The accept's last CQE, or its submission failed: it names the number no
// more; a listener closed meanwhile is closed once no other accept does.
void accept_left_kernel(AcceptQueue* q) noexcept {
  OpScope* s = q->scope;
  s->lock();
  unlist(&q->link);
  --s->streams_in_kernel;
  const int fd = take_fd_to_close(s);
  s->unlock();
  if (fd >= 0) ::close(fd);
}
// Under q's lock, nothing armed, a taker waiting: arms the accept on
// `ring`. False if refused (the listener closed, or the ring refused the
// submission), with the error queued for the taker.
bool arm_for_waiter(AcceptQueue* q, IoRing& ring) noexcept {
  // A new generation: a pause's cancel aimed at the last arm, if still
  // on its way, finds nothing in this one. The close's cancel is aimed
  // at this one (posted only while it is armed, read by the ring's owner
  // after the post).
  ++q->gen;
  q->cancel.target = q->user_data();
  // Published before it is submitted, so that a close from now on
  // cancels it and keeps the number open until its last CQE; refused
  // if the close came first.
  q->ring = &ring;
  q->cancel.ring = &ring;
  if (!publish_armed(q)) {
    q->ready.push_back(-ECANCELED);
    return false;
  }
  // Its get_sqe may reap this ring, and so take the locks of other
  // queues armed on it: none is being armed (io.md, "The accept
  // stream"), and q, armed nowhere, has no CQE to reap.
  if (const int rc = ring.submit_multishot_accept(q->listen_fd, q->user_data()); rc < 0) {
    accept_left_kernel(q);
    q->ready.push_back(rc);
    return false;
  }
  q->armed = true;
  q->refs.fetch_add(1, std::memory_order_relaxed);  // the armed accept's
  return true;
}
}  // namespace

void accept_cqe(void* queue, int res, std::uint32_t flags, IoRing& ring) noexcept {
  auto* q = static_cast<AcceptQueue*>(queue);
  const bool ended = (flags & IORING_CQE_F_MORE) == 0;
  q->lock();
  // Ended by the pause's cancel (or by a close's or the shutdown's that
  // came with it, which the re-arm finds): nobody's error.
  const bool paused = ended && res == -ECANCELED && q->pausing;
  if (q->closed) {
    if (res >= 0) ::close(res);
    if (ended && q->waiter) q->ready.push_back(-ECANCELED);  // the stream was destroyed under its taker
  } else if (!paused && !(ended && res == -ECANCELED && !q->waiter)) {
    q->ready.push_back(res);  // a connection, or an error the taker sees
  }
  bool pause = false;
  if (ended) {
    q->armed = false;
    q->pausing = false;
    accept_left_kernel(q);
    ring.multishot_ended();
  } else if (!q->closed && !q->pausing && !q->waiter && q->ready.size() >= kMaxQueued &&
             !q->pause_cancel.posted.load(std::memory_order_acquire)) {
    // Nobody takes them: stop accepting until a taker finds the queue
    // empty (its next() arms again). A pause's cancel still on its way
    // to an earlier arm leaves this one unpaused for now.
    pause = q->pausing = true;
    q->pause_cancel.target = q->user_data();
    q->pause_cancel.ring = &ring;
  }
  const bool resume = q->waiter && !q->ready.empty();
  if (resume) {
    q->resuming = std::exchange(q->waiter, {});
  }
  if (resume) q->refs.fetch_add(1, std::memory_order_relaxed);  // the continuation's (resume_taker)
  // A taker that began to wait while the paused accept was still armed
  // armed nothing: arm it again for the taker, from a task (not inside
  // this reap, whose ring a submission may reap).
  const bool rearm = paused && q->waiter && !q->closed && !q->rearm_queued;
  if (rearm) {
    q->rearm_queued = true;
    q->refs.fetch_add(1, std::memory_order_relaxed);  // the re-arm's (rearm_for_taker)
  }
  q->unlock();
  if (pause) post_once(&q->pause_cancel);  // the armed accept's reference keeps q
  if (resume) ring.push(&q->cont);
  if (rearm) ring.push(&q->rearm);
  if (ended) q->unref();  // the armed accept's reference
}

}  // namespace parkway::io::detail

namespace parkway::io {

using detail::AcceptQueue;

AcceptStream Listener::stream() {
  checked("stream");
  auto* q = new AcceptQueue();
  q->listen_fd = fd();
  q->scope = scope();
  q->scope->refs.fetch_add(1, std::memory_order_relaxed);
  q->cont.invoke = &detail::resume_taker;
  q->cont.q = q;
  q->rearm.invoke = &detail::rearm_for_taker;
  q->rearm.q = q;
  for (detail::CancelRequest* c : {&q->cancel, &q->pause_cancel}) {
    c->release = &detail::release_cancel;
    c->retain = &detail::retain_for_cancel;
    c->obj = q;
  }
  q->link.req = &q->cancel;
  return AcceptStream(q);
}

// Closes the connections not taken, that of a taker whose resume is
// queued (`resuming`) included: that taker's await_resume finds the queue
// empty and returns ECANCELED, as does an awaiter that is awaited later.
AcceptStream::~AcceptStream() {
  if (!q_) return;
  q_->lock();
  q_->closed = true;
  for (int fd : q_->ready)
    if (fd >= 0) ::close(fd);
  q_->ready.clear();
  if (q_->armed) {
    detail::unpublish(q_);
    detail::post_once(&q_->cancel);
  }
  q_->unlock();
  q_->unref();
}

AcceptStream::Next AcceptStream::next(OpOptions o) {
  if (!q_) throw std::logic_error("parkway::io::AcceptStream::next: the stream was moved from");
  detail::check_options(o, "AcceptStream::next");
  return Next{q_, o};
}

AcceptStream::Next::Next(detail::AcceptQueue* q, OpOptions o) noexcept
    : q(q), o(o), source_scope(o.cancel ? o.cancel->scope() : nullptr) {
  this->o.cancel = nullptr;  // the source may go before the co_await: its scope is held
  q->refs.fetch_add(1, std::memory_order_relaxed);  // the awaiter's: it may outlive the stream
}

bool AcceptStream::Next::await_ready() noexcept {
  // Off a worker, await_suspend refuses it, a connection queued or not.
  if (::parkway::detail::Worker::current() == nullptr) return false;
  // A connection queued for a taker whose resume is queued is that
  // taker's: await_suspend refuses this one.
  q->lock();
  const bool ready = !q->ready.empty() && !q->resuming && !q->handed && (!q->claimer || q->claimer == this);
  if (ready) q->claimer = this;  // another taker's next() before our await_resume must not take it
  q->unlock();
  return ready;
}

bool AcceptStream::Next::await_suspend(std::coroutine_handle<> h) {
  ::parkway::detail::Worker* w = ::parkway::detail::Worker::current();
  if (!w || w->runtime().forked())
    throw std::logic_error("parkway::io::AcceptStream::next: not on a parkway worker");
  // A worker that cannot make its ring fails the call as a value, as
  // any operation does (op.cpp, OpBase::await_suspend).
  int ring_err = 0;
  detail::IoRing* ring_or_null = w->io_ring(&ring_err);
  if (!ring_or_null) {
    early = ring_err;
    return false;
  }
  detail::IoRing& ring = *ring_or_null;
  // Made before the lock (it takes scope locks and the group registry's
  // mutex); its CQE is reaped by this thread only, after this returns.
  detail::OpState* guard = nullptr;
  if (int rc = detail::make_guard(q, ring, o, source_scope.get(), &guard); rc < 0) {
    early = rc;
    return false;
  }
  q->lock();
  if (!q->ready.empty() || q->waiter || q->resuming || q->handed || (q->claimer && q->claimer != this)) {
    // Another taker waits, or is about to resume with the connection
    // queued, or has resumed and not yet taken it, or has claimed the
    // one queued (then ready is not empty, and not this taker's).
    const bool busy = q->waiter || q->resuming || q->handed || (q->claimer && q->claimer != this);
    if (guard) {  // not needed (q->guard, if any, is another taker's)
      guard->refs.fetch_add(1, std::memory_order_relaxed);
      detail::cancel_op(guard);
    }
    if (!busy) q->claimer = this;  // the result queued is this taker's (see await_ready)
    q->unlock();
    detail::drop_guard(guard);
    if (busy)
      throw std::logic_error("parkway::io::AcceptStream::next: another coroutine is already waiting on this stream");
    return false;
  }
  // Nothing queued and its time has passed: it fails before it begins,
  // as any operation does and as a fired CancelSource makes it (io.md,
  // "An operation's life"). Without this the accept was armed, and one
  // waiting in the backlog completed ahead of the guard's cancel: the
  // expired call took the connection. Only a connection queued already
  // is handed over whatever the options say.
  if (detail::time_passed(o)) {
    if (guard) {
      guard->refs.fetch_add(1, std::memory_order_relaxed);
      detail::cancel_op(guard);
    }
    q->unlock();
    detail::drop_guard(guard);
    early = -ETIMEDOUT;
    return false;
  }
  q->guard = guard;  // from here every way out ends in await_resume, which cancels it
  if (q->closed || detail::scope_cancelled(q->scope)) {  // the stream was destroyed, or the listener closed
    q->ready.push_back(-ECANCELED);
    q->claimer = this;
    q->unlock();
    return false;
  }
  q->waiter = h;
  this->h = h;
  if (!q->armed && !detail::arm_for_waiter(q, ring)) {  // its error queued
    q->waiter = {};
    q->claimer = this;
    q->unlock();
    return false;
  }
  q->unlock();
  return true;
}

// A taker destroyed while it waits (or after its continuation was queued
// and before it ran) is forgotten, so that no connection resumes its
// frame; the connection stays queued for the stream's next taker.
AcceptStream::Next::~Next() {
  if (h) {  // suspended
    q->lock();
    detail::OpState* g = nullptr;
    if (q->waiter == h || q->resuming == h) {
      if (q->waiter == h) q->waiter = {};
      else q->resuming = {};
      g = detail::take_guard(q);
    }
    // Resumed but its await_resume never ran (the resumption was dropped
    // at a shutdown's deadline): the stream is no longer handed to it.
    if (q->handed == h) q->handed = {};
    q->unlock();
    detail::drop_guard(g);
  }
  // Claimed a result and never took it: it stays for the next taker.
  q->lock();
  if (q->claimer == this) q->claimer = nullptr;
  q->unlock();
  q->unref();  // the awaiter's (its constructor)
}

Result<Socket> AcceptStream::Next::await_resume() noexcept {
  if (early) return Error(-early, "accept");
  q->lock();
  if (h && q->handed == h) q->handed = {};
  if (q->claimer == this) q->claimer = nullptr;
  // Empty only if the stream was destroyed meanwhile: its destructor
  // closed the connection this taker was resumed for, or the one
  // await_ready() saw.
  int fd = -ECANCELED;
  if (!q->ready.empty()) {
    fd = q->ready.front();
    q->ready.pop_front();
  }
  detail::OpState* g = detail::take_guard(q);  // the accept came first: the guard lost
  q->unlock();
  detail::drop_guard(g);
  if (fd < 0) return Error(-fd, "accept");
  return Socket(fd);
}

}  // namespace parkway::io
