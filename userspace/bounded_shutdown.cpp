// bounded_shutdown.cpp -- Runtime::shutdown(deadline): finish what can be
// finished by the deadline, then drop what has not started, tell its
// waiters, and report what is still running (docs/design/cancellation.md,
// "Bounded shutdown").
//
//   1. stop_workers(), as shutdown(): no outside submission is accepted;
//      the workers run everything queued and leave once all are quiet.
//   2. Join them with pthread_timedjoin_np until the deadline. All
//      joined: done; nothing dropped, unless another call passed its own
//      deadline meanwhile (step 3 without the lock): its drops are
//      reported, and its drop state ends here.
//   3. Past it: set `dropping` (and count it in g_cancel_live). From then
//      on every task that starts, on a worker or here, is dropped by its
//      own invoke: a group task records RuntimeShutdown in its group, a
//      submitted one in its Future, a coroutine completes with it.
//   4. Drain: take every task this thread can reach (the injection
//      queue, a steal from each deque) and invoke it here, which drops it,
//      until the injection queue reads empty (a pop_batch that finds every
//      announced child claimed by a worker returns nothing meanwhile), for
//      at most kDrainMost. Workers blocked inside tasks cannot drop their
//      own queues; this does it for them.
//   5. Report: tasks dropped so far, and workers still inside a task
//      (not quiet, not searching, once that count holds still). If none,
//      join the workers (they are leaving); otherwise leave them running:
//      the destructor detaches them.
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>

#include "parkway/runtime.hpp"
#include "runtime_impl.hpp"

