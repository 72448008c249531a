// parkway/coro.hpp -- C++20 coroutine tasks on the work-stealing pool.
//
//   parkway::Task<long> fib(int n) {
//     if (n < 2) co_return n;
//     parkway::Spawned<long> a = parkway::spawn(fib(n - 1));  // may run on another worker
//     long b = co_await fib(n - 2);                           // runs inline, now
//     co_return co_await std::move(a) + b;                    // join; never blocks a thread
//   }
//   long r = parkway::sync_wait(rt, fib(30));                 // from outside the pool
//
// Task<T> is lazy: nothing runs until it is awaited (inline, by symmetric
// transfer) or spawned. spawn() makes the coroutine a runtime task, pushed
// on the calling worker's deque where thieves can take it. co_await on a
// Spawned<T> either finds it finished and continues, or suspends: the
// child resumes the awaiting coroutine when it finishes, on whichever
// worker finished it (so a join costs no thread, unlike TaskGroup::wait).
//
// The join race (child finishing vs. parent suspending) is one word:
// `cont` = nullptr (running, nobody waits) | kDone | the waiting handle.
// The parent CASes nullptr -> its handle; the child exchanges in kDone and,
// if it got a handle, resumes it. Exactly one of them sees the other.
// Exceptions travel with the result: co_await / sync_wait rethrow them.
// A Spawned<T> dropped without co_await waits for its child, so a frame
// never outlives the scope that spawned it; on a worker the wait steals
// nothing (a stolen task could resume, on this stack, a coroutine that
// waits for the frame beneath it: in the fib above, with leaves that
// throw, nothing finished). Where a coroutine can throw between a spawn
// and its join (the inline co_await above), join on every path all the
// same: keep the exception, co_await the Spawned, rethrow; other shapes
// still hang (docs/guide.md, "Coroutines"; docs/design/coroutines.md,
// "A dropped Spawned").
//
// Cancellation: a coroutine belongs to the TaskGroup whose task spawned it
// (spawn/sync_wait from inside a group's task; an inline co_await passes
// the awaiting coroutine's group on; detach() and the outside of any group
// give none). Once that group, or a group it was made under, is cancelled,
// every co_await in the coroutine but io::close's and a Spawned's join
// throws parkway::Cancelled before it suspends (a join waits for the
// child and returns what it ended with); past Runtime::shutdown's
// deadline, RuntimeShutdown. A coroutine dropped unstarted by that
// shutdown completes with RuntimeShutdown. After every co_await the
// coroutine runs under its own group again, whoever resumed it.
// docs/design/cancellation.md.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <coroutine>
#include <exception>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "parkway/errors.hpp"
#include "parkway/future.hpp"
#include "parkway/runtime.hpp"
#include "parkway/task.hpp"

