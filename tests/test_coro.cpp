// test_coro.cpp -- coroutine tasks: inline await, spawn/join across
// workers, exceptions, dropped handles, sync_wait from many threads.
#include <gtest/gtest.h>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

parkway::Task<long> fib(int n) {
  if (n < 2) co_return n;
  parkway::Spawned<long> a = parkway::spawn(fib(n - 1));
  long b = co_await fib(n - 2);
  co_return co_await std::move(a) + b;
}
using pwtest::fib_seq;

parkway::Task<int> add_one(int x) { co_return x + 1; }

parkway::Task<std::string> chain() {
  int v = co_await add_one(1);
  v = co_await add_one(v);
  co_return std::to_string(v);
}

parkway::Task<void> fail_after(int depth) {
  if (depth == 0) throw std::runtime_error("coroutine failed");
  co_await fail_after(depth - 1);
}

parkway::Task<int> sum_children(int n, std::atomic<int>* ran) {
  std::vector<parkway::Spawned<int>> kids;
  for (int i = 0; i < n; ++i)
    kids.push_back(parkway::spawn([](int i, std::atomic<int>* r) -> parkway::Task<int> {
      r->fetch_add(1);
      co_return i;
    }(i, ran)));
  int s = 0;
  for (auto& k : kids) s += co_await std::move(k);
  co_return s;
}

}  // namespace

TEST(Coro, InlineAwaitChain) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  EXPECT_EQ(parkway::sync_wait(rt, chain()), "3");
}

namespace {
parkway::Task<std::vector<int>> braced() { co_return {1, 2, 3}; }
}  // namespace

// `co_return {1, 2, 3};` builds the Task's value type (it did not compile:
// return_value's parameter type was deduced, and a braced list deduces
// nothing).
TEST(Coro, CoReturnABracedList) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  EXPECT_EQ(parkway::sync_wait(rt, braced()), (std::vector<int>{1, 2, 3}));
}

namespace {
// Whether `co_return v;` (a V) compiles in a Task<T>.
template <class T, class V>
constexpr bool co_return_accepts = requires(parkway::detail::Promise<T>& p, V&& v) {
  p.return_value(static_cast<V&&>(v));
};
}  // namespace

// co_return converts as return does: implicitly only. `return 5;` does
// not compile in a function returning std::vector<int> (its size
// constructor is explicit), nor `return new int;` in one returning a
// unique_ptr; `co_return 5;` in a Task<std::vector<int>> compiled and
// made a vector of five zeros, and `co_return new int(7);` took the
// pointer, through the explicit constructors.
TEST(Coro, CoReturnConvertsOnlyImplicitlyAsReturnDoes) {
  EXPECT_FALSE((co_return_accepts<std::vector<int>, int>)) << "co_return 5 builds a vector of 5 elements";
  EXPECT_FALSE((co_return_accepts<std::unique_ptr<int>, int*>)) << "co_return of a raw pointer takes ownership";
  EXPECT_TRUE((co_return_accepts<long, int>));
  EXPECT_TRUE((co_return_accepts<std::string, const char*>));
  EXPECT_TRUE((co_return_accepts<std::vector<int>, std::vector<int>>));
  EXPECT_TRUE((co_return_accepts<std::unique_ptr<int>, std::unique_ptr<int>>));
}

TEST(Coro, FibAcrossWorkers) {
  pwtest::Watchdog w("Coro.FibAcrossWorkers", 120);
  for (unsigned workers : {1u, 2u, 4u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    int n = pwtest::kSanitized ? 16 : 22;
    EXPECT_EQ(parkway::sync_wait(rt, fib(n)), fib_seq(n)) << workers << " workers";
  }
}

TEST(Coro, ManyChildrenJoined) {
  parkway::Runtime rt(parkway::Options{.workers = 3});
  std::atomic<int> ran{0};
  const int n = 20000 / pwtest::kSlow;
  EXPECT_EQ(parkway::sync_wait(rt, sum_children(n, &ran)), (n - 1) * n / 2);
  EXPECT_EQ(ran.load(), n);
}

TEST(Coro, ExceptionsPropagate) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  EXPECT_THROW(parkway::sync_wait(rt, fail_after(5)), std::runtime_error);
  auto spawned_failure = []() -> parkway::Task<int> {
    auto s = parkway::spawn(fail_after(3));
    co_await std::move(s);
    co_return 1;
  };
  EXPECT_THROW(parkway::sync_wait(rt, spawned_failure()), std::runtime_error);
}

