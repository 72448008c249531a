// parkway/task.hpp -- the unit of work and the completion counter that
// TaskGroup and Future share. Users do not name these types; they are public
// only because the spawning templates are inline.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>

#include "parkway/export.hpp"

namespace parkway {

class Runtime;
class TaskGroup;

namespace detail {

// A type-erased task: `invoke` runs the body, frees the task and returns
// true (always: so a caller that answers "ran one, or found none" can
// end in a tail call to it, run_own_task). `next` links tasks in the
// injection queue, which sets it on every push (so a spawn does not pay a
// store for it). Deques hold Task*.
struct Task {
  Task() noexcept = default;
  explicit Task(bool (*f)(Task*) noexcept) noexcept : invoke(f) {}
  bool (*invoke)(Task*) noexcept;
  Task* next;
};

// Task memory: a per-thread cache of fixed-size blocks in front of malloc.
PARKWAY_API void* allocate_task(std::size_t bytes);
PARKWAY_API void free_task(void* p, std::size_t bytes) noexcept;

// Memory for a task of type T: from the per-thread cache, or, for types
// that need more alignment than malloc gives (a closure that captures an
// alignas(64) value, say), from the aligned operator new.
template <class T>
void* task_memory() {
  if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
    return ::operator new(sizeof(T), std::align_val_t(alignof(T)));
  else
    return allocate_task(sizeof(T));
}
template <class T>
void free_task_memory(void* p) noexcept {
  // Unsized: the sized aligned form is declared only with sized
  // deallocation on, which clang before 19 leaves off by default.
  if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
    ::operator delete(p, std::align_val_t(alignof(T)));
  else
    free_task(p, sizeof(T));
}

template <class T, class... A>
T* new_task(A&&... a) {
  void* mem = task_memory<T>();
  try {
    return ::new (mem) T(static_cast<A&&>(a)...);
  } catch (...) {
    free_task_memory<T>(mem);
    throw;
  }
}
template <class T>
void delete_task(T* t) noexcept {
  t->~T();
  free_task_memory<T>(t);
}

// A value unique to the calling thread among live threads (TaskGroup uses
// it to recognise the thread that created it). On x86-64 Linux the thread
// pointer (%fs:0 holds its own address); `volatile` because a coroutine can
// move between threads inside one function. Elsewhere the address of a
// thread_local at namespace scope, exported like tls_group below: a static
// local of this inline function would be hidden in libparkway.so, and the
// library and the program would each have their own, so a TaskGroup made
// on one side would not recognise its owner on the other.
#if !(defined(__x86_64__) && defined(__linux__))
PARKWAY_API inline thread_local constinit char tls_thread_marker = 0;
#endif
inline const void* this_thread_token() noexcept {
#if defined(__x86_64__) && defined(__linux__)
  const void* p;
  asm volatile("mov %%fs:0, %0" : "=r"(p));
  return p;
#else
  return &tls_thread_marker;
#endif
}

// On a worker: pops the newest task of its own deque, runs it (counted as
// executed) and returns true; the task returns straight to the caller.
// Elsewhere, or when the deque is empty: false.
PARKWAY_API bool run_own_task() noexcept;

// How many fork()s lie between the original process and this one (0 there;
// docs/design/fork.md).
PARKWAY_API unsigned current_fork_generation() noexcept;

// ---- cancellation (docs/design/cancellation.md) --------------------------
//
// Non-zero while some group in the process is cancelled (by cancel() or
// its first exception) or some runtime drops unstarted tasks after its
// shutdown deadline. Only then does a starting task, cancelled() or a
// co_await look further (stop_requested): one load of a read-mostly word
// is all the common case pays.
PARKWAY_API extern std::atomic<std::uint32_t> g_cancel_live;
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PARKWAY_TSAN_HEADER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define PARKWAY_TSAN_HEADER 1
#endif
inline bool cancellation_active() noexcept {
#if defined(__x86_64__) && !defined(PARKWAY_TSAN_HEADER)
  // A relaxed load, compared in memory: one instruction and the branch
  // (the portable form below loads, then tests). volatile: a polling loop
  // must read the word every time.
  bool live;
  asm volatile("cmpl $0, %1" : "=@ccne"(live) : "m"(g_cancel_live));
  return __builtin_expect(live, 0);
#else
  return __builtin_expect(g_cancel_live.load(std::memory_order_relaxed) != 0, 0);
#endif
}

// The group whose task (or coroutine) runs on this thread now; nullptr in
// a worker's loop, a submitted task, or a thread outside any pool. A
// group made here becomes its child. Exported (not hidden) so that the
// library and the program share one variable.
PARKWAY_API inline thread_local constinit TaskGroup* tls_group = nullptr;

// Sets tls_group for one task's run and puts the previous value back.
struct GroupScope {
  TaskGroup* prev;
  explicit GroupScope(TaskGroup* g) noexcept : prev(tls_group) { tls_group = g; }
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;
  ~GroupScope() { tls_group = prev; }
};

// Slow path, only while cancellation_active(): true if work running for
// group g (nullptr: no group) should stop, because g or one of its
// ancestors is cancelled, or because the runtime running it passed its
// shutdown deadline.
PARKWAY_API bool stop_requested(const TaskGroup* g) noexcept;
// True if the runtime of the calling thread (a worker's, or the one whose
// shutdown(deadline) drains on this thread) drops tasks now; counts the
// task as dropped. Only while cancellation_active().
PARKWAY_API bool drop_this_task() noexcept;
// The exception a dropped task's waiter receives (RuntimeShutdown).
PARKWAY_API std::exception_ptr dropped_task_error() noexcept;
// True if this thread is Runtime::shutdown(deadline)'s drain, past the
// deadline: a coroutine resuming at an I/O co_await here was resumed by a
// continuation the drain took from a deque; counts it as dropped. Only
// while cancellation_active().
PARKWAY_API bool drop_resumption_here() noexcept;
// At a coroutine's co_await, only while cancellation_active(): throws
// RuntimeShutdown if its runtime passed its shutdown deadline, Cancelled if
// group g (or an ancestor) is cancelled.
PARKWAY_API void throw_if_stopped(const TaskGroup* g);
// As a spawned coroutine of group g is about to start, only while
// cancellation_active(): the error it completes with unstarted
// (RuntimeShutdown past the deadline, counted as dropped; Cancelled if g
// is cancelled), or null: start it.
PARKWAY_API std::exception_ptr refuse_start(const TaskGroup* g) noexcept;

// Wakes the thread whose parker id is `waiter` (see userspace/parker.hpp).
PARKWAY_API void wake_waiter(std::uint32_t waiter) noexcept;

// CompletionWord: how many tasks are outstanding, and who waits for zero.
//
// One 64-bit word: low 32 bits = outstanding count, high 32 bits = the
// parker id + 1 of the one thread waiting for zero (0: nobody). Putting both
// in one word lets the task that brings the count to zero learn who to wake
// from the value its fetch_sub returned, without touching the (possibly
// already destroyed) owner of the word afterwards. Parker ids name
// immortal futex words, so a late wake is at worst spurious.
class PARKWAY_API CompletionWord {
 public:
  static constexpr std::uint64_t kCountMask = 0xffffffffu;

