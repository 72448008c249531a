// task_group.cpp -- TaskGroup's out-of-line parts.
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>

#include "parkway/errors.hpp"
#include "parkway/future.hpp"
#include "parkway/runtime.hpp"
#include "parkway/task_group.hpp"
#include "chaos.hpp"
#include "parker.hpp"
#include "runtime_impl.hpp"
#include "waiting.hpp"
#include "worker.hpp"

namespace parkway {

namespace {
// Recorded when holding a task's exception needs memory we cannot get:
// wait() then throws std::bad_alloc instead (the failure is not dropped).
std::exception_ptr g_no_memory_marker;
// Recorded by cancel() when no task threw: wait() returns normally.
std::exception_ptr g_cancel_marker;

// The error_ of a group went from non-null back to null (wait() took it,
// or the group is destroyed): one cancellation fewer is live.
void uncount() noexcept { detail::g_cancel_live.fetch_sub(1, std::memory_order_release); }

// A parkway::Cancelled thrown inside a cancelled group is the cancellation
// itself coming back (a coroutine stopped at a co_await), not an error.
bool is_cancelled_error(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const Cancelled&) {
    return true;
  } catch (...) {
    return false;
  }
}
}  // namespace

TaskGroup::TaskGroup(Runtime& rt) noexcept
    : rt_(&rt.impl()), owner_(detail::this_thread_token()), parent_(detail::tls_group) {
  mark_slot_unused();
}

void TaskGroup::destroy_slow() noexcept {
  if (!finished()) join();
  if (error_.load(std::memory_order_acquire) != nullptr) report_lost_exception();
}

void TaskGroup::report_lost_exception() noexcept {
  std::exception_ptr* p = error_.exchange(nullptr, std::memory_order_acquire);
  if (!p) return;
  uncount();
  if (p == &g_cancel_marker) return;  // cancelled, and nothing threw
  if (p == &g_no_memory_marker) {
    std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task threw (no memory to keep it)\n");
    return;
  }
  detail::report_unobserved_exception(*p, "TaskGroup destroyed without wait(); a task threw");
  delete p;
}

// The fast path (a worker spawning into a group of its runtime) makes no
// call but a tail call, so it needs no stack frame. The first spawn of a
// group (unbound: the common spawn-once-then-wait shape) is tested first
// and falls through to the push without a taken branch.
void TaskGroup::schedule(detail::Task* t) {
  detail::Worker* w = detail::Worker::current();
  if (w) [[likely]] {
    detail::RuntimeImpl* r = &w->runtime();
    detail::RuntimeImpl* cur = rt_.load(std::memory_order_relaxed);
    if (__builtin_expect(cur == nullptr, 1))
      rt_.store(r, std::memory_order_relaxed);  // binds at the first spawn
    else if (cur != r)
      goto outside;  // bound to another runtime
    w->spawn(t);
    return;
  }
outside:
  schedule_outside(t);
}

void TaskGroup::schedule_outside(detail::Task* t) {
  detail::RuntimeImpl* cur = rt_.load(std::memory_order_relaxed);
  if (!cur) {
    cur = &Runtime::default_runtime().impl();
    rt_.store(cur, std::memory_order_relaxed);
  }
  cur->inject(t);
}

namespace detail {
bool run_own_task() noexcept {
  Worker* w = Worker::current();
  return w && w->run_own();
}
}  // namespace detail

// The inline task finished on a thread other than the owner: clear the
// slot and learn, from the same RMW, whether the owner sleeps on it.
void TaskGroup::slot_done_remote() noexcept {
  PW_CHAOS();
  std::uint64_t old = slot_.exchange(0, std::memory_order_acq_rel);  // [G3]
  if (old >> 32) detail::wake_waiter(std::uint32_t(old >> 32) - 1);  // [G4]
}

// What one blocking wait knows about its registrations.
struct TaskGroup::WaitState {
  TaskGroup* g;
  std::uint32_t id;      // the waiter's ParkWord
  bool owner;            // may register in the slot ([G6])
  bool timed = false;    // poll every millisecond (set when it cannot register)
  bool block_timed = false;  // the timed argument of the block_until now running
  bool registered = false;  // we put our id in pending_'s high half ([C1])
};