namespace {
// The trees below: 16 levels of 1,597 leaves, 12 of 233 under a sanitizer.
constexpr int kTreeLevels = pwtest::kSanitized ? 12 : 16;
constexpr long kTreeLeaves = kTreeLevels == 12 ? 233 : 1597;

// A leaf of the trees below: 1, or, every `every`-th leaf over the whole
// test, an exception.
long a_leaf(std::atomic<long>* leaves, long every) {
  if (leaves->fetch_add(1) % every == every - 1) throw std::runtime_error("a leaf failed");
  return 1;
}

// A fib-like tree of such leaves whose spawned half is joined on every
// path: the exception of the inline half is kept, the spawned half
// joined, then the first rethrown (docs/guide.md, "Coroutines").
parkway::Task<long> tree_joined(int n, std::atomic<long>* leaves, long every) {
  if (n < 2) co_return a_leaf(leaves, every);
  parkway::Spawned<long> a = parkway::spawn(tree_joined(n - 1, leaves, every));
  std::exception_ptr failed;
  long b = 0;
  try {
    b = co_await tree_joined(n - 2, leaves, every);
  } catch (...) {
    failed = std::current_exception();
  }
  const long x = co_await std::move(a);
  if (failed) std::rethrow_exception(failed);
  co_return x + b;
}
}  // namespace

