// parkway/task_group.hpp -- structured fork/join, with cancellation.
//
//   parkway::TaskGroup g;
//   g.spawn([&] { left(); });
//   right();
//   g.wait();   // runs other tasks while it waits; rethrows a task's exception
//
// A group is cancelled by cancel() or by the first exception one of its
// tasks throws: its tasks that have not started are skipped, running ones
// see parkway::cancelled() turn true, and groups made inside its tasks
// (its children, at any depth) are cancelled with it. wait() clears it
// (docs/design/cancellation.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <new>
#include <exception>
#include <type_traits>
#include <utility>

#include "parkway/task.hpp"

// For tests/slot_forced_g1f.cpp only: a test defines it, before including
// any parkway header, to take the [G1f] branch where no compiler here
// would (slot.md, "The first spawn"). Programs leave it undefined.
#ifndef PARKWAY_TEST_FORCE_G1F
#define PARKWAY_TEST_FORCE_G1F(group) false
#endif

namespace parkway {

class Runtime;
namespace detail {
class RuntimeImpl;
// Library-internal (userspace/): whether g is `ancestor` or was made under
// it; cancel the I/O in flight of the coroutines of g and its descendants.
bool group_within(const TaskGroup* g, const TaskGroup* ancestor) noexcept;
void cancel_group_io(const TaskGroup* g) noexcept;
}  // namespace detail
class PARKWAY_API TaskGroup {
 public:
  // Binds, at the first spawn, to the runtime of the spawning worker, or,
  // on a thread outside any pool, to Runtime::default_runtime(). The
  // binding lasts as long as the group: a group must not be used after the
  // runtime it is bound to was destroyed. The binding is a plain store, not
  // a compare-and-swap (it is on the spawn's fast path): first spawns made
  // at the same time from threads of two runtimes may each run their task
  // on their own runtime. A group that may first be spawned into that way
  // names its runtime, TaskGroup(rt).
  //
  // A group made while a task of group P runs on this thread (or a
  // coroutine started under P) is P's child: cancelling P cancels it. It
  // must then finish (wait() or destruction) before that task of P
  // returns, as a group made on a task's stack does.
  TaskGroup() noexcept : owner_(detail::this_thread_token()), parent_(detail::tls_group) { mark_slot_unused(); }
  explicit TaskGroup(Runtime& rt) noexcept;
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Waits for the tasks still running. An exception that no wait() observed
  // is reported on stderr (a destructor cannot rethrow it).
  ~TaskGroup() {
    // Both checks in one branch: every task finished and no exception left.
    std::uint64_t s = slot_.load(std::memory_order_acquire);
    std::uint64_t c = pending_.raw().load(std::memory_order_acquire);
    auto e = reinterpret_cast<std::uintptr_t>(error_.load(std::memory_order_acquire));
    if (__builtin_expect((((s | c) & detail::CompletionWord::kCountMask) | e) != 0, 0)) destroy_slow();
  }

