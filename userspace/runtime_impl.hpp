// runtime_impl.hpp -- what a Runtime owns: workers, the parking state, the
// injection queue, and the shutdown flags.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <vector>

#include "injection_queue.hpp"
#include "parking.hpp"
#include "sched_ext_link.hpp"
#include "parkway/options.hpp"
#include "parkway/runtime.hpp"
#include "worker.hpp"

namespace parkway::detail {

// How many times this process's line of ancestors forked: 0 in the
// original process, bumped in each child by a pthread_atfork handler
// (runtime.cpp, "fork").
extern std::atomic<unsigned> g_fork_generation;
inline unsigned fork_generation() noexcept { return g_fork_generation.load(std::memory_order_relaxed); }

class RuntimeImpl;
// cancel.cpp: this thread drains `rt`'s queues for shutdown(deadline)
// (nullptr: no longer); returns the drain state before, for the caller
// to put back with restore_draining (a drain can nest: code a drained
// task runs, a resumed joiner or a closure's destructor, may itself call
// shutdown(deadline)). drain_invoking: the drain is about to invoke a
// task it took. On a worker of another runtime, only what the drain
// invokes itself counts as `rt`'s: a task that worker starts inside one
// (a helping wait in the code a dropped task runs, a resumed joiner's)
// is its own runtime's. runtime_dropping_here: whether the runtime
// running tasks here drops them.
struct DrainState {
  RuntimeImpl* rt;
  std::uint64_t mark;
};
DrainState set_draining(RuntimeImpl* rt) noexcept;
void restore_draining(DrainState prev) noexcept;
void drain_invoking() noexcept;
// The runtime a drain on this thread drops tasks for, or nullptr (none,
// or the code running is a task this thread's worker started inside the
// one the drain invoked).
RuntimeImpl* draining_here() noexcept;
bool runtime_dropping_here() noexcept;
// The runtime whose tasks run on this thread: the one a drain here drops
// for, else the calling worker's; nullptr off every pool.
RuntimeImpl* runtime_here() noexcept;
// Keeps a forked child's copy of a parent's runtime reachable when its
// Runtime is destroyed there (it cannot be freed: see runtime.cpp, "fork").
void leave_behind(RuntimeImpl* impl) noexcept;

class RuntimeImpl {
 public:
  RuntimeImpl(Runtime& owner, const Options& opts);

  // From a thread outside the pool: enqueue on the injection queue and wake
  // a worker if needed. Throws RuntimeShutdown once shutdown has begun.
  void inject(Task* t);
  // Wake an idle worker if nobody searches ([N1]..[W5]); waker is the index
  // of the calling worker, or -1 for a thread outside the pool.
  void notify_work(int waker) noexcept;
  // Wake one idle worker (if nobody searches), counted as an external
  // wake-up: for threads outside the pool (waker -1) and shutdown's [X2].
  void wake_one_from(int waker) noexcept;

  void start();
  void shutdown();
  // shutdown() for a destructor running on one of this runtime's own
  // workers, which cannot wait for itself: closes and stops the runtime
  // as shutdown() does, so the workers finish every accepted task and
  // leave, but joins nobody (the threads not joined yet are detached:
  // shutdown(deadline) may have joined some) and marks it
  // abandoned (the Runtime object is about to be gone). The caller leaves
  // the RuntimeImpl allocated (leave_behind): its workers still use it.
  void abandon_from_own_worker();
  // Both: refuse outside submissions, wait for those in flight, then
  // [X1] stop and [X2] wake. Under shutdown_mu.
  void stop_workers();

  // True in a child process forked after this runtime was made: its worker
  // threads exist only in the parent (fork copies the calling thread
  // alone). Such a runtime refuses work and is neither joined nor freed
  // there (runtime.cpp, "fork").
  bool forked() const noexcept { return made_in_generation != fork_generation(); }

  Runtime& owner;
  // The pool's own copy of Options::name (at most 8 bytes, validated):
  // the caller's string need not outlive the constructor. opts.name points
  // here.
  char name[9] = {};
  const Options opts;
  const unsigned n;
  std::vector<std::unique_ptr<Worker>> workers;
  Parking parking;
  InjectionQueue injection;
  SchedExtLink sched_ext;  // worker states for the optional BPF scheduler

