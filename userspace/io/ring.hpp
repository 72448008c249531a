// ring.hpp -- one worker's io_uring ring: submitting, reaping, cancels
// from other threads, and parking inside the ring (docs/design/io.md; the
// in-ring park's model is docs/spec/io_park.pml, step names in brackets).
//
// Only the owning worker's thread touches the ring (it is created there,
// SINGLE_ISSUER | DEFER_TASKRUN where the kernel has them). Other threads
// reach it through the mailbox: a lock-free list of CancelRequests [M1]
// followed by a notify() of the owner's ParkWord [M2]; the owner drains
// it at every scheduling point and rechecks it before it sleeps [R1].
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>

#include "io/op_state.hpp"
#include "io/ready_queue.hpp"
#include "io/recv_pool.hpp"

namespace parkway::detail {
class Worker;
struct ParkWord;
}

namespace parkway::io::detail {

// IORING_FEAT_NO_IOWAIT (Linux 6.15): the kernel takes
// IORING_ENTER_NO_IOWAIT, and a ring sleep need not count as I/O wait
// (io.md, "A ring sleep is not I/O wait"). The bookworm headers lack it.
inline constexpr unsigned kFeatNoIowait = 1u << 17;

// How a wake reaches a worker parked inside its ring.
enum class WakeMode : std::uint8_t {
  kFutexOp,  // an IORING_OP_FUTEX_WAIT on the park word (Linux 6.7+)
  kEventfd,  // a read of the park word's doorbell eventfd, rung by wakers
};

class IoRing {
 public:
  // Creates the ring on the calling thread, which must be w's. If
  // io_uring cannot be set up, *err is -errno (else 0) and the object is
  // only fit to be destroyed. No exception: its caller is an operation's
  // co_await, whose failures are values.
  IoRing(::parkway::detail::Worker& w, int* err) noexcept;
  // Cancels the ring's own wait, drains the mailbox and closes the ring.
  // Operations of users must be over (the worker leaves only then).
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  // Queues st's operation as an SQE; it goes to the kernel at the next
  // flush. A timeout or deadline in o puts st in the ring's deadline heap
  // (io.md, "Timeouts"). Returns 0, or -errno if no SQE could be had.
  int submit(OpState* st, const OpArgs& a, const OpOptions& o) noexcept;
  // Queues a multishot accept whose CQEs carry user_data `tagged`.
  int submit_multishot_accept(int fd, std::uint64_t tagged) noexcept;

  // Any thread: have the owner submit an ASYNC_CANCEL of req->target.
  // req->release runs on the owner once that is done (or at once if the
  // ring is closed). At most one post per request (req->posted).
  void post_cancel(CancelRequest* req) noexcept;