  // Runs f() on some worker. From a worker of the runtime the group is
  // bound to, the task goes to that worker's deque; from any other thread
  // (a worker of another runtime included) to the bound runtime's
  // injection queue, which throws RuntimeShutdown once that runtime is
  // shutting down.
  template <class F>
  void spawn(F&& f) {
    using Fn = std::decay_t<F>;
    static_assert(std::is_constructible_v<Fn, F&&>,
                  "parkway::TaskGroup::spawn: the task keeps its own copy of the callable, and this one "
                  "cannot be copied; pass it with std::move");
    static_assert(std::is_invocable_v<Fn&>, "parkway::TaskGroup::spawn: the callable must take no arguments");
    using Inline = Body<Fn, true>;
    if constexpr (sizeof(Inline) <= kInlineBytes && alignof(Inline) <= kInlineAlign) {
      // The inline slot: only the thread that created the group uses it,
      // and only when every task of the group has finished, so never from
      // inside one of them (slot.md has the protocol). No allocation and
      // no read-modify-write for the spawn-one-then-wait shape.
      if (__builtin_expect(owner_ == detail::this_thread_token() &&
          (slot_known_unused() ||  // [G1f] the constructing flow, before any slot spawn
           PARKWAY_TEST_FORCE_G1F(this) ||  // a test's stand-in for a compiler folding further
           (slot_.load(std::memory_order_acquire) == 0 &&
            pending_.is_zero())), 1)) {  // [G1] the whole group idle: not from inside one of its tasks
        Inline* t = ::new (static_cast<void*>(inline_)) Inline(static_cast<F&&>(f));
        slot_.store(kSlotBusy, std::memory_order_relaxed);  // [G2] published by the push's release
        schedule_or_undo(t, [this](Inline* x) {
          x->~Inline();
          slot_.store(0, std::memory_order_release);
        });
        return;
      }
    }
    pending_.add(1);
    Body<Fn, false>* t;
    try {
      t = detail::new_task<Body<Fn, false>>(static_cast<F&&>(f), this);
    } catch (...) {
      pending_.done();
      throw;
    }
    schedule_or_undo(t, [this](Body<Fn, false>* x) {
      detail::delete_task(x);
      pending_.done();
    });
  }

  // Returns once every spawned task that started has finished (those a
  // cancellation skipped never start). Rethrows the first exception a task
  // threw (to one waiter: of threads that wait at once, the others return
  // normally); returns normally after cancel() if no task threw. Either way the
  // group is no longer cancelled afterwards, and can be reused. Not from
  // inside one of the group's own tasks: the caller counts among the
  // tasks it waits for, so the wait would never end. Called from one
  // (or from a coroutine one of them spawned), it throws
  // std::logic_error once it would have to block; from deeper down (a
  // task of a group made inside one) it is not detected and never
  // returns. The destructor waits the same way.
  void wait() {
    join_impl<true>();
    if (__builtin_expect(error_.load(std::memory_order_acquire) != nullptr, 0)) rethrow_exception();
  }

  // Cancels the group: its tasks that have not started are skipped (freed,
  // their count released, never run), running ones see
  // parkway::cancelled() turn true, and so do the groups made inside its
  // tasks, at any depth. Any thread, any number of times; wait() still
  // waits for the tasks that started. The first exception a task throws
  // cancels the group the same way.
  void cancel() noexcept;

  // True while the group, or a group it was made under, is cancelled.
  bool is_cancelled() const noexcept { return detail::cancellation_active() && chain_cancelled(); }

  // Number of spawned tasks not yet finished (a snapshot).
  std::uint32_t pending() const noexcept {
    return std::uint32_t(const_cast<detail::CompletionWord&>(pending_).raw().load(std::memory_order_acquire) &
                         detail::CompletionWord::kCountMask) +
           std::uint32_t((slot_.load(std::memory_order_acquire) & kSlotBusy) != 0);
  }