// The done() of block_until, also its [G5] recheck after announcing on the
// ParkWord: registers the waiter wherever a task is outstanding, then
// decides from one snapshot of both words (slot first, as finished()):
// finished -> true; else false (sleep) only if the block_until running
// is timed or every non-zero word carries this waiter's id, so that
// whatever finishes last notifies it. Otherwise true ("look again"):
// wait_slow comes back, and a waiter that cannot register (a busy slot
// and not the owner, or another waiter's id in pending_) is timed from
// then on, in a new block_until.
bool TaskGroup::wait_check(void* p) noexcept {
  using namespace detail;
  auto& w = *static_cast<WaitState*>(p);
  TaskGroup* g = w.g;
  const std::uint64_t mine = (std::uint64_t(w.id) + 1) << 32;
  if (w.owner) {
    std::uint64_t v = g->slot_.load(std::memory_order_acquire);
    while (v != 0 && (v >> 32) == 0 &&
           !g->slot_.compare_exchange_weak(v, v | mine, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {  // [G6]
    }
  }
  if (!w.registered) {
    Reg r = register_waiter(g->pending_.raw(), w.id);  // [C1]
    if (r == Reg::kRegistered) w.registered = true;     // ours to remove at the end
  }
  PW_CHAOS();
  const std::uint64_t s = g->slot_.load(std::memory_order_acquire);  // [G5]
  const std::uint64_t c = g->pending_.raw().load(std::memory_order_acquire);
  if (s == 0 && (c & CompletionWord::kCountMask) == 0) return true;
  // Timed since this block_until began untimed: true until it returns, so
  // that wait_slow blocks again, timed. On a worker only the loop's top
  // ends run_until; a "look again" seen by a search round or the park's
  // recheck leads there, and a false at the top then would park the
  // worker untimed, with no completer to wake it (no id of ours in a
  // busy word; GroupSlot.AWorkerThatMustPollLearntMidLoopDoesNotSleepForGood).
  if (w.timed) return !w.block_timed;
  const std::uint64_t kIdMask = ~CompletionWord::kCountMask;
  if (s != 0 && (!w.owner || (s & kIdMask) != mine)) {
    if (!w.owner) w.timed = true;  // a non-owner cannot register in the slot
    return true;                        // the owner: the slot changed, register again
  }
  if ((c & CompletionWord::kCountMask) != 0 && (c & kIdMask) != mine) {
    if ((c & kIdMask) != 0)
      w.timed = true;        // another waiter's id: poll
    else
      w.registered = false;  // no id: the count rose from zero; register again
    return true;
  }
  return false;
}

// On a worker, the running task's group is this one: the caller is one
// of its tasks (or a coroutine that one of them spawned). Only the
// direct group: a group's parent_ may be gone once it has been waited
// for and reused, and a plain thread's current group can be left over
// from a coroutine an awaitable of the user's resumed there
// (coroutines.md, "Limits").
void TaskGroup::refuse_own_task() const {
  if (detail::tls_group == this && detail::Worker::current() != nullptr)
    throw std::logic_error(
        "parkway::TaskGroup::wait: called from inside one of the group's own tasks; it would wait for "
        "its caller and never return (wait for the group from the code that spawned into it)");
}

// Called by join() once the calling worker's own deque is empty (or on a
// thread outside any pool).
void TaskGroup::wait_slow() noexcept {
  using namespace detail;
  Worker* me = Worker::current();
  WaitState w{this, me ? me->park_id() : this_thread_park_id(), owner_ == this_thread_token()};
  // A slot task can spawn heap tasks into the group after the first check
  // (pending_ 0 -> 1): wait_check runs again at every recheck, so the
  // waiter registers before it sleeps (SPIN: slot.pml, FIX).
  for (;;) {
    PW_CHAOS();
    w.block_timed = w.timed;
    block_until(me, w.id, &wait_check, &w, w.block_timed);
    if (finished()) break;
  }
  // Both are done; nobody else touches pending_ until the next spawn. The
  // slot's registration went with the store or exchange that freed it.
  if (w.registered) pending_.raw().fetch_and(CompletionWord::kCountMask, std::memory_order_relaxed);
}

bool TaskGroup::mark_cancelled(std::exception_ptr* p) noexcept {
  std::exception_ptr* expected = nullptr;
  // Counted before the group is marked: g_cancel_live is non-zero
  // whenever a marked group is visible, so a task whose start
  // happens-after the mark reads both (coherence) and is skipped.
  detail::g_cancel_live.fetch_add(1, std::memory_order_relaxed);
  if (error_.compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
    detail::cancel_group_io(this);  // its coroutines' operations in flight, and its descendants'
    return true;
  }
  uncount();
  return false;
}

void TaskGroup::cancel() noexcept { mark_cancelled(&g_cancel_marker); }

bool detail::group_within(const TaskGroup* g, const TaskGroup* ancestor) noexcept {
  for (; g; g = g->parent_)
    if (g == ancestor) return true;
  return false;
}

bool TaskGroup::chain_cancelled() const noexcept {
  for (const TaskGroup* g = this; g; g = g->parent_)
    if (g->error_.load(std::memory_order_acquire) != nullptr) return true;
  return false;
}

bool TaskGroup::skip_start() noexcept {
  if (detail::drop_this_task()) {
    record_exception(detail::dropped_task_error());
    return true;
  }
  return chain_cancelled();
}

bool TaskGroup::skip_slot_start(void* slot_task) noexcept { return of_slot(slot_task)->skip_start(); }

// The first exception cancels the group (mark_cancelled); one that comes
// after cancel() replaces the marker, so wait() rethrows it; later ones
// are dropped (wait() rethrows the first only).
void TaskGroup::record_exception(std::exception_ptr e) noexcept {
  std::exception_ptr* cur = error_.load(std::memory_order_acquire);
  if (cur && cur != &g_cancel_marker) return;
  if (is_cancelled_error(e) && (cur || chain_cancelled())) return;
  std::exception_ptr* p = new (std::nothrow) std::exception_ptr(std::move(e));
  if (!p) p = &g_no_memory_marker;
  if (!cur && mark_cancelled(p)) return;
  std::exception_ptr* expected = &g_cancel_marker;  // cancelled meanwhile, or before
  if (!error_.compare_exchange_strong(expected, p, std::memory_order_acq_rel) && p != &g_no_memory_marker) delete p;
}

void TaskGroup::rethrow_exception() {
  std::exception_ptr* p = error_.exchange(nullptr, std::memory_order_acquire);
  if (!p) return;  // a concurrent wait() took it
  uncount();
  if (p == &g_cancel_marker) return;  // cancel(), and no task threw
  if (p == &g_no_memory_marker) throw std::bad_alloc();
  std::exception_ptr e = std::move(*p);
  delete p;
  std::rethrow_exception(e);
}

}  // namespace parkway
