// worker.hpp -- one worker thread: its deque, its counters, its loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "deque.hpp"
#include "io/ready_queue.hpp"
#include "kernel_slice.hpp"
#include "parking.hpp"
#include "probes.hpp"
#include "parkway/stats.hpp"
#include "random.hpp"
#include "sched_ext_link.hpp"

namespace parkway {
class Runtime;
}
namespace parkway::io::detail {
class IoRing;
}

namespace parkway::detail {

class RuntimeImpl;

// Counters written only by the owning worker (no RMW); read by
// Runtime::stats() from any thread.
struct WorkerCounters {
  std::atomic<std::uint64_t> spawned{0}, executed{0}, steals{0}, failed_steals{0}, injected{0},
      parks{0}, wakeups{0}, waiter_wakeups{0}, steal_fences{0}, park_fences{0}, io_ops{0}, ring_parks{0}, io_sent_now{0}, io_read_now{0}, io_sendfile{0},
      io_recv_pool_empty{0}, slice_yields{0}, io_kernel_again{0};
  static void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
#if defined(__x86_64__) && !defined(PARKWAY_TSAN)
    // One unlocked add to memory instead of load, add, store: only the
    // owner writes, and a reader's relaxed load of the aligned word sees
    // the old or the new value, as with the portable form below.
    static_assert(sizeof(c) == 8 && alignof(std::atomic<std::uint64_t>) == 8 &&
                  std::atomic<std::uint64_t>::is_always_lock_free);  // a bare aligned word
    asm("addq %1, %0" : "+m"(c) : "er"(n) : "cc");
#else
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
#endif
  }
  WorkerStats snapshot() const noexcept;
};

class alignas(64) Worker {
 public:
  Worker(RuntimeImpl& rt, unsigned index);
  ~Worker();

  // Thread body: runs tasks until the runtime stops and no work is left.
  void main_loop();

  // Push a task spawned on this worker and wake a sleeper if nobody
  // searches. Owner thread only.
  // With the trace's task level on, the deque's pushes all take the slow
  // path (Deque::force_slow_pushes, set when the worker starts), which
  // records the spawn: the common path tests nothing for the trace.
  [[gnu::always_inline]] void spawn(Task* t) {
    PW_PROBE2(spawn, int(index_), t);  // before the push: a thief may run t at once
    if (!deque_.try_push(t)) [[unlikely]] {  // [Q2]
      spawn_at_limit(t);  // a tail call: the common path needs no frame
      return;
    }
    spawned();
  }
  [[gnu::noinline]] void spawn_at_limit(Task* t) {
    if (trace::tasks_on()) [[unlikely]]
      trace::record_task(trace::EventType::kSpawn, t);  // before the push, as the probe
    deque_.push_at_limit(t);  // [Q2], past the cached limit: may grow the buffer
    spawned();
  }
  [[gnu::always_inline]] void spawned() {
    WorkerCounters::bump(counters_.spawned);
    after_push();
  }

  // Run tasks (own deque first, then steal) until done(ctx) holds; sleep
  // on this worker's ParkWord when there is nothing to run. `timed`: wake
  // up every millisecond to re-check done (for a waiter nobody can name).
  // Owner thread only.
  using DoneFn = bool (*)(void*) noexcept;
  void run_until(DoneFn done, void* ctx, bool timed = false);

  // Pop this worker's newest task and run it; false if there was none.
  // Every path that runs a task ends in a tail call (invoke returns true), so
  // the task returns straight to our caller. Owner only.
  // With a ring, this is also io.md's "between tasks" scheduling point:
  // completions are reaped before the pop, so their continuations are
  // the newest tasks and run next (reaped after the pop, they went under
  // whatever the popped task spawned, and a task that kept spawning
  // starved them). A tail call: the common path saves no register.
  // With the trace's task level on, slow_run_ sends it the same way as a
  // ring does (to run_own_slow, which records the run), so the common path
  // tests one byte for both.
  [[gnu::always_inline]] bool run_own() noexcept {
    if (slow_run_) [[unlikely]]
      return run_own_slow();
    return run_own_popped();
  }
  // The ring's between-tasks point, for the paths that pop (loop, helping
  // waits): reap if it is time, then run the ready continuations (true if
  // it ran any); nothing without a ring. The caller then runs at most one
  // task of its own, so a batch of continuations and a deque task take
  // turns.
  bool io_point() noexcept;
  // Reap the ring now (not only when it is time): true if completions
  // became ready continuations. For a wait that runs only its own
  // (CompletionWord::wait_isolated). Owner only.
  bool reap_io_now() noexcept { return poll_io(); }
  // Shutting down: cancel the ring's operations (their awaiters resume
  // with ECANCELED), as a park does. For a wait that never parks
  // (CompletionWord::wait_isolated), which a shutdown must not leave
  // waiting for I/O nobody completes. Owner only.
  void cancel_io_if_stopping() noexcept;
  // The ring's between-tasks work, and [Y1]: the slice's end, kept here
  // (kernel_slice.hpp). Workers with a ring only (io_ set).
  void between_tasks() noexcept;
  [[gnu::always_inline]] bool run_own_popped() noexcept {
    std::int64_t top, bottom;
    if (Task* t = deque_.pop_unless_last(&top, &bottom)) [[likely]]  // [Q4]
      return execute_untraced(t);  // only run_own()'s fast path comes here: slow_run_ is clear
    return run_own_last(top, bottom);
  }
  [[gnu::noinline]] bool run_own_last(std::int64_t top, std::int64_t bottom) noexcept {
    Task* t = deque_.pop_last(top, bottom);  // [Q4], the last task or none
    return t && execute(t);
  }

