// op_state.hpp -- what an I/O operation shares between the coroutine that
// awaits it, the ring that carries it and whoever cancels it
// (docs/design/io.md, "An operation's life").
//
// An OpState lives on the heap, not in the coroutine frame, so that the
// kernel's CQEs and a cancel request in flight never point at freed
// memory. It is freed when its last reference goes:
//   - the kernel's: until the operation's CQE is reaped;
//   - the awaiter's: dropped when the co_await ends (or, if the coroutine
//     was destroyed after its continuation was queued, by that
//     continuation);
//   - a cancel request's, while it is posted or its ASYNC_CANCEL is in
//     the kernel (so the user_data it names is never reused meanwhile).
//
// The awaiter and the reaper agree on who resumes the coroutine through
// `phase`: kWaiting -> kFired (the reaper queued the continuation) ->
// kResumed (the continuation ran); kOrphaned when the awaiter was
// destroyed first (then nobody resumes it).
#pragma once

#include <linux/time_types.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "io/deadline_heap.hpp"
#include "parkway/io.hpp"
#include "parkway/task.hpp"

namespace parkway::io::detail {

class IoRing;

// user_data tags (the low 3 bits; every tagged object is 8-aligned).
enum : std::uint64_t {
  kTagOp = 0,          // an OpState's operation
  kTagCancel = 2,      // a CancelRequest's ASYNC_CANCEL
  kTagAccept = 3,      // an AcceptQueue's multishot accept
  kTagRingWait = 4,    // the ring's own wait on the park word (no object)
  kTagInternal = 5,    // shutdown's cancel-everything (no object)
  kTagIgnore = 6,      // the ring's destructor cancelling its own wait
  kTagMask = 7,
  // An accept's user_data carries the arm's generation in its top byte
  // (user addresses end below 2^56 with 5-level paging too), so that a
  // cancel aimed at one arm finds nothing in the next (accept_stream.cpp).
  kAcceptGenShift = 56,
  kAcceptAddressMask = (std::uint64_t(1) << kAcceptGenShift) - 1,
};

// A request to cancel an operation on its ring's owner, posted from any
// thread (IoRing::post_cancel). Embedded in the object it cancels; posted
// at most once (posted flag). release() runs on the ring's owner when the
// request is done with.
struct CancelRequest {
  CancelRequest* next = nullptr;
  std::uint64_t target = 0;      // user_data of the operation to cancel
  void (*release)(CancelRequest*) noexcept = nullptr;
  void* obj = nullptr;            // the object it is embedded in
  void (*retain)(CancelRequest*) noexcept = nullptr;  // a reference on obj for the post
  IoRing* ring = nullptr;         // where the target runs (set by whoever arms it)
  std::atomic<bool> posted{false};
};

// An armed accept stream's place in its Listener scope's list
// (OpScope::streams, accept_stream.cpp), under the scope's lock.
struct StreamLink {
  CancelRequest* req = nullptr;  // the stream's cancel
  StreamLink* next = nullptr;
  StreamLink** pprev = nullptr;  // null: not in the list
};

// Posts req to its ring unless it was posted already (retain first).
void post_once(CancelRequest* req) noexcept;

// A scope that a cancel of another scope (its leader) cancels too: a call
// of many steps on two descriptors (send_file) puts its steps in a
// CancelSource of its own that follows both descriptors' scopes and the
// caller's CancelSource, so that a close of either, or the cancel, ends
// the step in flight whichever descriptor it waits on. In the leader's
// list (OpScope::followers), under its lock; cancel_members walks it.
struct ScopeFollower {
  OpScope* follower = nullptr;
  ScopeFollower* next = nullptr;
  ScopeFollower** pprev = nullptr;  // null: not in a list
};

// Membership of an operation in a scope (a Descriptor's, a CancelSource's).
// prev and next change under the scope's lock. So does `scope`, but it is
// atomic: whoever walks another scope the operation is in (a cancel, a
// neighbour's add or remove, under that scope's lock) reads every link's
// scope to find its own (slot_of) while the reaper clears this one under
// this scope's lock, a lock the walker does not hold. The value read
// decides nothing there (this link's scope, or null, is never the walked
// scope); a plain pointer made it a data race (TSAN,
// Io.AGroupCancelRacingACompletionOnASocketReadsNoLinkItDoesNotHold).
struct ScopeLink {
  std::atomic<OpScope*> scope{nullptr};
  OpState* prev = nullptr;
  OpState* next = nullptr;
};

enum : std::uintptr_t { kWaiting = 0, kFired = 1, kResumed = 2, kOrphaned = 3 };

struct OpState {
  struct Continuation : ::parkway::detail::Task {
    OpState* st;
  } cont;                             // queued on the reaper's ready queue: resumes `waiter`
  std::coroutine_handle<> waiter;
  std::atomic<std::uintptr_t> phase{kWaiting};
  // Set by an awaiter that orphans the operation before it publishes
  // kOrphaned, cleared once its cancel is posted: a reaper that finds it
  // orphaned waits for the clear, so that the ring the cancel is posted
  // to outlives the post (op.cpp finish_or_abandon, ring.cpp complete).
  std::atomic<bool> orphan_posting{false};
  std::atomic<std::uint32_t> refs{0};
  IoRing* ring = nullptr;             // the ring the operation was submitted to
  int res = 0;                        // the operation's CQE result
  std::uint32_t cqe_flags = 0;
  std::uint32_t deadline_pos = kNoDeadline;  // place in the ring's DeadlineHeap (owner of ring only)
  bool timed_out = false;             // its deadline passed and the ring cancelled it (owner only)
  // An accept's or open's: a result >= 0 is a new descriptor, closed with
  // the state unless the awaiter collected it (a coroutine destroyed after
  // the kernel made it: a cancel that came too late, or a continuation
  // queued when the frame died).
  bool result_is_fd = false;
  std::atomic<bool> in_group{false};  // in a group's scope (links[2]); changes under the registry's mutex
  ScopeLink links[3];                 // [0]: the descriptor's scope, [1]: the CancelSource's,
                                      // [2]: the awaiting coroutine's TaskGroup's (group_scope.cpp)
  CancelRequest cancel;
  union {
    __kernel_timespec ts{};  // a sleep's
    // A send or receive (not MSG_DONTWAIT; never a sleep): its awaiter's
    // arguments, which live until the co_await ends, so that the reaper
    // can submit it again when the kernel ends it with -EAGAIN (a request
    // its worker thread issued on an O_NONBLOCK socket, IoRing::on_cqe).
    // Null for every other operation but a sleep, whose ts fills these
    // bytes: never read for a sleep (IoRing::submit; a sleep's CQE is
    // never -EAGAIN, which on_cqe reads it for).
    const OpArgs* again_args;
  };
  // A receive that owns its result (io::recv_owned): the block its bytes
  // were copied into at the reap (the awaiter takes it; freed with the
  // state otherwise), and what the reaper needs to submit it again when
  // the ring's buffer pool was empty (recv_pool.hpp).
  std::byte* received = nullptr;
  int owned_fd = -1;  // an owned receive's descriptor, or a close's (`closes`)
  std::uint32_t owned_len = 0;  // the caller's max: the block's size; 0: not such a receive
  std::uint32_t owned_flags = 0;
  bool recv_polls_first = false;  // a receive whose SQE polls first (IoRing::queue_behind); an owned one goes in again so
  // An IORING_OP_CLOSE of owned_fd: a cancel that ends it (shutdown's
  // cancel-everything, which finds it queued in the kernel's worker
  // thread) leaves the descriptor open, and the reaper closes it then.
  bool closes = false;
  union {
    OpState* again_next = nullptr;  // an owned receive: the ring's list of those waiting for pool buffers
    void* guard_of;                 // a taker's guard (AcceptStream::next with options): its queue
  };
  ::parkway::detail::CompletionWord kernel_done;  // 1 until every CQE is reaped
};

OpState* new_op_state();

// Starts st, fresh from new_op_state with its two references (the
// kernel's and its awaiter's or continuation's): joins its scopes (the
// descriptor's `owner`, if any; `cancel`, its CancelSource's, if any;
// the awaiting coroutine's TaskGroup's) and queues its SQE on `ring`, its
// deadline (o's timeout or deadline; o.cancel is not read) in the ring's
// heap. On failure (a scope or the group cancelled already: -ECANCELED;
// no SQE or no memory) it leaves every scope, drops both references and
// returns the error; st is gone then.
int start_op(OpState* st, IoRing& ring, OpScope* owner, OpScope* cancel, const OpArgs& a, const OpOptions& o) noexcept;

// The continuation task's function (op.cpp): resumes the awaiter.
bool resume_continuation(::parkway::detail::Task* t) noexcept;

// A call of many steps (send_all, send_file, Socket::connect), in its
// coroutine: o's CancelSource becomes `held`, one of the frame's own on
// the scope `cancel` the call took (io.hpp: the caller's may be gone
// before the steps run); none if the call was given none.
inline void hold_source(OpOptions& o, std::optional<CancelSource>& held, ScopeRef&& cancel) noexcept {
  o.cancel = cancel ? &held.emplace(std::move(cancel)) : nullptr;
}

// OpOptions take at most one of a timeout and a deadline (io.hpp): one
// that has both is refused, a std::invalid_argument naming the call,
// rather than run with one of them ignored (the ring's heap holds one
// deadline per operation).
inline void check_options(const OpOptions& o, const char* name) {
  if (o.timeout.count() != 0 && o.deadline.time_since_epoch().count() != 0)
    throw std::invalid_argument(std::string("parkway::io::") + name +
                                ": OpOptions has both a timeout and a deadline (give at most one)");
}

// Whether o's time has passed already (a negative timeout, a deadline at
// or before the clock): such an operation, or a step of a call of many,
// fails with ETIMEDOUT before it begins. The clock is read only for a
// deadline.
inline bool time_passed(const OpOptions& o) noexcept {
  return o.timeout.count() < 0 ||
         (o.deadline.time_since_epoch().count() != 0 && o.deadline <= std::chrono::steady_clock::now());
}

void unref(OpState* st) noexcept;
// Cancels st wherever it runs (posts a CancelRequest to its ring's owner).
void cancel_op(OpState* st) noexcept;

// The set of operations in flight that one cancel must reach: a
// Descriptor's (closing it cancels them) or a CancelSource's.
// Reference-counted: its owner and each operation in it hold one.
struct OpScope {
  std::atomic<std::uint32_t> refs{1};
  std::atomic<bool> cancelled{false};
  // guards head and every link into this scope
  std::atomic<bool> lock_{false};
  OpState* head = nullptr;
  StreamLink* streams = nullptr;  // a Listener's armed multishot accepts, to cancel (accept_stream.cpp)
  ScopeFollower* followers = nullptr;  // scopes cancelled with this one (follow_scope)
  std::uint32_t streams_in_kernel = 0;  // those accepts that may still be submitted or in the
                                        // kernel: they name the descriptor too (close_scope)
  const ::parkway::TaskGroup* group = nullptr;  // a group's scope: whose coroutines' operations it holds
  // A Descriptor's scope, closed while operations were in it: the
  // descriptor, closed when the last of them leaves (close_scope).
  int close_fd = -1;
  // System calls on the descriptor's number under way outside the ring
  // (DescriptorPin): a close meanwhile leaves the number open until the
  // last of them ends.
  std::uint32_t pins = 0;
  void lock() noexcept;
  void unlock() noexcept { lock_.store(false, std::memory_order_release); }
};

// Adds st to s through link `slot`; false if s was cancelled (then st is
// not added: the operation fails with ECANCELED before it starts).
bool scope_add(OpScope* s, OpState* st, int slot) noexcept;
void scope_remove(OpState* st, int slot) noexcept;
// Closing a Descriptor: cancels its scope (cancel_scope) and closes fd,
// at once if no operation is in the scope, else when the last one
// leaves it. An operation's SQE names its descriptor by number, and the
// kernel takes the file only when it issues the SQE: one queued for the
// next flush, or an owned receive the reaper submits again after its
// ENOBUFS, must not find the number closed and given to another file
// (io.md, "Closing a descriptor").
void close_scope(OpScope* s, int fd) noexcept;
// Makes f.follower cancelled whenever `leader` is; false (f not linked)
// if the leader is cancelled already. Lock order: a leader's lock, then
// its followers'; a follower leads no scope. unfollow_scope unlinks f
// (a no-op if it is not linked); both must be called on the same leader,
// which must live until then.
bool follow_scope(OpScope* leader, ScopeFollower& f) noexcept;
void unfollow_scope(OpScope* leader, ScopeFollower& f) noexcept;
// Under s's lock, once the last operation or the accept stream has left
// a closed scope: the descriptor to close (after unlocking), or -1.
inline int take_fd_to_close(OpScope* s) noexcept {
  if (s->head != nullptr || s->streams_in_kernel != 0 || s->pins != 0 || s->close_fd < 0) return -1;
  const int fd = s->close_fd;
  s->close_fd = -1;
  return fd;
}
// A system call made on a descriptor's number by the library itself, not
// the ring (a send or read done at the co_await, a sendfile step): the
// number must not be closed, and given to another file by an accept or
// open on another thread, between the check that the descriptor is open
// and the call. Made before the call: ok() is false if the descriptor
// was closed already (its scope cancelled), and the call must not be
// made; else a close until the pin's end leaves the number open, and
// the pin's end closes it. A null scope (a raw descriptor) pins nothing.
class DescriptorPin {
 public:
  explicit DescriptorPin(OpScope* s) noexcept;
  ~DescriptorPin();
  DescriptorPin(const DescriptorPin&) = delete;
  DescriptorPin& operator=(const DescriptorPin&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  OpScope* s_;
  bool ok_;
};
// Which of st's links is its membership of s.
inline int slot_of(const OpState* st, const OpScope* s) noexcept {
  return st->links[0].scope.load(std::memory_order_relaxed) == s   ? 0
         : st->links[1].scope.load(std::memory_order_relaxed) == s ? 1
                                                                   : 2;
}

// group_scope.cpp: the operations in flight of coroutines that belong to
// a TaskGroup, by group, so that cancelling the group (or an ancestor)
// cancels them. Add: false if the group is cancelled already (the
// operation fails with ECANCELED). Remove: after the operation's last CQE.
bool group_scope_add(const ::parkway::TaskGroup* g, OpState* st) noexcept;
void group_scope_remove(OpState* st) noexcept;

// What each operation puts in its SQE (ops.cpp); the free functions and
// the RAII types' methods share them.
OpArgs recv_args(int fd, std::span<std::byte> buf, int flags);
OpArgs recv_owned_args(int fd, std::size_t max, int flags);  // throws std::invalid_argument if max is 0
OpArgs send_args(int fd, std::span<const std::byte> buf, int flags);
OpArgs read_args(int fd, std::span<std::byte> buf, std::int64_t offset);
OpArgs write_args(int fd, std::span<const std::byte> buf, std::int64_t offset);
OpArgs readv_args(int fd, std::span<const iovec> iov, std::int64_t offset);
OpArgs writev_args(int fd, std::span<const iovec> iov, std::int64_t offset);
OpArgs sendmsg_args(int fd, const msghdr& msg, int flags);
OpArgs recvmsg_args(int fd, msghdr& msg, int flags);
OpArgs shutdown_args(int fd, int how);
OpArgs accept_args(int listen_fd);
OpArgs poll_args(int fd, unsigned events);
OpArgs connect_args(int fd, const Address& a);

// Options::io_send_first: for a send or sendmsg, the bytes sent by a
// non-blocking system call now, or -errno; -EAGAIN (no room in the socket)
// also for every other operation, which only the ring does.
int try_send_now(const OpArgs& a) noexcept;
// A read at an offset tried at once with preadv2(RWF_NOWAIT): the bytes
// read (0 at the end of the file), or -EAGAIN if it is not such a read or
// could not finish without waiting (any failure: the ring then does it
// and reports its own result).
int try_read_now(const OpArgs& a) noexcept;

// A CQE of an AcceptQueue's multishot accept (accept_stream.cpp).
void accept_cqe(void* queue, int res, std::uint32_t flags, IoRing& ring) noexcept;
// The timer of an accept stream taker's guard (accept_stream.cpp): the
// longest sleep there is, INT64_MAX ns (292 years); IoRing::submit makes
// it absolute, saturated at INT64_MAX, which the kernel takes as
// KTIME_MAX. It never ends a wait by itself: a taker's timeout or
// deadline ends its guard through the ring's deadlines (IoRing::submit,
// saturating at the same INT64_MAX).
inline constexpr std::uint64_t kAcceptGuardNs = std::uint64_t(INT64_MAX);

}  // namespace parkway::io::detail
