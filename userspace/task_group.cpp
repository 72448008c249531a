// task_group.cpp -- TaskGroup's out-of-line parts.
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>

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
}  // namespace

void TaskGroup::report_lost_exception() noexcept {
  std::exception_ptr* p = error_.exchange(nullptr, std::memory_order_acquire);
  if (!p) return;
  if (p == &g_no_memory_marker) {
    std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task threw (no memory to keep it)\n");
    return;
  }
  try {
    std::rethrow_exception(*p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task's exception was lost: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task threw a non-std exception\n");
  }
  delete p;
}

// The fast path (a worker spawning into a group of its runtime) makes no
// call but a tail call, so it needs no stack frame.
void TaskGroup::schedule(detail::Task* t) {
  detail::Worker* w = detail::Worker::current();
  if (w) [[likely]] {
    Runtime* r = w->owner_runtime();
    if (rt_ == r || !rt_) [[likely]] {
      rt_ = r;
      w->spawn(t);
      return;
    }
  }
  schedule_outside(t);
}

void TaskGroup::schedule_outside(detail::Task* t) {
  if (!rt_) rt_ = &Runtime::default_runtime();
  rt_->impl().inject(t);
}

namespace detail {
Task* take_own_task() noexcept {
  Worker* w = Worker::current();
  return w ? w->take_own() : nullptr;
}
}  // namespace detail

// The inline task finished on a thread other than the owner: clear the
// slot and learn, from the same RMW, whether the owner sleeps on it.
void TaskGroup::slot_done_remote() noexcept {
  PW_CHAOS();
  std::uint64_t old = slot_.exchange(0, std::memory_order_acq_rel);  // [G3]
  if (old >> 32) detail::wake_waiter(std::uint32_t(old >> 32) - 1);  // [G4]
}

void TaskGroup::wait_slow() noexcept {
  detail::Worker* me = detail::Worker::current();
  if (me) {
    // Run our own newest tasks (usually the ones we wait for) without
    // registering anywhere; only an empty deque leads to wait_blocking().
    while (detail::Task* t = me->deque().pop()) {
      me->execute(t);
      if (finished()) return;
    }
  }
  wait_blocking(me);
}

void TaskGroup::wait_blocking(detail::Worker* me) noexcept {
  using namespace detail;
  const std::uint32_t id = me ? me->park_id() : this_thread_park_id();
  bool timed = false;
  // The slot: the owner registers (CAS, so a remote [G3] either sees the
  // registration or happened first and the recheck sees the free slot);
  // any other waiter polls, since the owner's [G3o] plain store would not
  // wake it.
  std::uint64_t v = slot_.load(std::memory_order_acquire);
  if (v != 0) {
    if (owner_ == this_thread_token()) {
      const std::uint64_t mine = (std::uint64_t(id) + 1) << 32;
      while (v != 0 && (v >> 32) == 0 &&
             !slot_.compare_exchange_weak(v, v | mine, std::memory_order_acq_rel, std::memory_order_acquire)) {  // [G6]
      }
    } else {
      timed = true;
    }
  }
  PW_CHAOS();
  Reg r = register_waiter(pending_.raw(), id);  // [C1]
  if (r == Reg::kOccupied) timed = true;
  block_until(me, id, &finished_fn, this, timed);
  // Both are done; nobody else touches pending_ until the next spawn. The
  // slot's registration went with the [G3] exchange that freed it.
  if (r == Reg::kRegistered) pending_.raw().fetch_and(CompletionWord::kCountMask, std::memory_order_relaxed);
}

bool TaskGroup::finished_fn(void* g) noexcept { return static_cast<TaskGroup*>(g)->finished(); }

void TaskGroup::record_exception(std::exception_ptr e) noexcept {
  if (error_.load(std::memory_order_relaxed)) return;  // wait() rethrows the first one only
  std::exception_ptr* p = new (std::nothrow) std::exception_ptr(std::move(e));
  if (!p) p = &g_no_memory_marker;
  std::exception_ptr* expected = nullptr;
  if (!error_.compare_exchange_strong(expected, p, std::memory_order_acq_rel) && p != &g_no_memory_marker) delete p;
}

void TaskGroup::rethrow_exception() {
  std::exception_ptr* p = error_.exchange(nullptr, std::memory_order_acquire);
  if (!p) return;  // a concurrent wait() took it
  if (p == &g_no_memory_marker) throw std::bad_alloc();
  std::exception_ptr e = std::move(*p);
  delete p;
  std::rethrow_exception(e);
}

}  // namespace parkway