// Trees whose leaves throw, written as the guide says (join every Spawned
// on every path), finish on 1, 2 and 4 workers, every tree reporting its
// failure. Dropping the spawned half instead (b = co_await ... throwing
// past it) hung 200 such trees of 16 levels on two workers in 3 of 3 runs
// (docs/design/coroutines.md, "Limits"): the watchdog is what fails here
// if a join on the exception's path waits for ever.
TEST(Coro, TreesThatThrowAndJoinOnEveryPathFinish) {
  pwtest::Watchdog w("Coro.TreesThatThrowAndJoinOnEveryPathFinish", 120);
  const int levels = kTreeLevels;
  const long leaves_per_tree = kTreeLeaves;
  for (unsigned workers : {1u, 2u, 4u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    std::atomic<long> leaves{0};
    int failed = 0;
    const int trees = 100;
    for (int i = 0; i < trees; ++i) {
      try {
        parkway::sync_wait(rt, tree_joined(levels, &leaves, 100));
      } catch (const std::runtime_error&) {
        ++failed;
      }
    }
    EXPECT_EQ(failed, trees) << workers << " workers: every tree has a leaf that throws";
    EXPECT_EQ(leaves.load(), trees * leaves_per_tree) << workers << " workers: every leaf ran once";
    std::atomic<long> none{0};
    EXPECT_EQ(parkway::sync_wait(rt, tree_joined(levels, &none, 1'000'000)), leaves_per_tree)
        << workers << " workers: a tree without a throw";
  }
}

namespace {
// The same tree as the guide's fib: the spawned half is dropped, not
// joined, when the inline half throws.
parkway::Task<long> tree_dropped(int n, std::atomic<long>* leaves, long every) {
  if (n < 2) co_return a_leaf(leaves, every);
  parkway::Spawned<long> a = parkway::spawn(tree_dropped(n - 1, leaves, every));
  const long b = co_await tree_dropped(n - 2, leaves, every);
  co_return co_await std::move(a) + b;
}
}  // namespace

// A Spawned dropped by the unwinding of an exception waits for its child
// running only this worker's own tasks (CompletionWord::wait_isolated).
// With a helping wait that stole, 200 trees of 16 levels, every 300th
// leaf throwing, hung on two workers in 3 of 3 runs: the wait ran a
// stolen task whose end resumed, on the same stack, an ancestor that then
// waited for the frame beneath it. The watchdog is what fails if a tree
// never finishes. Every tree reports a failure (a leaf of each throws),
// and the exceptions of dropped children that threw too are printed as
// unobserved, not lost.
// Left out of `make test-chaos`: under randomized schedules the wait,
// no isolation of the child's subtree, still hung here (1 of 2 runs).
TEST(Coro, ADroppedSpawnedInAThrowingTreeWaitsForItsOwn) {
  pwtest::Watchdog w("Coro.ADroppedSpawnedInAThrowingTreeWaitsForItsOwn", 120);
  const int levels = kTreeLevels;
  const long leaves_per_tree = kTreeLeaves;
  // Several throws a tree, so that dropped children throw too.
  const long every = levels == 12 ? 40 : 300;
  for (unsigned workers : {1u, 2u, 4u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    std::atomic<long> leaves{0};
    int failed = 0;
    const int trees = 200;
    testing::internal::CaptureStderr();  // the unobserved exceptions' lines
    for (int i = 0; i < trees; ++i) {
      try {
        parkway::sync_wait(rt, tree_dropped(levels, &leaves, every));
      } catch (const std::runtime_error&) {
        ++failed;
      }
    }
    const std::string err = testing::internal::GetCapturedStderr();
    // The throw skips only joins (the inline half is each node's last
    // call before its join): every leaf runs, dropped children to their end.
    EXPECT_GT(failed, 0) << workers << " workers";
    EXPECT_EQ(leaves.load(), long(trees) * leaves_per_tree) << workers << " workers: every leaf ran once";
    EXPECT_NE(err.find("a spawned coroutine threw, and its Spawned handle was dropped"), std::string::npos)
        << workers << " workers: a dropped child's failure is reported";
    std::atomic<long> none{0};
    EXPECT_EQ(parkway::sync_wait(rt, tree_dropped(levels, &none, 1'000'000)), leaves_per_tree)
        << workers << " workers: a tree without a throw";
  }
}

TEST(Coro, DroppedSpawnedWaitsForItsChild) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> done{0};
  auto parent = [](std::atomic<int>* d) -> parkway::Task<void> {
    {
      auto child = parkway::spawn([](std::atomic<int>* d) -> parkway::Task<void> {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        d->fetch_add(1);
        co_return;
      }(d));
    }  // dropped without co_await: waits here
    EXPECT_EQ(d->load(), 1);
    co_return;
  };
  parkway::sync_wait(rt, parent(&done));
  EXPECT_EQ(done.load(), 1);
}

namespace {
parkway::Task<void> set_flag(std::atomic<bool>* f) {
  f->store(true);
  co_return;
}
// Tells the joiner it is about to end, then ends `spins` steps later
// (trials sweep the joiner's arrival across the child's end).
parkway::Task<int> says_almost_done(std::atomic<bool>* almost, int spins) {
  almost->store(true, std::memory_order_release);
  for (int i = 0; i < spins; ++i) asm volatile("");
  co_return 1;
}
// On a one-worker runtime: per trial, a marker task waits on this
// worker's deque, and a child on the other runtime finishes while this
// coroutine joins it. A join that suspends resumes on the other
// runtime's worker; one that does not continues here, and must not have
// run the marker meanwhile. Returns how many joins ran it.
parkway::Task<long> joins_running_the_marker(parkway::Runtime* here, parkway::Runtime* there, int trials,
                                             std::atomic<bool>* marker_flags) {
  long ran_inside = 0;
  for (int t = 0; t < trials; ++t) {
    const std::thread::id me = std::this_thread::get_id();
    std::atomic<bool>* marker_ran = &marker_flags[t];  // the test's: a marker may run after the loop
    parkway::detach(set_flag(marker_ran), *here);      // pushed on this worker's deque
    std::atomic<bool> almost{false};
    auto child = parkway::spawn(says_almost_done(&almost, t % 97), *there);
    while (!almost.load(std::memory_order_acquire)) {
    }
    co_await std::move(child);
    if (std::this_thread::get_id() != me)
      co_await parkway::resume_on(*here);  // it suspended: the child resumed it there
    else if (marker_ran->load())
      ++ran_inside;
  }
  co_return ran_inside;
}
}  // namespace

// A join (co_await of a Spawned) never runs another task: it continues
// or suspends. One that saw the child's kCoroDone just before the child's
// last done() waited for that count with the helping wait of get(),
// which ran the newest task of the worker's deque first, on the joining
// coroutine's stack, to its end: the join waited for whatever that task
// did, and a task that blocks until the joining coroutine goes on would
// never return (the helping-wait deadlock docs/guide.md says a co_await
// join does not have). Before the fix every run had some: 4 to 58 of
// 100,000 trials ran the marker, in 20 runs.
TEST(Coro, AJoinNeverRunsAnotherTask) {
  pwtest::Watchdog w("Coro.AJoinNeverRunsAnotherTask", 120);
  const int trials = pwtest::kSanitized ? 20000 : 100000;
  auto flags = std::make_unique<std::atomic<bool>[]>(trials);  // outlives the runtimes
  parkway::Runtime here(parkway::Options{.workers = 1, .name = "here"});
  parkway::Runtime there(parkway::Options{.workers = 1, .name = "there"});
  EXPECT_EQ(parkway::sync_wait(here, joins_running_the_marker(&here, &there, trials, flags.get())), 0)
      << "joins ran another task before going on";
}

TEST(Coro, SyncWaitFromManyThreads) {
  pwtest::Watchdog w("Coro.SyncWaitFromManyThreads", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50 / pwtest::kSlow + 5; ++i)
        if (parkway::sync_wait(rt, fib(12)) == 144) ok.fetch_add(1);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 6 * (50 / pwtest::kSlow + 5));
}