  void add(std::uint32_t n = 1) noexcept { word_.fetch_add(n, std::memory_order_relaxed); }

  // Adds one; true if the count was zero. acq_rel: a zero count read here
  // comes from the last done(), so everything the finished tasks did (and
  // their destruction) happens-before what the caller does next.
  bool add_one_was_zero() noexcept {
    return (word_.fetch_add(1, std::memory_order_acq_rel) & kCountMask) == 0;
  }

  // One outstanding task finished. acq_rel: the finished task's writes
  // happen-before the waiter's return (pairs with the acquire in is_zero).
  void done() noexcept {
    std::uint64_t old = word_.fetch_sub(1, std::memory_order_acq_rel);  // [C3] (parking.md)
    if ((old & kCountMask) == 1 && (old >> 32) != 0) wake_waiter(std::uint32_t(old >> 32) - 1);  // [C4]
  }

  bool is_zero() const noexcept {
    return (word_.load(std::memory_order_acquire) & kCountMask) == 0;
  }

  // Block until the count is zero. On a worker thread this runs other tasks
  // while it waits (helping); elsewhere it sleeps on the caller's futex word.
  void wait() noexcept {
    if (!is_zero()) wait_slow();
  }

  // wait() for the child of a Spawned dropped without a join (coro.hpp):
  // on a worker it runs its own deque, its ring's ready continuations and
  // the injection queue, never a task stolen from another worker, and
  // otherwise waits without running anything (completion.cpp, "A dropped
  // Spawned's wait").
  void wait_isolated() noexcept {
    if (!is_zero()) wait_isolated_slow();
  }

  std::atomic<std::uint64_t>& raw() noexcept { return word_; }

 private:
  void wait_slow() noexcept;
  void wait_isolated_slow() noexcept;

  std::atomic<std::uint64_t> word_{0};
};

}  // namespace detail
}  // namespace parkway