namespace parkway {

template <class T = void>
class Task;
template <class T = void>
class Spawned;

namespace detail {

// Schedules a runtime task on rt (the caller's deque if it is one of rt's
// workers, else the injection queue; throws RuntimeShutdown when closed).
PARKWAY_API void enqueue_on(Runtime& rt, Task* t);
// Schedules t on the calling worker's deque (a worker of a destroyed
// runtime: runtime_for_spawn() returned nullptr).
PARKWAY_API void enqueue_on_calling_pool(Task* t);
template <class U>
Spawned<U> spawn_on(::parkway::Task<U> t, Runtime* rt);
template <class U>
void detach_on(::parkway::Task<U> t, Runtime* rt);

inline void* const kCoroDone = reinterpret_cast<void*>(std::uintptr_t(1));

// An awaitable that is its own awaiter, by reference (await_transform).
// `scope`: the group an I/O operation joins while it is submitted, so
// that cancelling the group cancels it (userspace/io/group_scope.cpp);
// nullptr for one that runs whatever the group (io::close). `group`: the
// coroutine's own, made this thread's current group again when it
// resumes, whoever resumed it (an I/O completion runs on a worker's loop,
// or inside a wait of another group's task).
template <class A>
struct AwaiterRef {
  A& a;
  TaskGroup* group;
  TaskGroup* scope;
  decltype(auto) await_ready() { return a.await_ready(); }
  template <class H>
  decltype(auto) await_suspend(H h) {
    GroupScope in(scope);
    return a.await_suspend(h);
  }
  decltype(auto) await_resume() {
    tls_group = group;
    // Resumed on the thread of a Runtime::shutdown(deadline) that drains
    // its runtime past the deadline: by an I/O continuation that waited
    // on a worker's deque (the ready queue was full) and that the drain
    // took. Going on would run the body there, off the pool and
    // uncounted; dropped instead, like a task that has not started, so
    // the coroutine only unwinds. The operation's state frees what it
    // holds (a descriptor it made, bytes it received) with the awaiter.
    // resume_on's starter decides (and counts) its own drop.
    if constexpr (!requires { A::kDropsItsOwnResumption; }) {
      if (cancellation_active() && drop_resumption_here()) [[unlikely]]
        throw RuntimeShutdown(
            "parkway: Runtime::shutdown(deadline) passed its deadline; the coroutine's I/O ended, and its "
            "resumption was dropped (its result with it)");
    }
    return a.await_resume();
  }
};

// Resumes a suspended coroutine from code that is not one (a runtime
// task: an I/O completion's continuation, a refused start's joiner). The
// coroutine makes its own group current as it resumes (the awaiters
// below); this thread's group is put back once it suspends again.
inline void resume_from_outside(std::coroutine_handle<> h) {
  GroupScope keep(tls_group);
  h.resume();
}

// The awaiter an awaitable's operator co_await made (await_transform),
// held by value, with the same restoring of the coroutine's group.
template <class W>
struct GroupAwaiter {
  W w;
  TaskGroup* group;
  decltype(auto) await_ready() { return w.await_ready(); }
  template <class H>
  decltype(auto) await_suspend(H h) {
    return w.await_suspend(h);
  }
  decltype(auto) await_resume() {
    tls_group = group;
    return w.await_resume();
  }
};

template <class T>
struct Result {
  static_assert(!std::is_reference_v<T>,
                "parkway::Task<T>: T is a reference; return a value, a pointer or a std::reference_wrapper");
  static_assert(std::is_move_constructible_v<T>,
                "parkway::Task<T>: T cannot be moved, and co_await returns it by value; return a "
                "std::unique_ptr to it instead");
  alignas(T) unsigned char storage[sizeof(T)];
  bool has = false;
  std::exception_ptr error;
  template <class U>
  void set(U&& v) {
    ::new (static_cast<void*>(storage)) T(static_cast<U&&>(v));
    has = true;
  }
  T take() {
    if (error) std::rethrow_exception(error);
    return std::move(*std::launder(reinterpret_cast<T*>(storage)));
  }
  ~Result() {
    if (has) std::launder(reinterpret_cast<T*>(storage))->~T();
  }
};
template <>
struct Result<void> {
  std::exception_ptr error;
  void take() {
    if (error) std::rethrow_exception(error);
  }
};

struct PromiseBase {
  // Frames come from the task block cache (userspace/task_alloc.cpp).
  static void* operator new(std::size_t n) { return allocate_task(n); }
  static void operator delete(void* p, std::size_t n) noexcept { free_task(p, n); }

  std::coroutine_handle<> continuation;  // inline co_await: who resumes when we finish
  // Spawned only: the runtime task that starts us, the join word, and the
  // completion count a dropped Spawned (or sync_wait) blocks on.
  struct Starter : ::parkway::detail::Task {
    std::coroutine_handle<> h;
    PromiseBase* promise;
  } starter;
  // The group whose cancellation stops us (nullptr: none); see above.
  TaskGroup* group = nullptr;
  // Where Promise<T> keeps the exception we end with.
  std::exception_ptr* error_slot = nullptr;
  // Set by resume_moved when a co_await resume_on() continuation is
  // dropped (past Runtime::shutdown's deadline): ResumeOn rethrows it.
  std::exception_ptr moved_error;
  std::atomic<void*> cont{nullptr};
  CompletionWord finished;
  bool spawned = false;
  bool detached = false;         // detach(): the frame frees itself when it finishes
  unsigned fork_generation = 0;  // spawned: current_fork_generation() at spawn

