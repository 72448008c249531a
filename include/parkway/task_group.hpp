// parkway/task_group.hpp -- structured fork/join.
//
//   parkway::TaskGroup g;
//   g.spawn([&] { left(); });
//   right();
//   g.wait();   // runs other tasks while it waits; rethrows a task's exception
#pragma once

#include <atomic>
#include <cstddef>
#include <new>
#include <exception>
#include <type_traits>
#include <utility>

#include "parkway/task.hpp"

namespace parkway {

class Runtime;

class PARKWAY_API TaskGroup {
 public:
  // Binds, at the first spawn, to the runtime of the spawning worker, or,
  // on a thread outside any pool, to Runtime::default_runtime().
  TaskGroup() noexcept = default;
  explicit TaskGroup(Runtime& rt) noexcept : rt_(&rt) {}
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Waits for the tasks still running. An exception that no wait() observed
  // is reported on stderr (a destructor cannot rethrow it).
  ~TaskGroup() {
    pending_.wait();
    if (failed_.load(std::memory_order_acquire)) report_lost_exception();
  }

  // Runs f() on some worker. From a worker the task goes to that worker's
  // deque; from another thread to the runtime's injection queue (which
  // throws RuntimeShutdown once the runtime is shutting down).
  template <class F>
  void spawn(F&& f) {
    using Fn = std::decay_t<F>;
    using Inline = Body<Fn, true>;
    const bool first = pending_.add_one_was_zero();
    if constexpr (sizeof(Inline) <= kInlineBytes && alignof(Inline) <= kInlineAlign) {
      // A task that finds the count at zero lives inside the group itself:
      // every earlier task has finished (an inline one destroys itself
      // before its done()), so the slot is free, and only one spawner can
      // see that zero. No allocation for the spawn-one-then-wait shape.
      if (first) {
        Inline* t;
        try {
          t = ::new (static_cast<void*>(inline_)) Inline(static_cast<F&&>(f), this);
        } catch (...) {
          pending_.done();
          throw;
        }
        schedule_or_undo(t, [](Inline* x) { x->~Inline(); });
        return;
      }
    }
    (void)first;
    Body<Fn, false>* t;
    try {
      t = detail::new_task<Body<Fn, false>>(static_cast<F&&>(f), this);
    } catch (...) {
      pending_.done();
      throw;
    }
    schedule_or_undo(t, [](Body<Fn, false>* x) { detail::delete_task(x); });
  }

  // Returns once every spawned task has finished. Rethrows the first
  // exception a task threw (and forgets it, so the group can be reused).
  void wait() {
    pending_.wait();
    if (failed_.load(std::memory_order_acquire)) rethrow_exception();
  }

  // Number of spawned tasks not yet finished (a snapshot).
  std::uint32_t pending() const noexcept {
    return std::uint32_t(const_cast<detail::CompletionWord&>(pending_).raw().load(std::memory_order_acquire) &
                         detail::CompletionWord::kCountMask);
  }

 private:
  // A spawned task. InGroup: it lives in the group's inline slot (only
  // destroyed, never freed).
  template <class Fn, bool InGroup>
  struct Body final : detail::Task {
    Fn fn;
    TaskGroup* group;
    template <class G>
    Body(G&& g, TaskGroup* tg) : detail::Task{&run}, fn(static_cast<G&&>(g)), group(tg) {}
    static void run(detail::Task* t) noexcept {
      auto* self = static_cast<Body*>(t);
      TaskGroup* g = self->group;
      try {
        self->fn();
      } catch (...) {
        g->record_exception(std::current_exception());
      }
      if constexpr (InGroup) {
        self->~Body();
      } else {
        detail::delete_task(self);
      }
      g->pending_.done();  // last touch of *g (and of an inline task): the waiter may return now
    }
  };

  static constexpr std::size_t kInlineBytes = 64;
  static constexpr std::size_t kInlineAlign = 16;

  void schedule(detail::Task* t);
  // schedule(t); if that throws (RuntimeShutdown), undo the spawn: free t
  // with `destroy`, drop its count, rethrow.
  template <class T, class Destroy>
  void schedule_or_undo(T* t, Destroy destroy) {
    try {
      schedule(t);
    } catch (...) {
      destroy(t);
      pending_.done();
      throw;
    }
  }
  void record_exception(std::exception_ptr e) noexcept;
  [[noreturn]] void rethrow_exception();
  void report_lost_exception() noexcept;

  detail::CompletionWord pending_;
  Runtime* rt_ = nullptr;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  alignas(kInlineAlign) unsigned char inline_[kInlineBytes];
};

}  // namespace parkway