TEST(Coro, SpawnAfterShutdownThrows) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  rt.shutdown();
  EXPECT_THROW(parkway::sync_wait(rt, add_one(1)), parkway::RuntimeShutdown);
}

TEST(Coro, AwaitingTwiceIsAnError) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto f = []() -> parkway::Task<int> {
    auto t = add_one(1);
    int a = co_await std::move(t);
    bool threw = false;
    try {
      (void)co_await std::move(t);  // moved-from handle: refused, not UB
    } catch (const std::logic_error&) {
      threw = true;
    }
    co_return threw ? a : -1;
  };
  EXPECT_EQ(parkway::sync_wait(rt, f()), 2);
}

namespace {
parkway::Task<void> bump_after_yield(std::atomic<int>* n, int depth) {
  if (depth > 0) co_await bump_after_yield(n, depth - 1);
  n->fetch_add(1);
}
}  // namespace

// detach(): the coroutine runs to the end with nobody joining it, and the
// runtime's shutdown waits for it; a runtime that refuses it throws and
// destroys the frame (no leak under ASAN).
TEST(Coro, DetachedCoroutinesRunAndShutdownWaitsForThem) {
  std::atomic<int> n{0};
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    for (int i = 0; i < 1000; ++i) parkway::detach(bump_after_yield(&n, 3), rt);
    rt.shutdown();
    EXPECT_EQ(n.load(), 4000);
    EXPECT_THROW(parkway::detach(bump_after_yield(&n, 1), rt), parkway::RuntimeShutdown);
  }
  EXPECT_EQ(n.load(), 4000);
}

namespace {
// Hops between two runtimes, checking at each step that it runs on a worker
// of the runtime it asked for; returns the sum of its steps' work.
parkway::Task<long> hop(parkway::Runtime* io, parkway::Runtime* compute, int hops, std::atomic<int>* wrong) {
  long sum = 0;
  for (int i = 0; i < hops; ++i) {
    co_await parkway::resume_on(*compute);
    if (parkway::Runtime::current() != compute) wrong->fetch_add(1);
    sum += fib_seq(12 + i % 3);
    co_await parkway::resume_on(*io);
    if (parkway::Runtime::current() != io) wrong->fetch_add(1);
  }
  co_return sum;
}
}  // namespace