  std::suspend_always initial_suspend() noexcept { return {}; }

  // Every co_await in the coroutine's body passes here first: the
  // cancellation point (one load while nothing is cancelled). Returns the
  // awaiter: the one operator co_await makes (built in place), or a
  // reference to an awaitable that is its own awaiter (an I/O operation
  // cannot be moved).
  template <class A>
  decltype(auto) await_transform(A&& a) {
    // An operation that must run whatever the group (io::close): no
    // Cancelled, and not in the group's scope.
    if constexpr (requires { std::remove_reference_t<A>::kRunsWhenCancelled; }) {
      return AwaiterRef<std::remove_reference_t<A>>{a, group, nullptr};
    } else {
      // A Spawned's join is no cancellation point: it waits for the child
      // and returns what the child ended with (one of the same group ends
      // with Cancelled at its own next co_await). Thrown here, Cancelled
      // would leave the Spawned unjoined, for its destructor to wait for.
      if constexpr (!requires { std::remove_reference_t<A>::kJoinsWhenCancelled; }) {
        if (cancellation_active()) [[unlikely]]
          throw_if_stopped(group);
      }
      if constexpr (requires { static_cast<A&&>(a).operator co_await(); }) {
        return GroupAwaiter<decltype(static_cast<A&&>(a).operator co_await())>{static_cast<A&&>(a).operator co_await(),
                                                                             group};
      } else {
        static_assert(requires { a.await_ready(); },
                      "parkway: not awaitable here; a parkway::Task or Spawned is awaited once, as an rvalue: "
                      "co_await std::move(t)");
        return AwaiterRef<std::remove_reference_t<A>>{a, group, group};
      }
    }
  }

  // The end of a coroutine (h, whose promise is p): frees a detached one,
  // else returns whom to resume: the inline awaiter, or the joiner of a
  // spawned one (whose join word it settles).
  static std::coroutine_handle<> finish(PromiseBase& p, std::coroutine_handle<> h) noexcept {
    if (p.detached) [[unlikely]] {
      if (*p.error_slot) report_unobserved_exception(*p.error_slot, "a detached coroutine threw");
      h.destroy();  // nobody awaits it: it frees its own frame
      return std::noop_coroutine();
    }
    if (!p.spawned) return p.continuation ? p.continuation : std::noop_coroutine();
    // In a child process forked since the spawn, the awaiting coroutine
    // is the parent's (it resumes there): resuming it here would run
    // its code twice (docs/design/fork.md).
    const bool forked = p.fork_generation != current_fork_generation();
    void* waiter = p.cont.exchange(kCoroDone, std::memory_order_acq_rel);
    p.finished.done();  // after this the owner may destroy the frame: touch nothing
    if (waiter && waiter != kCoroDone && !forked) return std::coroutine_handle<>::from_address(waiter);
    return std::noop_coroutine();
  }

  struct Final {
    bool await_ready() noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      return finish(h.promise(), h);
    }
    void await_resume() noexcept {}
  };
  Final final_suspend() noexcept { return {}; }