 private:
  // A spawned task. InGroup: it lives in the group's inline slot (only
  // destroyed, never freed) and finds its group from its own address.
  template <class Fn, bool InGroup>
  struct Body;
  template <class Fn>
  struct Body<Fn, false> final : detail::Task {
    Fn fn;
    TaskGroup* group;
    template <class G>
    Body(G&& g, TaskGroup* tg) : detail::Task{&run}, fn(static_cast<G&&>(g)), group(tg) {}
    static bool run(detail::Task* t) noexcept {
      auto* self = static_cast<Body*>(t);
      TaskGroup* g = self->group;
      if (!detail::cancellation_active() || !g->skip_start()) [[likely]] {
        detail::GroupScope in(g);
        try {
          self->fn();
        } catch (...) {
          g->record_exception(std::current_exception());
        }
      }
      detail::delete_task(self);
      g->pending_.done();  // last touch of *g: the waiter may return now
      return true;
    }
  };
  template <class Fn>
  struct Body<Fn, true> final : detail::Task {
    Fn fn;
    template <class G>
    explicit Body(G&& g) : detail::Task{&run}, fn(static_cast<G&&>(g)) {}
    static bool run(detail::Task* t) noexcept {
      auto* self = static_cast<Body*>(t);
      if (!detail::cancellation_active() || !skip_slot_start(self)) [[likely]] {
        detail::GroupScope in(of_slot(self));
        try {
          self->fn();
        } catch (...) {
          asm("" : "+r"(self));  // as below
          of_slot(self)->record_exception(std::current_exception());
        }
      }
      // The group's address is recomputed here, not kept across the
      // call: one callee-saved register fewer on the spawn path.
      asm("" : "+r"(self));
      TaskGroup* g = of_slot(self);
      self->~Body();
      g->slot_done();  // last touch of *g: the waiter may return now
      return true;
    }
  };
  // The group whose inline slot holds `slot_task`.
  static TaskGroup* of_slot(void* slot_task) noexcept {
    static_assert(std::is_standard_layout_v<TaskGroup>, "offsetof(TaskGroup, inline_) needs a standard-layout class");
    return reinterpret_cast<TaskGroup*>(static_cast<unsigned char*>(slot_task) - offsetof(TaskGroup, inline_));
  }

  static constexpr std::size_t kInlineBytes = 64;
  static constexpr std::size_t kInlineAlign = 16;

  // The inline slot's word: 0 free, else kSlotBusy | (waiter's ParkWord id
  // + 1) << 32. Only the owner thread sets it busy and only the owner
  // registers as its waiter (docs/design/slot.md).
  static constexpr std::uint64_t kSlotBusy = 1;

  // [G1f]: true only where the compiler proves that the slot's first
  // word (a slot task's `invoke`) still holds the zero the constructor
  // wrote, i.e. this code runs in the flow that constructed the group,
  // with no call the group escaped to and no coroutine suspension since:
  // no slot spawn happened (each writes that word) and no task of the
  // group can be running this code. With the owner check beside it, that
  // is what [G1] establishes (slot.md, "The first spawn"); it costs
  // nothing at run time (optimized, the word is never read: a slot spawn
  // writes it anyway, and the constructor's zero is one store). Elsewhere
  // it is false and [G1] runs.
  void mark_slot_unused() noexcept {
    std::uintptr_t zero = 0;
    __builtin_memcpy(inline_, &zero, sizeof zero);
  }
  bool slot_known_unused() const noexcept {
#if defined(__GNUC__)
    std::uintptr_t first;
    __builtin_memcpy(&first, inline_, sizeof first);
    return __builtin_constant_p(first) && first == 0;
#else
    return false;
#endif
  }

  bool finished() const noexcept {  // [G5] both loads acquire, slot first
    std::uint64_t s = slot_.load(std::memory_order_acquire);
    std::uint64_t c = const_cast<detail::CompletionWord&>(pending_).raw().load(std::memory_order_acquire);
    // One branch, and one test of the low halves: slot_'s low half is zero
    // only when the whole word is (a waiter id is set only while busy).
    return ((s | c) & detail::CompletionWord::kCountMask) == 0;
  }
  // The inline task has finished. On the owner thread a plain store: no
  // other thread can have registered, and the owner is here, not asleep.
  void slot_done() noexcept {
    if (owner_ == detail::this_thread_token()) [[likely]]
      slot_.store(0, std::memory_order_release);  // [G3o]
    else
      slot_done_remote();
  }
  void slot_done_remote() noexcept;  // [G3], [G4]
  // Waits for every task: first runs the calling worker's own newest
  // tasks (usually the ones waited for), then wait_slow() blocks/helps.
  //
  // The __builtin_expect hints here, in spawn() and in the destructor lay
  // the spawn-one-then-wait shape out as straight-line code: no taken
  // branch between the spawn and the return but the calls themselves
  // (g++ 12 ignores [[likely]] on these conditions). finished() tests its
  // two words with one branch for the same reason (docs/design/slot.md).
  void join() noexcept { join_impl<false>(); }
  // kRefuseOwnTask: before it blocks, throw if the caller is one of the
  // group's own tasks (refuse_own_task); only there, off the fast path.
  template <bool kRefuseOwnTask>
  void join_impl() noexcept(!kRefuseOwnTask) {
    if (__builtin_expect(finished(), 0)) return;
    do {
      if (__builtin_expect(!detail::run_own_task(), 0)) {
        if constexpr (kRefuseOwnTask) refuse_own_task();
        wait_slow();
        return;
      }
    } while (__builtin_expect(!finished(), 0));
  }
  void refuse_own_task() const;
  struct WaitState;
  static bool wait_check(void* w) noexcept;
  void wait_slow() noexcept;