// resume_on(): a coroutine continues on the runtime it names, and comes
// back; many at once, spawned and joined on the first runtime.
TEST(Coro, ResumeOnMovesACoroutineBetweenRuntimes) {
  parkway::Runtime io(parkway::Options{.workers = 2});
  parkway::Runtime compute(parkway::Options{.workers = 2});
  std::atomic<int> wrong{0};
  constexpr int kCoroutines = 64, kHops = 20;
  long expected_one = 0;
  for (int i = 0; i < kHops; ++i) expected_one += fib_seq(12 + i % 3);
  auto all = [&]() -> parkway::Task<long> {
    std::vector<parkway::Spawned<long>> kids;
    for (int i = 0; i < kCoroutines; ++i) kids.push_back(parkway::spawn(hop(&io, &compute, kHops, &wrong)));
    long total = 0;
    for (auto& k : kids) total += co_await std::move(k);
    co_return total;
  };
  EXPECT_EQ(parkway::sync_wait(io, all()), expected_one * kCoroutines);
  EXPECT_EQ(wrong.load(), 0);
}

// A runtime that is shutting down refuses the coroutine: RuntimeShutdown
// from the co_await, and the coroutine goes on where it was.
TEST(Coro, ResumeOnAClosedRuntimeThrowsAndStaysPut) {
  parkway::Runtime io(parkway::Options{.workers = 1});
  parkway::Runtime closed(parkway::Options{.workers = 1});
  closed.shutdown();
  auto f = [&]() -> parkway::Task<int> {
    try {
      co_await parkway::resume_on(closed);
    } catch (const parkway::RuntimeShutdown&) {
      co_return parkway::Runtime::current() == &io ? 1 : -1;
    }
    co_return 0;
  };
  EXPECT_EQ(parkway::sync_wait(io, f()), 1);
}

namespace {
parkway::Task<int> moved_inline(parkway::Runtime* io, parkway::Runtime* compute) {
  co_await parkway::resume_on(*compute);
  int here = parkway::Runtime::current() == compute ? 1 : 0;
  co_await parkway::resume_on(*io);
  co_return here + (parkway::Runtime::current() == io ? 1 : 0);
}
parkway::Task<int> awaits_moved_inline(parkway::Runtime* io, parkway::Runtime* compute) {
  int sum = 0;
  for (int i = 0; i < 50; ++i) sum += co_await moved_inline(io, compute);  // inline, never spawned
  co_return sum;
}
}  // namespace

// resume_on() from a coroutine awaited inline (its own starter never ran:
// the one resume_on uses must be filled in whole).
TEST(Coro, ResumeOnFromACoroutineAwaitedInline) {
  parkway::Runtime io(parkway::Options{.workers = 2});
  parkway::Runtime compute(parkway::Options{.workers = 2});
  EXPECT_EQ(parkway::sync_wait(io, awaits_moved_inline(&io, &compute)), 100);
}

namespace {
struct alignas(64) Aligned64 {
  unsigned char b[64];
  int v;
};

// Reads its own frame's address (an awaiter that does not suspend).
struct FrameAddress {
  void* addr = nullptr;
  bool await_ready() noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) noexcept {
    addr = h.address();
    return false;
  }
  void* await_resume() noexcept { return addr; }
};

// Counts into *misaligned a frame whose promise, or the result it will
// return, is not at an address aligned for it.
parkway::Task<Aligned64> aligned_result(int v, int* misaligned) {
  void* frame = co_await FrameAddress{};
  auto h = std::coroutine_handle<parkway::detail::Promise<Aligned64>>::from_address(frame);
  if (reinterpret_cast<std::uintptr_t>(&h.promise()) % alignof(parkway::detail::Promise<Aligned64>) != 0 ||
      reinterpret_cast<std::uintptr_t>(&h.promise().result.storage) % alignof(Aligned64) != 0)
    ++*misaligned;
  Aligned64 a{};
  a.v = v;
  co_return a;
}

struct MoveThrows {
  int v;
  static inline bool throw_now = false;
  explicit MoveThrows(int x) : v(x) {}
  MoveThrows(MoveThrows&& o) : v(o.v) {
    if (throw_now) throw std::runtime_error("the result's move threw");
  }
};
parkway::Task<MoveThrows> move_throws(int v) { co_return MoveThrows(v); }

