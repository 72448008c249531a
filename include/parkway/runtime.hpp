// parkway/runtime.hpp -- a pool of workers that steal work and sleep when idle.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

#include "parkway/errors.hpp"
#include "parkway/future.hpp"
#include "parkway/options.hpp"
#include "parkway/stats.hpp"
#include "parkway/task.hpp"

namespace parkway {

namespace detail {
class RuntimeImpl;
PARKWAY_API void enqueue_on(Runtime& rt, Task* t);
// The calling worker's runtime, or Runtime::default_runtime() outside any
// pool; nullptr on a worker of a runtime that was destroyed while it ran a
// task (shutdown(deadline) left it running, or its own worker destroyed
// it): that worker's own pool takes the task (spawn, detach: coro.hpp's
// enqueue_on_calling_pool; parallel_for), as it does a TaskGroup's.
PARKWAY_API Runtime* runtime_for_spawn();

// What a task made of F returns. A callable that cannot be called with no
// arguments gives void here rather than no type, so that submit() and
// run() are still chosen and their static_assert names the problem.
template <class F>
struct TaskResult {
  using type = void;
};
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&>
struct TaskResult<F> {
  using type = std::invoke_result_t<std::decay_t<F>&>;
};
template <class F>
using task_result_t = typename TaskResult<F>::type;
}

// What Runtime::shutdown(deadline) left behind when it returned.
struct ShutdownReport {
  // Tasks dropped unstarted after a deadline (waiters told), by every
  // bounded call so far: a second call while tasks still run counts the
  // first one's again (unlike `unobserved`, which is the call's own).
  std::uint64_t dropped = 0;
  unsigned running = 0;       // workers still inside a task (a snapshot; 0: all joined)
  // RuntimeShutdown exceptions that nobody will rethrow (a detached
  // coroutine stopped at a co_await or dropped unstarted, a dropped
  // Future or Spawned handle) that ended on this runtime's threads while
  // the call was under way: counted here instead of a stderr line each.
  // One that ends after the call returned is printed, as any other.
  std::uint64_t unobserved = 0;
};

class PARKWAY_API Runtime {
 public:
  // Starts opts.workers threads. Throws std::invalid_argument naming the
  // option when an option is out of range, std::system_error if a worker
  // thread cannot be created (its what() names the thread and how many had
  // started; those are stopped and joined first).
  explicit Runtime(Options opts = Options{});

  // shutdown(): finishes every accepted task, then joins the workers
  // (unless shutdown(deadline) returned with workers still running: then
  // it detaches them, see there). A shutdown(deadline) another thread
  // calls meanwhile keeps its deadline; the destructor returns after it.
  // On one of its own workers (a task dropped the last owner, or called
  // exit() while this runtime is a static) it cannot wait for itself: it
  // refuses new work and returns at once, and the workers finish every
  // accepted task and then end (in exit(), the process ends with them).
  // Their memory stays allocated; Runtime::current() is nullptr and
  // current_worker_index() -1 there from then on. A TaskGroup bound to it
  // keeps working on those workers; a spawn into one from anywhere else
  // throws RuntimeShutdown.
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs f on a worker; the returned Future yields its result or rethrows
  // its exception. Callable from any thread. Throws RuntimeShutdown once
  // shutdown has begun (from outside the pool; tasks already running may
  // still submit, and what they submit runs before the workers exit).
  template <class F>
  auto submit(F&& f) -> Future<detail::task_result_t<F>> {
    static_assert(std::is_invocable_v<std::decay_t<F>&>,
                  "parkway::Runtime::submit: the callable must take no arguments");
    using R = detail::task_result_t<F>;
    static_assert(!std::is_reference_v<R>,
                  "parkway::Runtime::submit: the task returns a reference; return a value, a pointer or a "
                  "std::reference_wrapper");
    static_assert(std::is_constructible_v<std::decay_t<F>, F&&>,
                  "parkway::Runtime::submit: the task keeps its own copy of the callable, and this one cannot "
                  "be copied; pass it with std::move");
    auto* st = new detail::SharedState<R>();
    detail::Task* t;
    try {
      t = detail::new_task<Submitted<std::decay_t<F>, R>>(static_cast<F&&>(f), st);
    } catch (...) {
      delete st;
      throw;
    }
    try {
      enqueue(t);
    } catch (...) {
      detail::delete_task(static_cast<Submitted<std::decay_t<F>, R>*>(t));
      delete st;
      throw;
    }
    return Future<R>(st);
  }