  // The starter task: resumes the coroutine under its group; or, if the
  // group is cancelled, or the runtime is past Runtime::shutdown's
  // deadline, completes it unstarted with Cancelled or RuntimeShutdown
  // (its joiner is resumed with that error).
  static bool start(::parkway::detail::Task* t) noexcept {
    Starter* st = static_cast<Starter*>(t);
    if (cancellation_active()) [[unlikely]] {
      if (std::exception_ptr refused = refuse_start(st->promise->group)) {
        PromiseBase& p = *st->promise;
        *p.error_slot = std::move(refused);
        resume_from_outside(finish(p, st->h));
        return true;
      }
    }
    GroupScope in(st->promise->group);
    st->h.resume();
    return true;
  }
  // The starter task of resume_on(): continues a coroutine that already
  // ran, under its group (its co_await checked the group's cancellation).
  // Past Runtime::shutdown's deadline it is dropped like any task that
  // has not started: the co_await throws RuntimeShutdown (ResumeOn), so
  // the coroutine runs only its unwinding, wherever the drop happens.
  static bool resume_moved(::parkway::detail::Task* t) noexcept {
    Starter* st = static_cast<Starter*>(t);
    if (cancellation_active() && drop_this_task()) [[unlikely]]
      st->promise->moved_error = dropped_task_error();
    GroupScope in(st->promise->group);
    st->h.resume();
    return true;
  }
};

template <class T>
struct Promise : PromiseBase {
  Result<T> result;
  Promise() noexcept { error_slot = &result.error; }
  // An over-aligned T (alignas(64)) makes the promise, and so the frame,
  // over-aligned; but g++ 12 allocates the frame with operator new(size_t)
  // (no alignment), and the task block cache gives malloc's 16 bytes: the
  // result would be built at a misaligned address. Such a frame comes
  // from the aligned operator new (as task_memory does for tasks).
  static constexpr bool kOverAligned = alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  static void* operator new(std::size_t n) {
    if constexpr (kOverAligned)
      return ::operator new(n, std::align_val_t(alignof(T)));
    else
      return allocate_task(n);
  }
  static void operator delete(void* p, std::size_t n) noexcept {
    if constexpr (kOverAligned)
      ::operator delete(p, std::align_val_t(alignof(T)));  // unsized: as free_task_memory (task.hpp)
    else
      free_task(p, n);
  }
  ::parkway::Task<T> get_return_object() noexcept;
  void unhandled_exception() noexcept { result.error = std::current_exception(); }
  // U defaults to T so that `co_return {a, b};` (a braced list deduces
  // nothing) builds a T. Only what converts implicitly, as for `return`:
  // otherwise `co_return 5;` in a Task<std::vector<int>> would build a
  // vector of five zeros through its explicit constructor.
  template <class U = T>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& v) {
    result.set(static_cast<U&&>(v));
  }
};
template <>
struct Promise<void> : PromiseBase {
  Result<void> result;
  Promise() noexcept { error_slot = &result.error; }
  ::parkway::Task<void> get_return_object() noexcept;
  void unhandled_exception() noexcept { result.error = std::current_exception(); }
  void return_void() noexcept {}
};

}  // namespace detail

// A lazily started coroutine. Await it (runs inline) or spawn() it.
template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Task(Task&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~Task() {
    if (h_) h_.destroy();
  }

  // The awaiter of co_await task: it takes the frame and frees it when the
  // co_await ends.
  struct Awaiter {
    Handle h;
    Awaiter(Handle x) noexcept : h(x) {}
    Awaiter(const Awaiter&) = delete;
    ~Awaiter() { h.destroy(); }
    bool await_ready() noexcept { return false; }
    // The child belongs to the awaiting coroutine's group (a plain
    // function's awaiter: the group of the task running it).
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
      if constexpr (std::is_base_of_v<detail::PromiseBase, P>)
        h.promise().group = parent.promise().group;
      else
        h.promise().group = detail::tls_group;
      h.promise().continuation = parent;
      return h;
    }
    T await_resume() { return h.promise().result.take(); }
  };

  // co_await task: run it now on this thread; resume here when it is done.
  Awaiter operator co_await() && {
    if (!h_) throw std::logic_error("parkway::Task: awaited twice or moved from");
    return Awaiter{std::exchange(h_, nullptr)};
  }

 private:
  friend struct detail::Promise<T>;
  template <class U>
  friend Spawned<U> detail::spawn_on(::parkway::Task<U> t, Runtime* rt);
  template <class U>
  friend void detail::detach_on(::parkway::Task<U> t, Runtime* rt);
  explicit Task(Handle h) noexcept : h_(h) {}
  Handle release() noexcept { return std::exchange(h_, nullptr); }
  Handle h_;
};

