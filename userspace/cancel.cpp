// cancel.cpp -- the process-wide cancellation word and the questions a
// starting task asks once it is non-zero (docs/design/cancellation.md).
#include <atomic>
#include <utility>

#include "parkway/errors.hpp"
#include "parkway/task.hpp"
#include "parkway/task_group.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"

namespace parkway::detail {

std::atomic<std::uint32_t> g_cancel_live{0};

namespace {
// The runtime whose tasks run on this thread: the one a
// Runtime::shutdown(deadline) drains on this thread (set_draining), else
// a worker's. The drain comes first: called from a task on another
// runtime's worker, the drained tasks are the draining runtime's, and
// asking the worker's runtime would run them instead of dropping them.
thread_local RuntimeImpl* tls_draining = nullptr;
// On a worker (of another runtime) that drains: its count of executed
// tasks as the drain invoked the task it runs now (drain_invoking). A
// higher count means the code running is a task the worker started
// inside that one (a helping wait of a joiner the dropped task resumed,
// say): a task of the worker's own runtime, not one the drain took.
thread_local std::uint64_t tls_drain_mark = 0;

std::uint64_t executed_here() noexcept {
  Worker* w = Worker::current();
  return w ? w->counters().executed.load(std::memory_order_relaxed) : 0;
}

}  // namespace

RuntimeImpl* runtime_here() noexcept {
  if (RuntimeImpl* d = draining_here()) return d;
  Worker* w = Worker::current();
  return w ? &w->runtime() : nullptr;
}

RuntimeImpl* draining_here() noexcept {
  RuntimeImpl* d = tls_draining;
  if (d && executed_here() != tls_drain_mark) return nullptr;
  return d;
}

DrainState set_draining(RuntimeImpl* rt) noexcept {
  DrainState prev{tls_draining, tls_drain_mark};
  tls_draining = rt;
  tls_drain_mark = executed_here();
  return prev;
}
void restore_draining(DrainState prev) noexcept {
  tls_draining = prev.rt;
  tls_drain_mark = prev.mark;
}
void drain_invoking() noexcept { tls_drain_mark = executed_here(); }

// A drain runs only past its runtime's deadline, and drops everything it
// takes, whatever `dropping` says by then: another shutdown call that
// joined the workers meanwhile ends the drop state, while the drain may
// still hold a task it took (in hand) that no worker will see.
bool runtime_dropping_here() noexcept {
  if (draining_here()) return true;
  RuntimeImpl* rt = runtime_here();
  return rt && rt->dropping.load(std::memory_order_acquire);
}

bool stop_requested(const TaskGroup* g) noexcept {
  return runtime_dropping_here() || (g && g->is_cancelled());
}

bool drop_this_task() noexcept {
  RuntimeImpl* rt = runtime_here();
  if (!rt || (rt != draining_here() && !rt->dropping.load(std::memory_order_acquire))) return false;
  rt->dropped.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The drain only: a worker resumes an I/O continuation it runs after the
// deadline (the coroutine stops at its next co_await, on the pool).
bool drop_resumption_here() noexcept {
  RuntimeImpl* rt = draining_here();
  if (!rt) return false;
  rt->dropped.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::exception_ptr dropped_task_error() noexcept {
  try {
    throw RuntimeShutdown(
        "parkway: the task was dropped unstarted: Runtime::shutdown(deadline) passed its deadline before it ran");
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr refuse_start(const TaskGroup* g) noexcept {
  if (drop_this_task()) return dropped_task_error();
  if (g && g->is_cancelled()) {
    try {
      throw Cancelled("parkway: the coroutine's task group was cancelled before it started");
    } catch (...) {
      return std::current_exception();
    }
  }
  return nullptr;
}

void throw_if_stopped(const TaskGroup* g) {
  if (runtime_dropping_here())
    throw RuntimeShutdown(
        "parkway: Runtime::shutdown(deadline) passed its deadline; the coroutine stopped at a co_await");
  if (g && g->is_cancelled())
    throw Cancelled("parkway: the coroutine's task group was cancelled; it stopped at a co_await");
}

}  // namespace parkway::detail