  // Runs f on a worker and blocks the caller until it is done; returns its
  // result or rethrows its exception. Called on one of this runtime's
  // workers, runs f inline. Either way f is first copied or moved into a
  // callable of its own (as submit does), so the caller's object is used
  // the same way from any thread.
  template <class F>
  auto run(F&& f) -> detail::task_result_t<F> {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "parkway::Runtime::run: the callable must take no arguments");
    static_assert(std::is_constructible_v<std::decay_t<F>, F&&>,
                  "parkway::Runtime::run: the task keeps its own copy of the callable, and this one cannot be "
                  "copied; pass it with std::move");
    if (current() == this) {
      std::decay_t<F> own(static_cast<F&&>(f));
      return std::invoke(own);
    }
    return submit(static_cast<F&&>(f)).get();
  }

  // Stop accepting work from outside the pool, run everything accepted,
  // join the workers. Idempotent. From one of its own workers it throws
  // std::logic_error (it would wait for itself).
  void shutdown();

  // Bounded shutdown: as shutdown() until `deadline`; if work is still
  // left then, every task not yet started (queued anywhere, or spawned
  // later by tasks still running) is dropped: it never runs, and its
  // waiter gets RuntimeShutdown (Future::get, TaskGroup::wait, Spawned,
  // sync_wait), never silence. Running tasks are not interrupted: they see
  // parkway::cancelled() turn true, and a coroutine throws RuntimeShutdown
  // at its next co_await. Returns how many tasks were dropped and how many
  // workers were still inside a task; with running > 0 the destructor no
  // longer waits for them (the workers leave when their tasks return; the
  // runtime's memory stays allocated for them). A deadline in the past
  // drops everything queued at once. Must not be called from a worker of
  // this runtime (std::logic_error); after a completed shutdown it returns
  // {0, 0}.
  ShutdownReport shutdown(std::chrono::steady_clock::time_point deadline);

  // Counters, per worker and in total (relaxed snapshots).
  Stats stats() const;

  // Whether the sched_ext co-scheduler knows the workers, and why not.
  SchedExtStatus sched_ext_status() const noexcept;

  unsigned workers() const noexcept;
  const Options& options() const noexcept;

  // The runtime the calling worker thread belongs to, or nullptr.
  static Runtime* current() noexcept;
  // Index of the calling worker in its runtime, or -1 outside any pool.
  static int current_worker_index() noexcept;

  // A process-wide runtime with default options, created on first use and
  // shut down at exit (from an atexit handler registered at its creation:
  // the work it accepted finishes; afterwards, e.g. from the destructor of
  // a static made before its first use, submitting to it throws
  // RuntimeShutdown). Never destroyed. Used by TaskGroup/parallel_for
  // outside any pool. In a child process made by fork() it is a new
  // runtime, made on first use there (the parent's has no workers in the
  // child).
  static Runtime& default_runtime();

  detail::RuntimeImpl& impl() noexcept { return *impl_; }

 private:
  template <class Fn, class R>
  struct Submitted final : detail::Task {
    Fn fn;
    detail::SharedState<R>* st;
    template <class G>
    Submitted(G&& g, detail::SharedState<R>* s) : detail::Task{&run}, fn(static_cast<G&&>(g)), st(s) {}
    static bool run(detail::Task* t) noexcept {
      auto* self = static_cast<Submitted*>(t);
      detail::SharedState<R>* s = self->st;
      if (detail::cancellation_active() && detail::drop_this_task()) [[unlikely]] {
        s->error = detail::dropped_task_error();  // past Runtime::shutdown's deadline
      } else {
        detail::GroupScope in(nullptr);  // a submitted task belongs to no group
        try {
          if constexpr (std::is_void_v<R>) {
            self->fn();
          } else {
            ::new (static_cast<void*>(s->storage)) R(self->fn());
            s->has_value = true;
          }
        } catch (...) {
          s->error = std::current_exception();
        }
      }
      detail::delete_task(self);
      s->done.done();
      s->release();
      return true;
    }
  };

  // Pushes a task: to the calling worker's deque if it is one of ours,
  // otherwise to the injection queue (throws RuntimeShutdown when closed).
  void enqueue(detail::Task* t);
  friend void detail::enqueue_on(Runtime& rt, detail::Task* t);

  detail::RuntimeImpl* impl_;
};

}  // namespace parkway