  unsigned index() const noexcept { return index_; }
  std::uint32_t park_id() const noexcept { return park_id_; }
  RuntimeImpl& runtime() const noexcept { return rt_; }
  Deque& deque() noexcept { return deque_; }
  const WorkerCounters& counters() const noexcept { return counters_; }
  // A task this worker ran woke its sleeping waiter (wake_waiter). Owner only.
  void count_waiter_wakeup() noexcept { WorkerCounters::bump(counters_.waiter_wakeups); }

  // This worker's io_uring ring, made on first use (owner thread only).
  // nullptr, with -errno in *err, if it cannot be made (EMFILE, ENOMEM,
  // EPERM): the operation that needed it fails with that (io.md).
  io::detail::IoRing* io_ring(int* err) noexcept;
  // The same for callers with no error to return it in (tests): throws
  // std::system_error naming the worker.
  io::detail::IoRing& io_ring();
  // This worker's ready I/O continuations (io/ready_queue.hpp).
  io::detail::ReadyQueue& io_ready() noexcept { return io_ready_; }
  // The ring's reaper: a finished operation's continuation joins our ready
  // queue (the deque only if that is full, which the reap avoids), where
  // thieves may take it; after a batch, wake a sleeper as after a steal.
  // Owner only.
  void push_ready(Task* t) noexcept {
    if (!io_ready_.push(t)) [[unlikely]] {
      // Into the deque like a spawn, and followed by the same [N1], [N2]
      // and wake: a parker's recheck must see it, or someone must be
      // woken for it (parking.md; its gate rule counts on every push onto
      // a fenced deque being fenced).
      deque_.push(t);
      after_push();
    }
  }
  void ready_pushed(unsigned n) noexcept {
    if (n > 1) after_batch_push();
  }
  void count_io_op() noexcept { WorkerCounters::bump(counters_.io_ops); }
  // Shutdown has begun: no operation is done at its co_await from now on,
  // and the ring refuses new ones (io.md, "Shutdown").
  bool io_cancelling_everything() const noexcept;
  void count_ring_park() noexcept { WorkerCounters::bump(counters_.ring_parks); }
  void count_io_sent_now() noexcept { WorkerCounters::bump(counters_.io_sent_now); }
  // May an operation finish at its co_await (a send with room, a cached
  // read) without the ring? Not more than kIoNowStreak in a row between
  // two scheduling points: a coroutine whose every co_await finishes
  // there never suspends, and this worker's ring (its completions, its
  // deadlines) would wait for it. The next one goes to the ring, where
  // the coroutine suspends and the worker reaps. `cost`: how many small
  // operations this one counts as (a send_file step of up to 1 MiB counts
  // one per 64 KiB). Owner only.
  static constexpr unsigned kIoNowStreak = 64;
  bool io_now_allowed(unsigned cost = 1) noexcept {
    // No ring yet: nothing on this worker to keep waiting, and
    // between_tasks (which resets the streak) runs only with a ring.
    if (!io_) return true;
    io_now_streak_ += cost;
    return io_now_streak_ <= kIoNowStreak;
  }
  void count_io_read_now() noexcept { WorkerCounters::bump(counters_.io_read_now); }
  void count_io_sendfile() noexcept { WorkerCounters::bump(counters_.io_sendfile); }
  void count_io_kernel_again() noexcept { WorkerCounters::bump(counters_.io_kernel_again); }
  void count_io_recv_pool_empty() noexcept { WorkerCounters::bump(counters_.io_recv_pool_empty); }

  static Worker* current() noexcept { return tls_current; }
  // What this worker last told the sched_ext scheduler (its own thread
  // only; tests read it from a task).
  WorkerState published() const noexcept { return published_; }
  static inline thread_local constinit Worker* tls_current __attribute__((tls_model("initial-exec"))) = nullptr;

  // Count, probe and run `t`; true (what the task's invoke returns).
  [[gnu::always_inline]] bool execute(Task* t) noexcept {
    if (trace::tasks_on()) [[unlikely]] {  // run begin and end in the trace
      WorkerCounters::bump(counters_.executed);
      PW_PROBE2(run, int(index_), t);
      return trace::run_traced(t);
    }
    return execute_untraced(t);
  }
  // execute() where the task level is known to be off (run_own's fast
  // path: slow_run_ is clear).
  [[gnu::always_inline]] bool execute_untraced(Task* t) noexcept {
    WorkerCounters::bump(counters_.executed);
    PW_PROBE2(run, int(index_), t);
    return t->invoke(t);
  }