  void schedule(detail::Task* t);
  [[gnu::noinline]] void schedule_outside(detail::Task* t);
  // schedule(t); if that throws (RuntimeShutdown), undo the spawn with
  // `undo` (free t, drop its count) and rethrow.
  template <class T, class Undo>
  void schedule_or_undo(T* t, Undo undo) {
    try {
      schedule(t);
    } catch (...) {
      undo(t);
      throw;
    }
  }
  // ~TaskGroup with a task still running or an exception left: join, then
  // report the exception no wait() rethrew.
  void destroy_slow() noexcept;
  // Only while detail::cancellation_active(), as a task of the group is
  // about to start: true if it must not run (the group or an ancestor is
  // cancelled; or its runtime passed its shutdown deadline, and then the
  // group records RuntimeShutdown for wait() to throw).
  bool skip_start() noexcept;
  static bool skip_slot_start(void* slot_task) noexcept;  // skip_start() of the slot's group
  friend bool detail::group_within(const TaskGroup* g, const TaskGroup* ancestor) noexcept;
  bool chain_cancelled() const noexcept;
  // Sets error_ from null to `p`, counting the group in g_cancel_live;
  // false if error_ was not null.
  bool mark_cancelled(std::exception_ptr* p) noexcept;
  void record_exception(std::exception_ptr e) noexcept;
  void rethrow_exception();  // returns only if another waiter took it first
  void report_lost_exception() noexcept;

  detail::CompletionWord pending_;  // heap tasks not yet finished
  std::atomic<std::uint64_t> slot_{0};
  // The runtime it is bound to (at the first spawn; relaxed), by its
  // implementation: that outlives a Runtime destroyed on one of its own
  // workers while they finish its work, so the address cannot be reused
  // by another runtime meanwhile.
  std::atomic<detail::RuntimeImpl*> rt_{nullptr};
  // The first exception a task threw since the last wait() (heap-held, so
  // that the no-exception path is one load of one word), or a marker for
  // cancel() without one. Non-null: the group is cancelled, and counted
  // in detail::g_cancel_live (the null <-> non-null transitions count).
  std::atomic<std::exception_ptr*> error_{nullptr};
  // The four words above start zero (two 16-byte stores); then:
  const void* owner_;
  // The group of the task that ran on this thread when this one was made
  // (nullptr: none); read only while cancellations are live.
  TaskGroup* const parent_;
  // The inline slot. Its first word starts zero (mark_slot_unused); a
  // slot spawn constructs its task here, only the owner thread.
  alignas(kInlineAlign) unsigned char inline_[kInlineBytes];
};

// True when the task or coroutine running on this thread should stop
// early: its group, or a group that group was made under, is cancelled, or
// its runtime passed the deadline of Runtime::shutdown(deadline). Poll it
// in long loops; one load while nothing in the process is cancelled.
inline bool cancelled() noexcept { return detail::cancellation_active() && detail::stop_requested(detail::tls_group); }

}  // namespace parkway
