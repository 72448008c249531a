// task_group.cpp -- TaskGroup's out-of-line parts.
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "parkway/runtime.hpp"
#include "parkway/task_group.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"

namespace parkway {

void TaskGroup::report_lost_exception() noexcept {
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task's exception was lost: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "parkway: TaskGroup destroyed without wait(); a task threw a non-std exception\n");
    }
  }
}

void TaskGroup::schedule(detail::Task* t) {
  detail::Worker* w = detail::Worker::current();
  if (w && (&w->runtime().owner == rt_ || !rt_)) {
    rt_ = &w->runtime().owner;
    w->spawn(t);
    return;
  }
  if (!rt_) rt_ = &Runtime::default_runtime();
  rt_->impl().inject(t);
}

void TaskGroup::record_exception(std::exception_ptr e) noexcept {
  bool expected = false;
  if (failed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error_ = std::move(e);
  // Later exceptions of the same wait are dropped: wait() rethrows one.
}

void TaskGroup::rethrow_exception() {
  std::exception_ptr e = std::move(error_);
  error_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);
  std::rethrow_exception(e);
}

}  // namespace parkway