  // Shutdown: closing_ refuses outside submissions; once no submission is
  // in flight, stop_ tells workers to exit when they find no work.
  std::atomic<bool> closing{false};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> injecting{0};
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> external_wakeups{0};
  std::vector<pthread_t> threads;  // the started workers (pthread_create: for Options::stack_size)
  // shutdown() may be called from several threads; shutdown(deadline)
  // waits for it only until its deadline (bounded_shutdown.cpp).
  std::mutex shutdown_mu;
  bool joined = false;     // guarded by shutdown_mu
  // Destroyed on one of its own workers (abandon_from_own_worker): owner
  // is gone, and Runtime::current() answers nullptr on these workers.
  std::atomic<bool> abandoned{false};
  std::atomic<bool> joining{false};  // shutdown() is joining the workers (holds shutdown_mu)

  // Runtime::shutdown(deadline) (bounded_shutdown.cpp). Past the deadline
  // `dropping` is set for good: every task that starts afterwards is
  // dropped unstarted, its waiter told (RuntimeShutdown), and counted in
  // `dropped`. `left_running`: it returned with workers still inside
  // tasks, so the destructor detaches them instead of joining.
  ShutdownReport shutdown_until(std::chrono::steady_clock::time_point deadline);
  std::atomic<bool> dropping{false};
  // The drop state: `dropping` set and counted once in g_cancel_live (task
  // starts take the cancellation path while that is non-zero). Changed
  // only by exchange, so whoever sets or clears it counts it once.
  void begin_dropping() noexcept {
    if (!dropping.exchange(true, std::memory_order_seq_cst)) g_cancel_live.fetch_add(1, std::memory_order_seq_cst);
  }
  void end_dropping() noexcept {
    if (dropping.exchange(false, std::memory_order_relaxed)) g_cancel_live.fetch_sub(1, std::memory_order_release);
  }
  std::atomic<std::uint64_t> dropped{0};
  // ShutdownReport::unobserved: the RuntimeShutdown exceptions nobody
  // will rethrow, counted while a shutdown(deadline) call is under way.
  // Low 48 bits the count, high 16 the calls under way; each call, as it
  // leaves, takes the count the word holds (leave_unobserved). One word,
  // so an exception either lands in a count some call returns, or finds
  // no call and is printed.
  std::atomic<std::uint64_t> unobserved{0};
  static constexpr std::uint64_t kUnobservedCall = std::uint64_t(1) << 48;
  bool count_unobserved() noexcept;  // false: no call under way (print it)
  std::uint64_t leave_unobserved() noexcept;
  ShutdownReport shutdown_counted(std::chrono::steady_clock::time_point deadline);
  bool left_running = false;  // guarded by shutdown_mu
  std::vector<bool> thread_joined;  // per thread, once shutdown_until began (shutdown_mu)
  bool join_until(std::chrono::steady_clock::time_point deadline);
  std::uint64_t drain_dropping();  // invokes (drops) every task this thread can reach
  unsigned workers_in_tasks() const noexcept;
  bool release_after_bounded();  // ~Runtime after left_running: true if all were joined

  const unsigned made_in_generation = fork_generation();  // see forked()
  RuntimeImpl* left_behind_next = nullptr;                // see leave_behind()

  // Runtime::shutdown() and shutdown(deadline) calls in progress. Another
  // thread may call them while the destructor waits in its own shutdown
  // (a bounded call keeps its deadline then, and drains without the
  // lock); the destructor frees the runtime only once they have returned.
  std::atomic<unsigned> shutdown_calls{0};
};

// One Runtime::shutdown() or shutdown(deadline) call, counted in
// shutdown_calls for its whole length; the count's decrement is its last
// touch of the runtime.
class ShutdownCall {
 public:
  explicit ShutdownCall(RuntimeImpl* rt) noexcept : rt_(rt) { rt_->shutdown_calls.fetch_add(1, std::memory_order_seq_cst); }
  ~ShutdownCall() { rt_->shutdown_calls.fetch_sub(1, std::memory_order_release); }
  ShutdownCall(const ShutdownCall&) = delete;
  ShutdownCall& operator=(const ShutdownCall&) = delete;

 private:
  RuntimeImpl* const rt_;
};

}  // namespace parkway::detail
