// parkway/future.hpp -- the handle Runtime::submit returns.
#pragma once

#include <atomic>
#include <exception>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "parkway/task.hpp"

namespace parkway {
namespace detail {

// Prints, on stderr, the exception of a task whose result nobody took
// (its Future, or a coroutine's Spawned handle, was dropped or never
// asked for it): the failure is reported, not silently lost.
PARKWAY_API void report_unobserved_exception(const std::exception_ptr& e, const char* what) noexcept;

// Shared between the submitted task and its Future; freed by whichever of
// the two lets go last. An exception no get() took is reported then.
template <class T>
struct SharedState {
  CompletionWord done;  // count 1 until the task has finished
  std::atomic<int> refs{2};
  std::exception_ptr error;
  alignas(T) unsigned char storage[sizeof(T)];
  bool has_value = false;
  bool taken = false;  // get() was called (it rethrows error, or returns the value)

  SharedState() { done.add(1); }
  ~SharedState() {
    if (has_value) std::launder(reinterpret_cast<T*>(storage))->~T();
  }
  T& value() { return *std::launder(reinterpret_cast<T*>(storage)); }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (error && !taken) report_unobserved_exception(error, "a submitted task threw, and its Future was dropped without get()");
      delete this;
    }
  }
};

template <>
struct SharedState<void> {
  CompletionWord done;
  std::atomic<int> refs{2};
  std::exception_ptr error;
  bool taken = false;
  SharedState() { done.add(1); }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (error && !taken) report_unobserved_exception(error, "a submitted task threw, and its Future was dropped without get()");
      delete this;
    }
  }
};

}  // namespace detail

// Future<T>: get() waits and returns the result or rethrows the task's
// exception; wait() only waits. Dropping a Future never blocks: the task
// still runs. get() may be called once (it moves the value out).
template <class T>
class Future {
 public:
  Future() = default;
  explicit Future(detail::SharedState<T>* s) noexcept : st_(s) {}
  Future(Future&& o) noexcept : st_(std::exchange(o.st_, nullptr)) {}
  Future& operator=(Future&& o) noexcept {
    if (this != &o) {
      reset();
      st_ = std::exchange(o.st_, nullptr);
    }
    return *this;
  }
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  ~Future() { reset(); }

  bool valid() const noexcept { return st_ != nullptr; }
  bool ready() const {
    check();
    return st_->done.is_zero();
  }
  void wait() const {
    check();
    st_->done.wait();
  }
  T get() {
    static_assert(std::is_void_v<T> || std::is_move_constructible_v<T>,
                  "parkway::Future::get (also Runtime::run): the task's result type cannot be moved, and get "
                  "returns it by value; return a std::unique_ptr to it instead");
    wait();
    detail::SharedState<T>* s = std::exchange(st_, nullptr);
    struct Releaser {
      detail::SharedState<T>* s;
      ~Releaser() { s->release(); }
    } r{s};
    s->taken = true;
    // Move the exception out: otherwise the worker, dropping the state
    // last, may free the exception object after the caller has used it,
    // which ThreadSanitizer cannot see ordered (libsupc++'s count is not
    // instrumented) and reports as a race.
    if (s->error) std::rethrow_exception(std::exchange(s->error, nullptr));
    if constexpr (!std::is_void_v<T>) return std::move(s->value());
  }

 private:
  void check() const {
    if (!st_) throw std::logic_error("parkway::Future: no state (default-constructed, moved from, or get() already called)");
  }
  void reset() noexcept {
    if (st_) std::exchange(st_, nullptr)->release();
  }
  detail::SharedState<T>* st_ = nullptr;
};

}  // namespace parkway