namespace parkway {
namespace detail {

namespace {

// One task at a time: code a dropped task runs (a joiner it resumes, a
// coroutine that unwinds) may wait for another task still queued, and
// that wait drains too (block_until); tasks held here in a batch would
// be out of its reach, and the wait would never end.
constexpr std::size_t kDrainBatch = 1;
// The most time one drain takes tasks: running tasks that keep spawning
// refill the deques as fast as it steals, and it returned only on a pass
// that found every queue empty (2 workers each spawning 100,000 tasks a
// round: no return in 40 s). What it leaves, the workers drop as they
// take it (every task that starts in the drop state is dropped). Long
// enough for a backlog nobody refills: a drop here costs 1-4 us (a steal
// pays a heavy fence), so 50,000 queued tasks take 50-200 ms.
constexpr auto kDrainMost = std::chrono::milliseconds(500);
// After the drain: how long the running count must hold still, and the
// most time spent waiting for that.
constexpr auto kSettleStill = std::chrono::milliseconds(2);
constexpr auto kSettleMost = std::chrono::milliseconds(50);
// With no worker inside a task, how long joining them may take.
constexpr auto kLeaveGrace = std::chrono::milliseconds(200);

timespec realtime_at(std::chrono::steady_clock::time_point deadline) {
  // Compared before subtracting: deadline - now overflows for a deadline
  // far in the past (time_point::min()).
  const auto now_steady = std::chrono::steady_clock::now();
  const std::chrono::nanoseconds left =
      deadline <= now_steady ? std::chrono::nanoseconds(0)
                             : std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now_steady);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count() + now.tv_nsec;
  return timespec{now.tv_sec + time_t(ns / 1000000000), long(ns % 1000000000)};
}

// Takes g's mutex unless `deadline` passes first. Polled, not a
// std::timed_mutex: its try_lock_until is pthread_mutex_clocklock, which
// ThreadSanitizer does not see (it then reports the unlock as one of an
// unlocked mutex). The wait is rare (two shutdowns at once) and short
// next to any deadline, so 1 ms steps cost nothing.
bool lock_until(std::unique_lock<std::mutex>& g, std::chrono::steady_clock::time_point deadline) {
  while (!g.try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

// Joins the threads not joined yet; false if one was still running at
// `deadline`.
bool RuntimeImpl::join_until(std::chrono::steady_clock::time_point deadline) {
  const timespec abs = realtime_at(deadline);
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (thread_joined[i]) continue;
    if (pthread_timedjoin_np(threads[i], nullptr, &abs) != 0) return false;
    thread_joined[i] = true;
  }
  return true;
}

std::uint64_t RuntimeImpl::drain_dropping() {
  std::uint64_t n = 0;
  // Put back, not cleared, at the end: a task dropped here runs code
  // (its closure's destructor, the joiner a dropped coroutine resumes)
  // that may drain another runtime with a shutdown(deadline) of its own;
  // cleared there, the rest of this drain would run its tasks instead.
  const DrainState outer = set_draining(this);
  // Counted as a live cancellation for as long as it drains: a task
  // starting here asks whether to drop only while the count is non-zero,
  // and the call that joins the workers may end the runtime's own count
  // meanwhile (cancel.cpp, runtime_dropping_here).
  g_cancel_live.fetch_add(1, std::memory_order_seq_cst);
  const auto until = std::chrono::steady_clock::now() + kDrainMost;
  auto over = [until] { return std::chrono::steady_clock::now() >= until; };  // a clock read per task: each costs more
  for (bool any = true; any && !over();) {
    any = false;
    std::size_t k = 0;
    while (Task* t = injection.pop_batch(kDrainBatch, &k)) {
      while (t) {
        Task* next = t->next;  // invoke frees t
        drain_invoking();
        t->invoke(t);
        t = next;
        ++n;
      }
      any = true;
      if (over()) break;
    }
    for (auto& w : workers) {
      Task* t;
      for (;;) {
        if (over()) break;
        Deque::Steal r = w->deque().steal(&t);
        if (r == Deque::Steal::kEmpty) break;
        if (r == Deque::Steal::kLost) {
          any = true;  // raced: look again on the next pass
          break;
        }
        drain_invoking();
        t->invoke(t);
        ++n;
        any = true;
      }
    }
    // pop_batch() finds nothing while a worker holds the claim on every
    // announced child (it may be reversing a long stack into the child's
    // pending list), though tasks are queued there: look again until the
    // queue says it is empty. A claim is held only inside a pop_batch, so
    // this ends; yield meanwhile, the claimer may need this CPU.
    if (!any && injection.maybe_nonempty()) {
      any = true;
      sched_yield();
    }
  }
  g_cancel_live.fetch_sub(1, std::memory_order_release);
  restore_draining(outer);
  return n;
}

unsigned RuntimeImpl::workers_in_tasks() const noexcept {
  const std::uint64_t s = parking.snapshot();
  const unsigned away = Parking::quiet_of(s) + Parking::searching_of(s);
  return away >= n ? 0 : n - away;
}

ShutdownReport RuntimeImpl::shutdown_until(std::chrono::steady_clock::time_point deadline) {
  if (forked()) {  // no workers here (see shutdown())
    closing.store(true, std::memory_order_seq_cst);
    return {};
  }
  std::unique_lock<std::mutex> g(shutdown_mu, std::defer_lock);
  if (!lock_until(g, deadline)) {
    // Another shutdown holds the lock past our deadline (a shutdown()
    // waiting for tasks that do not end, say). Drop what has not started
    // now, as at our own deadline: the flag and the drain need no lock
    // (the workers take from the same queues). The lock's holder joins.
    begin_dropping();
    drain_dropping();
    const ShutdownReport rep{dropped.load(std::memory_order_relaxed), workers_in_tasks()};
    // The holder may have finished meanwhile, before our flag was set.
    if (g.try_lock() && joined) end_dropping();
    return rep;
  }
  if (joined) return {};
  if (!left_running) {
    stop_workers();
    joining.store(true, std::memory_order_seq_cst);  // see abandon_from_own_worker
    thread_joined.assign(threads.size(), false);
    if (join_until(deadline)) {
      joined = true;
      // Another shutdown(deadline) may have passed its own deadline while
      // this one held the lock: it set the drop state, and the workers
      // dropped what they had not started. The report counts those drops,
      // and the drop state ends here (nobody runs this runtime's tasks now).
      end_dropping();
      return {dropped.load(std::memory_order_relaxed), 0};
    }
    begin_dropping();
  }
  drain_dropping();
  // The running count: workers that are neither quiet nor searching. One
  // that just dropped a task is counted until it parks: wait until the
  // count holds still (bounded by kSettleMost).
  const auto settle_end = std::chrono::steady_clock::now() + kSettleMost;
  unsigned running = workers_in_tasks();
  auto still_since = std::chrono::steady_clock::now();
  while (running != 0 && std::chrono::steady_clock::now() < settle_end) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    unsigned r = workers_in_tasks();
    if (r != running) {
      running = r;
      still_since = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - still_since >= kSettleStill) {
      break;
    }
  }
  ShutdownReport rep{dropped.load(std::memory_order_relaxed), running};
  if (running == 0 && join_until(std::chrono::steady_clock::now() + kLeaveGrace)) {
    joined = true;
    // Counted again once they are gone: a worker counted as searching can
    // hold a batch it took from the injection queue, and drops it before
    // it leaves (the join orders those drops before this load).
    rep.dropped = dropped.load(std::memory_order_relaxed);
    left_running = false;
    // nobody runs its tasks any more
    end_dropping();
    return rep;
  }
  if (rep.running == 0) rep.running = 1;  // one did not leave in the grace time: it is still in a task
  left_running = true;
  return rep;
}

bool RuntimeImpl::count_unobserved() noexcept {
  std::uint64_t w = unobserved.load(std::memory_order_relaxed);
  do {
    if (w < kUnobservedCall) return false;  // no call under way to report it
  } while (!unobserved.compare_exchange_weak(w, w + 1, std::memory_order_relaxed));
  return true;
}

// Leaves the count of unobserved exceptions, taking what it holds: with
// two calls under way, the later one reports what the earlier left.
std::uint64_t RuntimeImpl::leave_unobserved() noexcept {
  std::uint64_t w = unobserved.load(std::memory_order_relaxed);
  while (!unobserved.compare_exchange_weak(w, (w - kUnobservedCall) & ~(kUnobservedCall - 1),
                                           std::memory_order_relaxed)) {
  }
  return w & (kUnobservedCall - 1);
}

// shutdown_until, with the RuntimeShutdown exceptions nobody will rethrow
// counted (not printed) while it runs. Workers it joined ended theirs
// before the join; those it leaves running count until it leaves the
// word, and print after.
ShutdownReport RuntimeImpl::shutdown_counted(std::chrono::steady_clock::time_point deadline) {
  unobserved.fetch_add(kUnobservedCall, std::memory_order_relaxed);
  ShutdownReport rep;
  try {
    rep = shutdown_until(deadline);
  } catch (...) {
    leave_unobserved();
    throw;
  }
  rep.unobserved = leave_unobserved();
  return rep;
}

// ~Runtime after shutdown(deadline) left workers running: join those that
// left since, detach the rest. True if every worker was joined (the
// runtime may be freed).
bool RuntimeImpl::release_after_bounded() {
  std::lock_guard<std::mutex> g(shutdown_mu);
  if (joined) return true;
  bool all = true;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (thread_joined[i]) continue;
    if (pthread_tryjoin_np(threads[i], nullptr) == 0) {
      thread_joined[i] = true;
    } else {
      pthread_detach(threads[i]);  // it leaves when its task returns
      thread_joined[i] = true;     // nobody may join it now
      all = false;
    }
  }
  joined = true;
  // The Runtime object is about to be gone: its remaining workers answer
  // Runtime::current() with nullptr from now on (as abandon_from_own_worker).
  if (!all) abandoned.store(true, std::memory_order_seq_cst);
  if (all) {
    left_running = false;
    end_dropping();
  }
  return all;
}

}  // namespace detail

ShutdownReport Runtime::shutdown(std::chrono::steady_clock::time_point deadline) {
  if (current() == this)
    throw std::logic_error(
        "parkway::Runtime::shutdown(deadline): called from one of its own workers (it would wait for itself)");
  detail::RuntimeImpl* const impl = impl_;  // the Runtime object may be destroyed meanwhile: read once
  detail::ShutdownCall call(impl);
  return impl->shutdown_counted(deadline);
}

}  // namespace parkway