  // Scheduling points (owner only):
  // between two tasks: reap if the kernel has completions for us and the
  // worker's ready queue is empty (the last batch has been taken: reaping
  // per task would cost a system call each). A reap that enters the
  // kernel (for its deferred work, or a CQ that overflowed) takes the
  // queued SQEs along; a reap of CQEs already in the CQ enters only for
  // urgent SQEs. SQEs that a peer waits for (a send on the
  // ring, a write, a connect, a cancel: `urgent_`) go within a few tasks
  // while a batch runs, the others (a receive, an accept, a sleep) within
  // a few tasks once it is over, or with the ring park's entry if the
  // worker runs out of work first: what they complete could not be reaped
  // sooner anyway. So a request costs one system call or less, not one
  // per operation (io.md, "When SQEs go to the kernel").
  // Every kDeadlineTicks calls it also cancels the operations whose
  // deadline has passed (a clock read per call would cost a compute task
  // more than the task itself).
  void between_tasks() noexcept {
    if (!deadlines_.empty() && ++deadline_ticks_ >= kDeadlineTicks) [[unlikely]]
      expire_deadlines();
    if (!ready_.maybe_nonempty()) {
      if (events_waiting()) [[unlikely]]
        poll();
      else if (io_uring_sq_ready(&ring_) != 0 && (urgent_ || ++sq_ticks_ >= kFlushTicks)) [[unlikely]]
        enter(false);
    } else if (urgent_ && ++sq_ticks_ >= kFlushTicks) {
      enter(false);
    }
  }
  // cancel operations past their deadline, flush SQEs, run the kernel's
  // deferred completions, reap the CQEs (each
  // finished operation's continuation joins the worker's ready queue; CQEs
  // beyond its room stay in the CQ for the next reap) and drain the
  // mailbox. Returns how many continuations it pushed.
  unsigned poll() noexcept;
  // [R1] Would poll() find something: CQEs, deferred completions or
  // cancel requests? (SQEs not yet submitted go in with the ring park.)
  // The kernel's TASKRUN flag can be stale; poll() clears it then ([F1]).
  bool events_waiting() const noexcept {
    return io_uring_cq_ready(&ring_) != 0 ||
           (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0 ||
           mailbox_.load(std::memory_order_seq_cst) != nullptr;
  }
  // Operations of users in flight (queued SQEs included).
  unsigned ops() const noexcept { return ops_; }
  // Shutdown has begun: a new operation is refused with ECANCELED. The
  // first call that sees it cancels those in flight here ([X4]).
  bool refuses_new_ops() noexcept;
  // Must the worker park inside the ring? Yes while an operation or the
  // ring's own wait is in flight: a plain futex wait beside an armed ring
  // wait on the same word could have its wake taken by the ring's.
  // Cancels in flight count too: their CQEs release references, and
  // reaping them must not wait for the next wake.
  bool must_park_in_ring() const noexcept { return ops_ != 0 || armed_ || cancels_ != 0; }
  WakeMode wake_mode() const noexcept { return mode_; }
  // The ParkWord value a ring park announces: kParked (futex op) or
  // kParkedRing (eventfd: wakers ring the doorbell).
  std::uint32_t parked_value() const noexcept;
  // [R2] arm the ring's wait if it is not armed, [R3] sleep in
  // io_uring_enter until a CQE arrives, the earliest deadline of the
  // ring's operations passes, or (if timed) 1 ms has gone by. Called
  // after [P0]..[P2] and [R1] found nothing; the worker reaps [R4] (poll)
  // after it has left the idle list.
  void park(::parkway::detail::ParkWord& pw, bool timed) noexcept;
  // Shutdown: cancel every operation in flight (once per batch of new ones).
  void cancel_everything() noexcept;

  // For the multishot accept's reaper (accept_stream.cpp): queue a
  // continuation on the worker's ready queue; the accept ended (no F_MORE).
  void push(::parkway::detail::Task* t) noexcept;
  void multishot_ended() noexcept { --ops_; }

  // How often [F1] found the kernel's TASKRUN flag set with no work behind
  // it and cleared it. The test sets the flag to make that state at will.
  std::uint64_t stale_taskrun_hints() const noexcept { return stale_taskrun_hints_; }
  // Set up with DEFER_TASKRUN: completions wait for the owner's entry.
  bool defers_taskrun() const noexcept { return defer_taskrun_; }
  // Where the kernel mapped this ring's CQ head (its mapping's address).
  const void* cq_head_for_test() const noexcept { return ring_.cq.khead; }
  void raise_taskrun_flag_for_test() noexcept {
    __atomic_fetch_or(ring_.sq.kflags, unsigned(IORING_SQ_TASKRUN), __ATOMIC_SEQ_CST);
  }

 private:
  static constexpr unsigned kFlushTicks = 4;  // continuations that may queue SQEs before a flush
  static constexpr unsigned kDeadlineTicks = 64;  // between_tasks() calls per look at the clock
  io_uring_sqe* get_sqe(unsigned need = 1) noexcept;
  // An SQE without reaping, for callers that must not queue continuations
  // (a parking worker, a reap in progress): a full SQ is flushed once;
  // nullptr if the kernel refused that flush.
  io_uring_sqe* get_sqe_without_reap() noexcept;
  unsigned reap() noexcept;
  void drain_mailbox() noexcept;
  void repost(CancelRequest* first) noexcept;  // a list drain_mailbox could not submit, back in the mailbox
  void complete(OpState* st) noexcept;
  void on_cqe(const io_uring_cqe* cqe) noexcept;
  // Waits up to `wait_ns` (< 0: no limit) when `wait`.
  void enter(bool wait, std::int64_t wait_ns = -1) noexcept;
  // enter()'s wait where the kernel can leave a ring sleep out of I/O wait.
  int submit_and_wait_no_iowait(std::int64_t wait_ns) noexcept;
  // Queues an ASYNC_CANCEL of each operation whose deadline has passed.
  void expire_deadlines() noexcept;
  // [F1] After an entry owed the TASKRUN flag's work: clear a stale flag.
  void settle_taskrun_hint() noexcept;
  // Owned receives (recv_pool.hpp): fill sqe to receive into a pool
  // buffer, or, with no pool, into st's block taken now (-ENOMEM if it
  // cannot be); at the reap, copy the bytes out and give the buffer back,
  // or, if the pool was empty, hold st until the CQ is drained and submit
  // it again then. Returns the result to complete st with, or kNotYet.
  int prep_owned_recv(io_uring_sqe* sqe, OpState* st) noexcept;
  static void prep_pool_recv(io_uring_sqe* sqe, const OpState* st) noexcept;
  static void queue_behind(io_uring_sqe* sqe) noexcept;
  static constexpr int kNotYet = -0x7fffffff;
  int settle_owned_recv(OpState* st, int res, std::uint32_t flags) noexcept;
  int submit_owned_recv_again(OpState* st) noexcept;
  // A held receive that a posted cancel, its deadline (timed_out) or the
  // shutdown's cancel-everything reached: it ends rather than goes in again.
  bool held_recv_cancelled(const OpState* st) const noexcept;
  // At the end of every reap: each receive held for want of a buffer that
  // a cancel reached ends (ECANCELED, or ETIMEDOUT); if the reap left the
  // CQ empty (`cq_drained`), the others go in again.
  void submit_receives_held(bool cq_drained) noexcept;

  io_uring ring_;
  ::parkway::detail::Worker& w_;
  const std::atomic<bool>& stop_;  // the runtime's: shutdown has begun
  WakeMode mode_;
  unsigned ops_ = 0;          // user operations in flight (multishot accepts included)
  bool armed_ = false;        // the ring's wait on the park word is in the kernel
  unsigned cancels_ = 0;      // ASYNC_CANCELs (requests and cancel-everything) in the kernel
  bool made_ = false;  // the constructor succeeded
  bool defer_taskrun_ = false;
  bool recv_poll_first_ = true;  // Options::io_recv_poll_first
  bool wait_no_iowait_ = false;  // waits pass IORING_ENTER_NO_IOWAIT (Linux 6.15)
  unsigned sq_ticks_ = 0;     // between_tasks() calls since urgent SQEs were queued
  bool urgent_ = false;       // an SQE a peer waits for is queued (between_tasks)
  unsigned pushed_ = 0;       // continuations pushed by the reap in progress
  static constexpr std::uint64_t kNoCancelYet = ~std::uint64_t(0);
  std::uint64_t ops_at_cancel_ = kNoCancelYet;  // submitted_ at the last cancel_everything (shutdown)
  std::uint64_t submitted_ = 0;
  std::uint64_t doorbell_buf_ = 0;  // the eventfd read's target
  std::atomic<CancelRequest*> mailbox_{nullptr};
  DeadlineHeap<OpState> deadlines_;  // operations with a timeout, earliest deadline first
  unsigned deadline_ticks_ = 0;      // between_tasks() calls since expire_deadlines()
  std::uint64_t stale_taskrun_hints_ = 0;
  ReadyQueue& ready_;  // the worker's ready continuations, where reaps put them
  RecvPool pool_;      // buffers for owned receives, registered on the first
  OpState* held_ = nullptr;  // owned receives that found the pool empty, until the CQ is drained
};

// The ParkWord state `kParkedRing` (parker.hpp) is rung through the
// doorbell eventfd; probing and the environment decide the mode once per
// process: PARKWAY_IO_WAKE=eventfd forces the fallback.
WakeMode process_wake_mode(io_uring* probe_ring) noexcept;

// Fault injection for tests of "EAGAIN from the kernel's worker thread"
// (io.md), which no load makes happen on demand: while positive, the next
// send or receive that would go in again after such an EAGAIN (OpState::
// again_args, or an owned receive) is submitted first as a no-op the
// kernel ends with -EAGAIN
// (IORING_NOP_INJECT_RESULT, kNopInjectResult), and the count goes
// down by one. Zero (always, outside tests) costs a relaxed load per such
// submission. A kernel without the flag ends the no-op with -EINVAL.
inline constexpr unsigned kNopInjectResult = 1u << 0;
extern std::atomic<int> g_inject_kernel_eagain;

}  // namespace parkway::io::detail
