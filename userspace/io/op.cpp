// op.cpp -- an operation's life: start on the caller's ring, resume from
// the reaper, cancel from anywhere, abandon when the coroutine dies
// (op_state.hpp has the ownership rules; docs/design/io.md the why).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "chaos.hpp"
#include "io/op_state.hpp"
#include "io/ring.hpp"
#include "parkway/task_group.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"

namespace parkway::io::detail {

using ::parkway::detail::Worker;

// The continuation the reaper queues: resume the awaiting coroutine,
// unless it was destroyed meanwhile (then drop the awaiter's reference).
bool resume_continuation(::parkway::detail::Task* t) noexcept {
  auto* c = static_cast<OpState::Continuation*>(t);
  OpState* st = c->st;
  if (st->phase.exchange(kResumed, std::memory_order_acq_rel) == kOrphaned) {
    unref(st);
    return true;
  }
  // may free st (the co_await ends): touch nothing after
  ::parkway::detail::resume_from_outside(st->waiter);
  return true;
}

namespace {

void release_cancel(CancelRequest* r) noexcept { unref(static_cast<OpState*>(r->obj)); }
void retain_for_cancel(CancelRequest* r) noexcept {
  static_cast<OpState*>(r->obj)->refs.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

// Every operation's state comes from the task allocator's largest class
// (task_alloc.cpp); a larger one would go to malloc at every operation.
static_assert(sizeof(OpState) <= 256, "OpState outgrew the 256-byte task block");

OpState* new_op_state() {
  void* mem = ::parkway::detail::allocate_task(sizeof(OpState));
  auto* st = ::new (mem) OpState();
  st->cont.invoke = &resume_continuation;
  st->cont.st = st;
  st->cancel.release = &release_cancel;
  st->cancel.retain = &retain_for_cancel;
  st->cancel.obj = st;
  st->cancel.target = reinterpret_cast<std::uint64_t>(st) | kTagOp;
  st->kernel_done.add(1);
  return st;
}

void unref(OpState* st) noexcept {
  if (st->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  delete[] st->received;  // an owned receive's bytes nobody took
  if (st->result_is_fd && st->res >= 0) ::close(st->res);  // a descriptor nobody took
  st->~OpState();
  ::parkway::detail::free_task(st, sizeof(OpState));
}

void post_once(CancelRequest* req) noexcept {
  if (req->posted.exchange(true, std::memory_order_acq_rel)) return;  // once
  req->retain(req);  // the request's reference, dropped by its release
  req->ring->post_cancel(req);
}

void cancel_op(OpState* st) noexcept { post_once(&st->cancel); }

// ---- scopes -----------------------------------------------------------------

void OpScope::lock() noexcept {
  while (lock_.exchange(true, std::memory_order_acquire))
    while (lock_.load(std::memory_order_relaxed)) ::parkway::detail::cpu_relax();
}

OpScope* new_scope() { return new OpScope(); }

void retain_scope(OpScope* s) noexcept { s->refs.fetch_add(1, std::memory_order_relaxed); }

void release_scope(OpScope* s) noexcept {
  if (s && s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (s->close_fd >= 0) ::close(s->close_fd);  // cannot happen: the last member closed it
    delete s;
  }
}

namespace {
// Under s's lock: cancel every operation in s, and s's accept stream.
void cancel_members(OpScope* s) noexcept {
  s->cancelled.store(true, std::memory_order_relaxed);
  for (OpState* st = s->head; st;) {
    OpState* next = st->links[slot_of(st, s)].next;
    cancel_op(st);
    st = next;
  }
  for (StreamLink* l = s->streams; l; l = l->next) post_once(l->req);
  for (ScopeFollower* f = s->followers; f; f = f->next) cancel_scope(f->follower);
}
}  // namespace

void cancel_scope(OpScope* s) noexcept {
  s->lock();
  cancel_members(s);
  s->unlock();
}

void close_scope(OpScope* s, int fd) noexcept {
  s->lock();
  cancel_members(s);
  const bool now = s->head == nullptr && s->streams_in_kernel == 0 && s->pins == 0;
  if (!now) s->close_fd = fd;
  s->unlock();
  if (now && fd >= 0) ::close(fd);
}

bool follow_scope(OpScope* leader, ScopeFollower& f) noexcept {
  leader->lock();
  const bool ok = !leader->cancelled.load(std::memory_order_relaxed);
  if (ok) {
    f.next = leader->followers;
    if (f.next) f.next->pprev = &f.next;
    f.pprev = &leader->followers;
    leader->followers = &f;
  }
  leader->unlock();
  return ok;
}

void unfollow_scope(OpScope* leader, ScopeFollower& f) noexcept {
  leader->lock();
  if (f.pprev) {
    *f.pprev = f.next;
    if (f.next) f.next->pprev = f.pprev;
    f.next = nullptr;
    f.pprev = nullptr;
  }
  leader->unlock();
}

DescriptorPin::DescriptorPin(OpScope* s) noexcept : s_(s), ok_(true) {
  if (!s_) return;
  s_->lock();
  ok_ = !s_->cancelled.load(std::memory_order_relaxed);
  if (ok_) ++s_->pins;
  s_->unlock();
}

DescriptorPin::~DescriptorPin() {
  if (!s_ || !ok_) return;
  s_->lock();
  --s_->pins;
  const int fd = take_fd_to_close(s_);  // closed meanwhile: the number is ours to close now
  s_->unlock();
  if (fd >= 0) ::close(fd);
}

bool scope_cancelled(const OpScope* s) noexcept { return s->cancelled.load(std::memory_order_relaxed); }

bool scope_add(OpScope* s, OpState* st, int slot) noexcept {
  s->lock();
  if (s->cancelled.load(std::memory_order_relaxed)) {
    s->unlock();
    return false;
  }
  s->refs.fetch_add(1, std::memory_order_relaxed);
  ScopeLink& l = st->links[slot];
  l.scope.store(s, std::memory_order_relaxed);
  l.prev = nullptr;
  l.next = s->head;
  if (s->head) s->head->links[slot_of(s->head, s)].prev = st;
  s->head = st;
  s->unlock();
  return true;
}

void scope_remove(OpState* st, int slot) noexcept {
  ScopeLink& l = st->links[slot];
  // Set by the submitting worker, cleared here by its reaper (a group's
  // link: under the registry's mutex): nobody else writes it.
  OpScope* s = l.scope.load(std::memory_order_relaxed);
  if (!s) return;
  s->lock();
  auto link_of = [s](OpState* x) -> ScopeLink& { return x->links[slot_of(x, s)]; };
  if (l.prev)
    link_of(l.prev).next = l.next;
  else
    s->head = l.next;
  if (l.next) link_of(l.next).prev = l.prev;
  l.scope.store(nullptr, std::memory_order_relaxed);
  l.prev = nullptr;
  l.next = nullptr;
  // The descriptor was closed while operations were in flight on it: the
  // last of them closes it (close_scope).
  const int fd = take_fd_to_close(s);
  s->unlock();
  if (fd >= 0) ::close(fd);
  release_scope(s);
}

// ---- the awaiter ------------------------------------------------------------

bool OpBase::await_suspend(std::coroutine_handle<> h) {
  Worker* w = Worker::current();
  if (!w || w->runtime().forked())
    throw std::logic_error(std::string("parkway::io::") + args_.name +
                           ": not on a parkway worker (co_await it in a coroutine that runs on a Runtime: "
                           "spawn, detach or sync_wait it)");
  check_options(opts_, args_.name);
  if (args_.fail != 0) return false;  // res_ is -fail: no kernel call takes these arguments
  // A send with room in its socket, or a read whose data is cached, is
  // done here by a non-blocking call; only what that cannot finish goes
  // to the ring (io.md, "Sends go out at the co_await", "Reads from the
  // page cache"). A cancel that came first stops the attempt too.
  // A timeout or deadline that has passed already fails the operation
  // before it begins, whatever it is and whatever the socket or cache
  // holds (a clock read only for an absolute deadline).
  if (time_passed(opts_)) {
    res_ = -ETIMEDOUT;
    return false;
  }
  const Options& ro = w->runtime().opts;
  // A send with MSG_WAITALL goes to the ring, which sends it all; one at
  // the co_await would return what fit.
  const bool send = (args_.opcode == IORING_OP_SEND || args_.opcode == IORING_OP_SENDMSG) &&
                    (args_.op_flags & MSG_WAITALL) == 0;
  const bool read = args_.opcode == IORING_OP_READ || args_.opcode == IORING_OP_READV;
  if (((send && ro.io_send_first) || (read && ro.io_read_first)) && !cancelled_before_start() &&
      !w->io_cancelling_everything() && w->io_now_allowed()) {
    // -EAGAIN: no room, not cached, or not a positional read: the ring.
    // A descriptor closed already goes to the ring too, which fails it.
    int now = -EAGAIN;
    if (const DescriptorPin pin(owner_scope_); pin.ok()) {
      PW_CHAOS();  // a close on another thread may come here (Io.ASendRacingACloseNeverReachesTheNumbersNextOwner)
      now = send ? try_send_now(args_) : try_read_now(args_);
    }
    if (now != -EAGAIN) {
      ::parkway::detail::trace::on_io_submit(args_.opcode);
      ::parkway::detail::trace::on_io_complete(now);
      if (send)
        w->count_io_sent_now();
      else
        w->count_io_read_now();
      res_ = now;
      return false;
    }
  }
  // The first operation on this worker makes its ring. A ring that
  // cannot be made (EMFILE, ENOMEM, ...) fails this operation with its
  // errno, as a value: which worker runs a coroutine's next co_await is
  // the scheduler's choice, so an exception here would strike a loop
  // that handles every error as a value (the guide's accept loop under
  // EMFILE) at any co_await, and end it.
  int ring_err = 0;
  IoRing* ring = w->io_ring(&ring_err);
  if (!ring) {
    res_ = ring_err;
    return false;
  }
  OpState* st = new_op_state();
  st->waiter = h;
  // A send or receive that may end with the kernel's -EAGAIN (its worker
  // thread's blocking attempt on an O_NONBLOCK socket) goes in again
  // (IoRing::on_cqe): the caller asked to wait, not to be told to retry.
  if ((args_.opcode == IORING_OP_SEND || args_.opcode == IORING_OP_SENDMSG || args_.opcode == IORING_OP_RECV ||
       args_.opcode == IORING_OP_RECVMSG) &&
      !args_.owned && (args_.op_flags & MSG_DONTWAIT) == 0)
    st->again_args = &args_;
  if (const int err = start_op(st, *ring, owner_scope_, cancel_scope_.get(), args_, opts_); err < 0) {
    res_ = err;
    return false;
  }
  st_ = st;
  return true;
}

int start_op(OpState* st, IoRing& ring, OpScope* owner, OpScope* cancel, const OpArgs& a, const OpOptions& o) noexcept {
  st->refs.store(2, std::memory_order_relaxed);
  st->ring = &ring;
  st->cancel.ring = &ring;
  OpScope* scopes[2] = {owner, cancel};
  int err = 0;
  for (int i = 0; i < 2 && !err; ++i)
    if (scopes[i] && !scope_add(scopes[i], st, i)) err = -ECANCELED;  // cancelled (or closed) before it began
  // The awaiting coroutine's group (await_transform sets tls_group for
  // this call): cancelling it cancels the operation.
  if (!err && ::parkway::detail::tls_group && !group_scope_add(::parkway::detail::tls_group, st)) err = -ECANCELED;
  if (!err) err = ring.submit(st, a, o);
  if (err) {
    scope_remove(st, 0);
    scope_remove(st, 1);
    group_scope_remove(st);
    // A cancel posted meanwhile holds its own reference; the awaiter's
    // and the kernel's (which never got the operation) go now.
    unref(st);
    unref(st);
  }
  return err;
}

// A cancel that came before the operation began: the ring path then ends
// it with ECANCELED (scope_add refuses it), so a send that would be tried
// at once must not go out either.
bool OpBase::cancelled_before_start() const noexcept {
  const ::parkway::TaskGroup* g = ::parkway::detail::tls_group;
  return (owner_scope_ && scope_cancelled(owner_scope_)) ||
         (cancel_scope_ && scope_cancelled(cancel_scope_.get())) ||
         (g && g->is_cancelled());
}

void OpBase::collect() noexcept {
  if (!st_) return;  // completed in await_suspend (res_ set there)
  res_ = st_->res;
  st_->result_is_fd = false;  // the awaiter has it now
  cqe_flags_ = st_->cqe_flags;
  received_ = std::exchange(st_->received, nullptr);
  unref(std::exchange(st_, nullptr));
}

// The coroutine is being destroyed while suspended here (or was resumed
// but never reached await_resume, which cannot happen).
void OpBase::finish_or_abandon() noexcept {
  OpState* st = std::exchange(st_, nullptr);
  // [O1] Before kOrphaned is published: its CQE's reaper, if it sees
  // kOrphaned, waits for the clear below before it goes on (and before
  // its worker can leave and free the ring). Without it, a shutdown's
  // cancel could end the operation and free the ring between this
  // exchange and the post.
  st->orphan_posting.store(true, std::memory_order_relaxed);
  const std::uintptr_t was = st->phase.exchange(kOrphaned, std::memory_order_acq_rel);
  if (was == kFired) return;  // its continuation is queued: it drops our reference (st untouched from here)
  PW_CHAOS();
  if (was == kWaiting) cancel_op(st);
  st->orphan_posting.store(false, std::memory_order_release);
  if (was == kWaiting) {
    // In flight: wait until the kernel is done with it (it may be writing
    // into a buffer in the dying frame). On a worker the wait runs other
    // tasks, the ring's reaper among them.
    st->kernel_done.wait();
  }
  unref(st);
}

}  // namespace parkway::io::detail