struct CopyThrows {
  CopyThrows() = default;
  CopyThrows(const CopyThrows&) { throw std::runtime_error("the parameter's copy threw"); }
};
parkway::Task<int> takes_copy_throws(CopyThrows) { co_return 1; }
}  // namespace

// A Task<T> of an over-aligned T (alignas(64)) keeps its result at an
// aligned address, awaited inline and spawned: g++ 12 allocates the frame
// with the unaligned operator new, and the task block cache gave 16-byte
// alignment (23 of 32 frames misaligned before).
TEST(Coro, AnOverAlignedResultIsStoredAligned) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  int misaligned = 0;
  auto inline_awaits = [](int* m) -> parkway::Task<int> {
    std::vector<parkway::Task<Aligned64>> ts;
    for (int i = 0; i < 16; ++i) ts.push_back(aligned_result(i, m));
    int s = 0;
    for (auto& t : ts) s += (co_await std::move(t)).v;
    co_return s;
  };
  EXPECT_EQ(parkway::sync_wait(rt, inline_awaits(&misaligned)), 120);
  std::vector<parkway::Spawned<Aligned64>> ss;
  for (int i = 0; i < 16; ++i) ss.push_back(parkway::spawn(aligned_result(i, &misaligned), rt));
  int s = 0;
  for (auto& x : ss) s += x.get().v;
  EXPECT_EQ(s, 120);
  EXPECT_EQ(misaligned, 0) << "alignas(64) results stored at misaligned addresses";
}

// A result whose move constructor throws reaches the caller as that
// exception; a parameter whose copy throws frees the frame (ASAN: no
// leak) and throws at the call.
TEST(Coro, ThrowingMovesAndCopiesReachTheCaller) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  MoveThrows::throw_now = false;
  EXPECT_EQ(parkway::sync_wait(rt, move_throws(3)).v, 3);
  MoveThrows::throw_now = true;
  EXPECT_THROW(parkway::sync_wait(rt, move_throws(3)), std::runtime_error);
  MoveThrows::throw_now = false;
  CopyThrows c;
  EXPECT_THROW((void)takes_copy_throws(c), std::runtime_error);
}

namespace {
// 1 if it runs on a live runtime (Runtime::current() names one), 0 if on
// a worker of a destroyed one.
parkway::Task<int> on_a_live_runtime() { co_return parkway::Runtime::current() != nullptr ? 1 : 0; }

// Holds its worker (not at a co_await) until the runtime is destroyed,
// then spawns: where the child went, or 2 if its join threw
// RuntimeShutdown (dropped: the shutdown passed its deadline).
parkway::Task<void> outlives_its_runtime(std::atomic<bool>* started, std::atomic<bool>* release, std::atomic<int>* where) {
  started->store(true);
  while (!release->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    where->store(co_await parkway::spawn(on_a_live_runtime()));
  } catch (const parkway::RuntimeShutdown&) {
    where->store(2);
  }
}
}  // namespace

// A coroutine still running on a worker after shutdown(deadline) left it
// there and the Runtime was destroyed: a spawn without a runtime stays in
// that worker's pool (as a TaskGroup's does), where the drop state ends
// it. It went to the default runtime before, starting that runtime's
// workers, which outlived the shut-down ones (a program that shut a busy
// server down with a deadline kept two more threads and a ring).
TEST(Coro, SpawnFromATaskOfADestroyedRuntimeStaysInItsPool) {
  pwtest::Watchdog w("Coro.SpawnFromATaskOfADestroyedRuntimeStaysInItsPool", 60);
  std::atomic<bool> started{false}, release{false};
  std::atomic<int> where{-1};
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    parkway::detach(outlives_its_runtime(&started, &release, &where), rt);
    while (!started.load()) std::this_thread::yield();
    const parkway::ShutdownReport rep = rt.shutdown(std::chrono::steady_clock::now() + std::chrono::milliseconds(20));
    EXPECT_GE(rep.running, 1u);
  }  // the worker is left running its task
  release.store(true);
  while (where.load() == -1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_NE(where.load(), 1) << "the child ran on another (the default) runtime";
}