namespace detail {
template <class T>
::parkway::Task<T> Promise<T>::get_return_object() noexcept {
  return ::parkway::Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline ::parkway::Task<void> Promise<void>::get_return_object() noexcept {
  return ::parkway::Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace detail

// A coroutine running (or queued) as a runtime task. co_await it once to
// join and get its result.
template <class T>
class [[nodiscard]] Spawned {
 public:
  using Handle = std::coroutine_handle<detail::Promise<T>>;
  Spawned(Spawned&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Spawned& operator=(Spawned&&) = delete;
  Spawned(const Spawned&) = delete;
  ~Spawned() {
    if (!h_) return;
    h_.promise().finished.wait_isolated();  // a dropped handle waits for its child, running only its own
    if (h_.promise().result.error)
      detail::report_unobserved_exception(h_.promise().result.error,
                                          "a spawned coroutine threw, and its Spawned handle was dropped without co_await or get()");
    h_.destroy();
  }

  bool ready() const noexcept { return h_ && h_.promise().finished.is_zero(); }

  // co_await joins even in a cancelled group (PromiseBase::await_transform).
  static constexpr bool kJoinsWhenCancelled = true;
  auto operator co_await() && {
    struct Awaiter {
      Spawned* self;
      bool await_ready() noexcept {
        return self->h_.promise().cont.load(std::memory_order_acquire) == detail::kCoroDone;
      }
      bool await_suspend(std::coroutine_handle<> parent) noexcept {
        void* expected = nullptr;
        // false: the child finished meanwhile; continue without suspending.
        return self->h_.promise().cont.compare_exchange_strong(expected, parent.address(),
                                                               std::memory_order_acq_rel,
                                                               std::memory_order_acquire);
      }
      // The child resumed us from its final suspend, or had finished.
      T await_resume() { return self->take_joined(); }
    };
    if (!h_) throw std::logic_error("parkway::Spawned: awaited twice or moved from");
    return Awaiter{this};
  }

  // Blocks the calling thread (helping if it is a worker) until done, then
  // returns the result or rethrows. For use outside coroutines.
  T get() {
    if (!h_) throw std::logic_error("parkway::Spawned: get() after the result was taken");
    return take();
  }

 private:
  // Waits for the child's last touch of its frame (its final done()),
  // frees the frame, and returns the result or rethrows.
  T take() {
    Handle h = std::exchange(h_, nullptr);
    h.promise().finished.wait();
    struct Destroy {
      Handle h;
      ~Destroy() { h.destroy(); }
    } d{h};
    return h.promise().result.take();
  }

  // take() for the join (co_await): the child has written kCoroDone, so
  // it is between that exchange and its done(), a few instructions away
  // (or already past them): spin for it instead of the helping wait of
  // take(), which would run other tasks on this coroutine's stack before
  // it continues. A join never runs another task (docs/guide.md, "Waits
  // that help"); with the helping wait, one that saw the child's kCoroDone
  // just before its done() ran the newest task of its worker's deque.
  T take_joined() {
    detail::CompletionWord& f = h_.promise().finished;
    for (unsigned spins = 0; !f.is_zero(); ++spins) {
      if (spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        sched_yield();  // the child's thread was preempted in between
      }
    }
    return take();  // its wait() returns at once: the count is zero
  }

  template <class U>
  friend Spawned<U> detail::spawn_on(::parkway::Task<U> t, Runtime* rt);
  explicit Spawned(Handle h) noexcept : h_(h) {}
  Handle h_;
};

namespace detail {
// Queues the coroutine h on rt through its promise's starter task; if rt
// refuses it (RuntimeShutdown), the frame is destroyed and the error
// propagates.
// rt == nullptr: the calling worker's own pool (runtime_for_spawn).
template <class P>
void start_on(Runtime* rt, std::coroutine_handle<P> h) {
  h.promise().starter.invoke = &PromiseBase::start;
  h.promise().starter.h = h;
  h.promise().starter.promise = &h.promise();
  try {
    if (rt)
      enqueue_on(*rt, &h.promise().starter);
    else
      enqueue_on_calling_pool(&h.promise().starter);
  } catch (...) {
    h.destroy();
    throw;
  }
}
}  // namespace detail

namespace detail {
template <class U>
Spawned<U> spawn_on(::parkway::Task<U> t, Runtime* rt) {
  typename ::parkway::Task<U>::Handle h = t.release();
  if (!h) throw std::logic_error("parkway::spawn: the Task was already started or moved from");
  auto& p = h.promise();
  p.spawned = true;
  p.group = tls_group;  // the spawning task's group: see "Cancellation" above
  p.fork_generation = current_fork_generation();
  p.finished.add(1);
  start_on(rt, h);
  return Spawned<U>(h);
}
template <class U>
void detach_on(::parkway::Task<U> t, Runtime* rt) {
  typename ::parkway::Task<U>::Handle h = t.release();
  if (!h) throw std::logic_error("parkway::detach: the Task was already started or moved from");
  auto& p = h.promise();
  p.detached = true;
  start_on(rt, h);
}
}  // namespace detail

// Starts t as a runtime task on rt.
template <class T>
Spawned<T> spawn(Task<T> t, Runtime& rt) {
  return detail::spawn_on(std::move(t), &rt);
}

// Starts t as a runtime task on the calling worker's runtime (outside any
// pool: Runtime::default_runtime()).
template <class T>
Spawned<T> spawn(Task<T> t) {
  return detail::spawn_on(std::move(t), detail::runtime_for_spawn());
}

// Starts t as a runtime task on rt and lets it run on its own: nobody
// joins it, its frame frees itself when it finishes, and an exception it
// ends with is printed on stderr (as for a dropped Spawned). Shutting rt
// down waits for it while it is queued or running on rt, and cancels the
// I/O on rt's rings it waits for (parkway/io.hpp), so that it resumes
// and ends; one suspended on anything else (a Spawned of another
// runtime, an awaitable of its own) is not waited for, and must not touch
// rt once rt is gone. For servers: one detached coroutine per connection.
template <class T>
void detach(Task<T> t, Runtime& rt) {
  detail::detach_on(std::move(t), &rt);
}

// detach() on the calling worker's runtime (outside any pool:
// Runtime::default_runtime()).
template <class T>
void detach(Task<T> t) {
  detail::detach_on(std::move(t), detail::runtime_for_spawn());
}

// co_await resume_on(rt): the awaiting coroutine continues as a task of
// rt (pushed on the calling worker's deque if it is one of rt's workers,
// else on rt's injection queue). For a server that keeps long computations
// off its I/O workers:
//
//   co_await parkway::resume_on(compute);  // now on a worker of `compute`
//   auto r = expensive();
//   co_await parkway::resume_on(io);       // back on the server's workers
//
// Throws RuntimeShutdown (from the co_await, in the coroutine, which stays
// where it was) if rt is shutting down; also if rt's shutdown(deadline)
// passes its deadline before the coroutine's turn comes (it is dropped as
// a task that has not started would be, counted in the report's
// `dropped`, and its unwinding runs where the drop happens). On the
// caller's own runtime the coroutine is pushed on the caller's deque,
// where a thief may take it.
class ResumeOn {
 public:
  explicit ResumeOn(Runtime& rt) noexcept : rt_(rt) {}
  // Past the deadline its starter (resume_moved) drops the resumption,
  // counted, wherever it runs; AwaiterRef must not drop it again.
  static constexpr bool kDropsItsOwnResumption = true;
  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) {
    static_assert(std::is_base_of_v<detail::PromiseBase, P>,
                  "parkway::resume_on: only a parkway::Task coroutine can co_await it");
    // The awaiting coroutine's own starter is free: a coroutine starts once,
    // and it is suspended here until the starter runs.
    auto& starter = h.promise().starter;
    starter.invoke = &detail::PromiseBase::resume_moved;
    starter.h = h;
    starter.promise = &h.promise();
    promise_ = &h.promise();
    detail::enqueue_on(rt_, &starter);  // from here on h may run (and end) elsewhere: touch nothing
  }
  void await_resume() const {
    if (promise_ != nullptr && promise_->moved_error) [[unlikely]]
      std::rethrow_exception(std::exchange(promise_->moved_error, nullptr));
  }

 private:
  Runtime& rt_;
  detail::PromiseBase* promise_ = nullptr;
};

[[nodiscard]] inline ResumeOn resume_on(Runtime& rt) noexcept { return ResumeOn(rt); }

// Runs t on rt and blocks the caller until it finishes; returns its result
// or rethrows its exception.
template <class T>
T sync_wait(Runtime& rt, Task<T> t) {
  return spawn(std::move(t), rt).get();
}

}  // namespace parkway