 private:
  // [N1, N2], then [W1..W5]; and the deque's steal gate: fenced while
  // someone is idle or searching ([D1]), unfenced while all are busy ([D2]).
  // The common case, an unfenced deque, tests one byte first: its mode is
  // off only when the asymmetric [N1] is on (Deque::try_fence_off), so
  // [N1] there is a compiler barrier; every other case, the symmetric
  // mode's full fence included, goes through after_push_fenced().
  void after_push() noexcept {
    if (deque_.fenced()) [[unlikely]] {
      after_push_fenced();
      return;
    }
    asm volatile("" ::: "memory");                        // [N1], asymmetric
    std::uint64_t s = parking().state_after_push_unfenced();  // [N2]
    if (s != 0) [[unlikely]] after_push_not_all_busy(s);
  }
  [[gnu::noinline]] void after_push_fenced() noexcept {
    std::uint64_t s = parking().state_after_fenced_push();  // [N1] full, [N2]
    if (s == 0) {
      if (deque_.fence_clearable()) deque_.try_fence_off();  // [D2]
      return;
    }
    after_push_not_all_busy(s);
  }
  // [D1]: fence if the parking state `s` shows someone idle or searching
  // (who may come to steal). Also for pushes that bypass after_push (a
  // batch taken from the injection queue or stolen: after_batch_push).
  void fence_if_needed(std::uint64_t s) noexcept {
    if (s != 0 && !deque_.fenced()) deque_.fence_on();
  }
  // After moving a batch into our deque (from the injection queue or a
  // victim), as after a spawn: [N1], [N2], [D1], and wake a sleeper if
  // nobody searches. A searcher is counted in S, so this wakes nobody on
  // the search path; it matters for a worker over the searcher cap and for
  // the periodic injection check, whose batch a parker's [P2] recheck may
  // have missed while it was in neither queue (with the window widened by a
  // delay, 21 of 500 tasks were stranded; Parking.BatchMovedIntoADeque*).
  void after_batch_push() noexcept {
    after_push_not_all_busy(parking().state_after_fenced_push());  // [N1], [N2]; with s == 0 it does nothing
  }
  // [D1], then wake a sleeper if nobody searches.
  [[gnu::noinline]] void after_push_not_all_busy(std::uint64_t s) noexcept {
    fence_if_needed(s);
    if (Parking::wake_needed(s)) wake_one();
  }
  Parking& parking() noexcept { return parking_; }
  Task* next_local() noexcept;
  Task* take_injected() noexcept;
  Task* search(DoneFn done, void* ctx) noexcept;
  Task* steal_round() noexcept;
  void found_work() noexcept;
  // heavy_fence() before a parking recheck ([P2], [S3]), counted and
  // probed; false if membarrier failed.
  bool paid_park_fence() noexcept;
  // Every other worker's deque is fenced: none can push behind a light
  // fence, so a recheck needs no heavy one (parking.md).
  bool others_push_fenced() const noexcept;
  void wake_one() noexcept;
  bool any_work_visible() const noexcept;
  // The ring's reap at a scheduling point: true if it made tasks runnable.
  bool poll_io() noexcept;
  // Runs the continuations in the ready queue now, oldest first (not those
  // they make ready meanwhile: the next scheduling point has those); how
  // many ran. Thieves may take some first.
  unsigned run_ready_batch() noexcept;
  // run_own() on a worker with a ring: its between-tasks reap, then a
  // ready continuation or the pop, taking turns.
  [[gnu::noinline]] bool run_own_slow() noexcept;
  void park(DoneFn done, void* ctx, bool main, bool timed) noexcept;
  void loop(DoneFn done, void* ctx, bool main, bool timed);
  // Tell the sched_ext scheduler (if loaded) what this worker is doing;
  // a plain store on a transition, nothing when it is not loaded.
  void publish(WorkerState s) noexcept;
  // Before a task or continuation runs: a worker back from a park
  // published Searching, and is busy from here, whichever way it found
  // the work (the scheduler runs busy workers before thieves).
  void publish_busy() noexcept {
    if (published_ != WorkerState::Busy) [[unlikely]]
      publish(WorkerState::Busy);
  }

  RuntimeImpl& rt_;
  Parking& parking_;
  const unsigned index_;
  std::uint32_t park_id_ = 0;
  bool searching_ = false;
  WorkerState published_ = WorkerState::Off;  // the last publish(), kept whether or not a scheduler reads it
  std::uint32_t tick_ = 0;
  VictimOrder victims_;
  std::unique_ptr<io::detail::IoRing> io_;  // null until the first I/O operation
  SliceKeeper slice_;                        // [Y1], at the ring's scheduling points
  // run_own() takes run_own_slow(): a ring exists, or the trace records
  // every task (set on the worker's thread only).
  bool slow_run_ = false;
  unsigned io_now_streak_ = 0;  // operations done at their co_await since between_tasks()
  bool ready_ran_last_ = false;  // run_own_slow: its last call ran ready continuations
  Deque deque_;
  io::detail::ReadyQueue io_ready_;  // filled by the ring's reaps; taken by us and thieves
  alignas(64) WorkerCounters counters_;
};

}  // namespace parkway::detail
