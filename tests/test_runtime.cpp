// test_runtime.cpp -- Runtime: options, submit/run, outside producers,
// shutdown with work in flight, stats.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <memory>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {
std::string invalid_message(parkway::Options o) {
  try {
    parkway::Runtime rt(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Options, InvalidOptionsAreNamed) {
  EXPECT_NE(invalid_message(parkway::Options{.workers = 0}).find("workers"), std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 4097}).find("workers"), std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .search_rounds = 0}).find("search_rounds"),
            std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .name = "much-too-long"}).find("name"),
            std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .name = ""}).find("name"), std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .stack_size = 4096}).find("stack_size"),
            std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .stack_size = parkway::kMaxStackSize + 1}).find("stack_size"),
            std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .worker_slice_us = 50}).find("worker_slice_us"),
            std::string::npos);
  EXPECT_NE(invalid_message(parkway::Options{.workers = 1, .worker_slice_us = 100001}).find("worker_slice_us"),
            std::string::npos);
  ::setenv("PARKWAY_WORKER_SLICE_US", "fast", 1);
  const std::string m = invalid_message(parkway::Options{.workers = 1});
  ::unsetenv("PARKWAY_WORKER_SLICE_US");
  EXPECT_NE(m.find("PARKWAY_WORKER_SLICE_US"), std::string::npos) << m;
  EXPECT_NE(m.find("fast"), std::string::npos) << m;
  // Only decimal digits: no sign (strtoul negates what follows a '-', so
  // this one would read as 300), no blanks.
  for (const char* bad : {"-18446744073709551316", "-0", "+300", " 300", "300 "}) {
    ::setenv("PARKWAY_WORKER_SLICE_US", bad, 1);
    const std::string b = invalid_message(parkway::Options{.workers = 1});
    ::unsetenv("PARKWAY_WORKER_SLICE_US");
    EXPECT_NE(b.find("PARKWAY_WORKER_SLICE_US"), std::string::npos) << "\"" << bad << "\" was accepted";
  }
}


TEST(Options, DefaultIsOnlineCpus) {
  parkway::Runtime rt;
  EXPECT_EQ(rt.workers(), parkway::online_cpus());
  EXPECT_GE(rt.workers(), 1u);
}

TEST(Runtime, RunReturnsAndRethrows) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  EXPECT_EQ(rt.run([] { return 6 * 7; }), 42);
  EXPECT_EQ(rt.run([] { return std::string("hi"); }), "hi");
  EXPECT_THROW(rt.run([]() -> int { throw std::domain_error("x"); }), std::domain_error);
  int side = 0;
  rt.run([&] { side = 1; });
  EXPECT_EQ(side, 1);
  // run() on one of the runtime's own workers runs inline instead of deadlocking.
  EXPECT_EQ(rt.run([&] { return rt.run([] { return 3; }); }), 3);
}

// run() copies or moves the callable into its own, like submit(), on a
// worker too (it invoked the caller's object in place there: a mutable
// lambda's state changed only on workers, and run(std::move(x)) left x
// intact).
namespace {
struct Holder {
  std::unique_ptr<int> p = std::make_unique<int>(7);
  int operator()() const { return *p; }
};
}  // namespace

TEST(Runtime, RunTakesItsOwnCallableOnAWorkerToo) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto counts = [n = 0]() mutable { return ++n; };
  EXPECT_EQ(rt.run(counts), 1);  // from outside: a copy ran
  EXPECT_EQ(rt.run([&] { return rt.run(counts); }), 1);  // on the worker: a copy too
  EXPECT_EQ(counts(), 1) << "run() on a worker ran the caller's lambda in place";
  Holder outside, inside;
  EXPECT_EQ(rt.run(std::move(outside)), 7);
  EXPECT_EQ(rt.run([&] { return rt.run(std::move(inside)); }), 7);
  EXPECT_EQ(outside.p, nullptr);  // moved into the task
  EXPECT_EQ(inside.p, nullptr) << "run(std::move(x)) on a worker left x intact";
  const auto cm = [n = 0]() mutable { return ++n; };  // const, mutable: submit() takes it, so must run()
  EXPECT_EQ(rt.run([&] { return rt.run(cm); }), 1);
}

TEST(Runtime, RunsOnWorkers) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  EXPECT_EQ(parkway::Runtime::current(), nullptr);
  EXPECT_EQ(rt.run([] { return parkway::Runtime::current(); }), &rt);
  int idx = rt.run([] { return parkway::Runtime::current_worker_index(); });
  EXPECT_TRUE(idx == 0 || idx == 1);
}

TEST(Runtime, FutureApi) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto f = rt.submit([] { return 5; });
  f.wait();
  EXPECT_TRUE(f.ready());
  EXPECT_EQ(f.get(), 5);
  EXPECT_FALSE(f.valid());
  EXPECT_THROW(f.get(), std::logic_error);
  // Dropping a future does not block and the task still runs.
  std::atomic<bool> ran{false};
  std::atomic<bool> release{false};
  {
    auto g = rt.submit([&] {
      while (!release.load()) std::this_thread::sleep_for(1ms);
      ran = true;
    });
  }
  release = true;
  rt.shutdown();
  EXPECT_TRUE(ran.load());
}

TEST(Runtime, EightOutsideProducers) {
  pwtest::Watchdog w("Runtime.EightOutsideProducers", 300);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  const int per = 50000 / pwtest::kSlow;
  std::atomic<long> sum{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 8; ++p)
    producers.emplace_back([&, p] {
      std::vector<parkway::Future<int>> keep;
      for (int i = 0; i < per; ++i) {
        if (i % 10 == 0) {
          keep.push_back(rt.submit([p] { return p; }));
        } else {
          rt.submit([&sum] { sum.fetch_add(1, std::memory_order_relaxed); });  // dropped handle
        }
      }
      for (auto& f : keep) EXPECT_EQ(f.get(), p);
    });
  for (auto& t : producers) t.join();
  rt.shutdown();
  EXPECT_EQ(sum.load(), 8L * (per - per / 10));
  EXPECT_EQ(rt.stats().submitted, std::uint64_t(8 * per));
}

TEST(Runtime, ShutdownRunsAllPendingWork) {
  pwtest::Watchdog w("Runtime.ShutdownRunsAllPendingWork", 120);
  std::atomic<int> ran{0};
  std::atomic<int> nested{0};
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    for (int i = 0; i < 2000; ++i)
      rt.submit([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        ran.fetch_add(1);
      });
    // A task that submits more work while the runtime is shutting down.
    rt.submit([&] {
      std::this_thread::sleep_for(20ms);
      for (int i = 0; i < 100; ++i) parkway::Runtime::current()->submit([&] { nested.fetch_add(1); });
    });
  }  // ~Runtime: finishes everything accepted
  EXPECT_EQ(ran.load(), 2000);
  EXPECT_EQ(nested.load(), 100);
}

TEST(Runtime, SubmitAfterShutdownFailsClearly) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  rt.shutdown();
  rt.shutdown();  // idempotent
  try {
    rt.submit([] {});
    ADD_FAILURE() << "submit after shutdown was accepted";
  } catch (const parkway::RuntimeShutdown& e) {
    EXPECT_NE(std::string(e.what()).find("shutting down"), std::string::npos);
  }
  parkway::TaskGroup g(rt);
  EXPECT_THROW(g.spawn([] {}), parkway::RuntimeShutdown);
  g.wait();  // the refused spawn left nothing pending
}

TEST(Runtime, ShutdownRacingSubmittersLosesNothing) {
  pwtest::Watchdog w("Runtime.ShutdownRacingSubmittersLosesNothing", 300);
  for (int round = 0; round < 20 / (pwtest::kSlow > 1 ? 4 : 1); ++round) {
    std::atomic<long> accepted{0}, ran{0};
    {
      auto rt = std::make_unique<parkway::Runtime>(parkway::Options{.workers = 2});
      std::vector<std::thread> ps;
      for (int p = 0; p < 4; ++p)
        ps.emplace_back([&] {
          for (;;) {
            try {
              rt->submit([&] { ran.fetch_add(1); });
              accepted.fetch_add(1);
            } catch (const parkway::RuntimeShutdown&) {
              return;
            }
          }
        });
      std::this_thread::sleep_for(2ms);
      rt->shutdown();
      for (auto& t : ps) t.join();
    }
    EXPECT_EQ(ran.load(), accepted.load()) << "round " << round;
  }
}

TEST(Runtime, StatsCountWork) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  rt.run([&] {
    parkway::TaskGroup g;
    for (int i = 0; i < 1000; ++i) g.spawn([] {});
    g.wait();
    rt.submit([] {}).get();  // from inside the pool: a spawn, not a submission
  });
  parkway::Stats s = rt.stats();
  ASSERT_EQ(s.workers.size(), 2u);
  parkway::WorkerStats sum;
  for (auto& w : s.workers) sum += w;
  EXPECT_EQ(sum.executed, s.total.executed);
  EXPECT_EQ(s.total.spawned, 1001u);
  EXPECT_EQ(s.submitted, 1u);  // the run() from this thread
  EXPECT_EQ(s.total.executed, s.total.spawned + s.submitted);  // every task counted once
}

// A task that finishes while the thread waiting for it sleeps wakes that
// thread, and the worker that ran it counts the wake-up in waiter_wakeups
// (it was counted nowhere: parks outnumbered wakeups in every trace).
// Two sleepers: a worker in a helping wait whose task another worker
// took, and a thread outside the pool in Future::get.
TEST(Runtime, StatsCountWaiterWakeups) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto waker_count = [&] {
    parkway::Stats s = rt.stats();
    std::uint64_t sum = 0;
    for (auto& w : s.workers) sum += w.waiter_wakeups;
    EXPECT_EQ(sum, s.total.waiter_wakeups);
    return s.total.waiter_wakeups;
  };
  const std::uint64_t before = waker_count();
  rt.run([] {
    parkway::TaskGroup g;
    std::atomic<bool> started{false};
    g.spawn([&] {
      started.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    });
    while (!started.load()) std::this_thread::yield();  // the other worker took it
    g.wait();  // nothing to help with: this worker sleeps until the task ends
  });
  rt.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }).get();
  // Three wake-ups: the worker in g.wait(), and this thread in run() and in
  // get(). A waker counts after its FUTEX_WAKE, so the woken thread may
  // look before the count is there: poll for it.
  std::uint64_t woken = 0;
  for (int i = 0; i < 200 && (woken = waker_count() - before) < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(woken, 3u) << "a sleeping waiter's wake-up was not counted";
}

TEST(Runtime, ConcurrentShutdownCalls) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) rt.submit([&] { ran.fetch_add(1); });
  std::thread a([&] { rt.shutdown(); });
  std::thread b([&] { rt.shutdown(); });
  a.join();
  b.join();
  EXPECT_EQ(ran.load(), 100);
}

TEST(Runtime, ShutdownFromAWorkerIsRefused) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  EXPECT_THROW(rt.run([&] { rt.shutdown(); }), std::logic_error);
}

// Options::name is the caller's string; the runtime keeps its own copy, so
// the caller may reuse or free it once the constructor returned (workers
// name themselves later, possibly after the caller changed its buffer).
TEST(Runtime, KeepsItsOwnCopyOfTheName) {
  char buf[16] = "abc";
  parkway::Runtime rt(parkway::Options{.workers = 2, .name = buf});
  std::memset(buf, 'X', 8);  // the caller reuses its buffer
  buf[8] = 0;
  EXPECT_STREQ(rt.options().name, "abc");
  std::string thread_name = rt.run([] {
    char n[16] = {};
    pthread_getname_np(pthread_self(), n, sizeof n);
    return std::string(n);
  });
  EXPECT_EQ(thread_name.rfind("abc-w", 0), 0u) << thread_name;
}

// A worker waiting inside a task (Future::get helps, then sleeps) for a
// task that the other worker runs must stay asleep while the runtime shuts
// down. A parking recheck that treated the shutdown flag as work to look
// for (only the main loop can leave on it) would make the waiter search
// and re-park (a membarrier each round) for as long as the awaited task
// ran, a full CPU.
TEST(Runtime, HelpingWaitSleepsThroughShutdown) {
  pwtest::Watchdog w("Runtime.HelpingWaitSleepsThroughShutdown", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2, .name = "shutw"});
  std::atomic<bool> started{false};
  rt.submit([&] {
    auto g = parkway::Runtime::current()->submit([&] {
      started.store(true);
      std::this_thread::sleep_for(400ms);
    });
    while (!started.load()) {  // the other worker takes it
    }
    g.get();
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);  // the waiter has parked
  const double cpu0 = pwtest::process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  rt.shutdown();  // returns once both tasks are done
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = pwtest::process_cpu_seconds() - cpu0;
  std::printf("shutdown while a worker waits: %.3f s wall, %.3f s CPU\n", wall, cpu);
  EXPECT_GT(wall, 0.2);  // the awaited task was still running
  EXPECT_LT(cpu, 0.25 * wall);
}

// A closure that captures an over-aligned value is stored aligned, whether
// it goes through submit() or a TaskGroup's heap path (malloc gives only
// 16 bytes, less than such a closure needs).
TEST(Runtime, OverAlignedClosuresAreAligned) {
  struct alignas(64) Line {
    long v[8];
  };
  auto misaligned = [](const void* p) {
    std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
    asm volatile("" : "+r"(a));  // not folded from the type's alignment
    return a % 64 != 0;
  };
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> bad{0}, ran{0};
  for (int i = 0; i < 64; ++i) {
    Line l{};
    l.v[0] = i;
    bad += rt.submit([l, &misaligned] { return int(misaligned(&l)) + int(l.v[0] < 0); }).get();
    rt.run([&] {
      parkway::TaskGroup g;
      for (int k = 0; k < 3; ++k)
        g.spawn([l, &bad, &ran, &misaligned] {
          bad += int(misaligned(&l));
          ran += int(l.v[0] >= 0);
        });
      g.wait();
    });
  }
  EXPECT_EQ(ran.load(), 64 * 3);
  EXPECT_EQ(bad.load(), 0);
}

TEST(Runtime, WorkerOfOneRuntimeWaitsOnAnother) {
  pwtest::Watchdog w("Runtime.WorkerOfOneRuntimeWaitsOnAnother", 60);
  parkway::Runtime a(parkway::Options{.workers = 2, .name = "ra"});
  parkway::Runtime b(parkway::Options{.workers = 2, .name = "rb"});
  long total = a.run([&] {
    long s = 0;
    for (int i = 0; i < 200; ++i) s += b.run([i] {
      std::this_thread::sleep_for(std::chrono::microseconds(i % 3 * 50));
      return long(i);
    });
    return s;
  });
  EXPECT_EQ(total, 199L * 200 / 2);
}

// A Runtime destroyed right after it was made, in a process where no
// thread has a park word yet: a shutdown that notified park word 0 for a
// worker that had not published its own would crash (the word's storage
// does not exist yet). Only a fresh process shows it, so the test runs the
// disabled test below in a child process of this binary, five times.
TEST(Runtime, DISABLED_ConstructDestroyInFreshProcess) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
}

TEST(Runtime, DestroyRightAfterConstructionInFreshProcess) {
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(pwtest::run_child_test("Runtime.DISABLED_ConstructDestroyInFreshProcess"), 0) << "child run " << i << " failed";
}

namespace {
int threads_in_this_process() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "Threads: %d", &n) == 1) break;
  std::fclose(f);
  return n;
}
}  // namespace

// Run in a child process: with RLIMIT_NPROC at 3 (as an unprivileged user;
// root is not held to it) the runtime can start at most two of its eight
// workers. Exit status 42: the constructor threw std::system_error naming
// parkway and the thread, and stopped the workers it had started.
TEST(Runtime, DISABLED_ThreadCreationFailureChild) {
  if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) std::_Exit(3);
  rlimit rl{3, 3};
  if (setrlimit(RLIMIT_NPROC, &rl) != 0) std::_Exit(4);
  try {
    parkway::Runtime rt(parkway::Options{.workers = 8, .name = "nproc"});
    std::_Exit(5);  // all eight started: the limit did not hold
  } catch (const std::system_error& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "what(): %s\n", what.c_str());
    if (what.find("parkway: cannot create worker thread nproc-w") != 0) std::_Exit(6);
    if (what.find("workers had started; they were stopped") == std::string::npos) std::_Exit(7);
    if (e.code().value() != EAGAIN) std::_Exit(8);
    if (threads_in_this_process() > 2) std::_Exit(9);  // the started workers were joined (a sanitizer may keep one of its own)
    std::_Exit(42);
  }
}

// A worker thread that cannot be created gives an error that says it is
// parkway's and which thread (it was a bare "Resource temporarily
// unavailable"), after the workers already started were stopped.
TEST(Runtime, ThreadCreationFailureNamesTheThread) {
  EXPECT_EQ(pwtest::run_child_test("Runtime.DISABLED_ThreadCreationFailureChild"), 42);
}

namespace {
// Destroyed at exit after the default runtime's exit-time shutdown (it was
// made before the runtime's first use): a spawn from here must fail with
// RuntimeShutdown, not reach a freed runtime.
struct SpawnsAtExit {
  ~SpawnsAtExit() {
    try {
      parkway::TaskGroup g;
      g.spawn([] {});
      g.wait();
      std::_Exit(40);  // ran: the runtime was still open (not what we expect)
    } catch (const parkway::RuntimeShutdown&) {
      std::_Exit(42);  // the clear error
    }
  }
};
}  // namespace

TEST(DefaultRuntime, DISABLED_SpawnFromAStaticDestructorAfterExit) {
  static SpawnsAtExit probe;  // made before the default runtime
  long r = parkway::Runtime::default_runtime().run([] { return 7L; });
  EXPECT_EQ(r, 7L);
}

TEST(DefaultRuntime, UsedAfterItsExitShutdownFailsClearly) {
  EXPECT_EQ(pwtest::run_child_test("DefaultRuntime.DISABLED_SpawnFromAStaticDestructorAfterExit"), 42);
}

TEST(DefaultRuntime, DISABLED_ExitFromATask) {
  parkway::Runtime::default_runtime().run([] {
    std::exit(43);
    return 0;
  });
}

// exit() called from a task of the default runtime ends the process with
// that status (its exit-time shutdown runs on one of its own workers and
// must not throw from a destructor, which would abort).
TEST(DefaultRuntime, ExitFromATaskEndsTheProcess) {
  EXPECT_EQ(pwtest::run_child_test("DefaultRuntime.DISABLED_ExitFromATask"), 43);
}

// The last owner of a Runtime is one of its own tasks: the destructor runs
// on a worker of that runtime and cannot wait for itself. It must return
// (not terminate the process), every task accepted before it must still
// run, and Runtime::current() is nullptr on that worker afterwards.
TEST(Runtime, DestroyedOnItsOwnWorker) {
  pwtest::Watchdog w("Runtime.DestroyedOnItsOwnWorker", 60);
  for (int round = 0; round < 20; ++round) {
    auto rt = std::make_shared<parkway::Runtime>(parkway::Options{.workers = 2});
    auto ran = std::make_shared<std::atomic<int>>(0);
    std::atomic<bool> destroyed{false};
    std::atomic<bool> current_after{true};
    // Accepted before the destruction, most still queued then: they must
    // all run.
    for (int i = 0; i < 50; ++i)
      (void)rt->submit([ran] {
        std::this_thread::sleep_for(200us);
        ran->fetch_add(1);
      });
    parkway::Runtime* raw = rt.get();
    (void)raw->submit([holder = std::move(rt), &destroyed, &current_after]() mutable {
      holder.reset();  // the last owner: ~Runtime on this worker
      current_after.store(parkway::Runtime::current() != nullptr);
      destroyed.store(true);
    });
    while (!destroyed.load()) std::this_thread::yield();
    EXPECT_FALSE(current_after.load()) << "Runtime::current() still names the destroyed runtime";
    while (ran->load() != 50) std::this_thread::yield();  // the watchdog fails a lost task
  }
}

// After the destruction on its own worker, a group made there binds to the
// abandoned runtime (its implementation, still allocated), so a spawn into
// it from a worker of another runtime is refused with RuntimeShutdown
// instead of reading the freed Runtime object (which ASAN reports as a
// heap-use-after-free); the task spawned on the abandoned worker still runs.
TEST(Runtime, GroupMadeAfterOwnWorkerDestructionIsRefusedFromOutside) {
  pwtest::Watchdog w("Runtime.GroupMadeAfterOwnWorkerDestructionIsRefusedFromOutside", 60);
  parkway::Runtime other(parkway::Options{.workers = 1});
  auto rt = std::make_shared<parkway::Runtime>(parkway::Options{.workers = 2});
  std::atomic<int> ran{0}, refused{0};
  std::atomic<bool> done{false};
  parkway::Runtime* raw = rt.get();
  (void)raw->submit([holder = std::move(rt), &other, &ran, &refused, &done]() mutable {
    holder.reset();
    parkway::TaskGroup g;
    g.spawn([&ran] { ran.fetch_add(1); });
    try {
      other.run([&] { g.spawn([&ran] { ran.fetch_add(1); }); });
    } catch (const parkway::RuntimeShutdown&) {
      refused.fetch_add(1);
    }
    g.wait();
    done.store(true);
  });
  while (!done.load()) std::this_thread::yield();
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(ran.load(), 1);
}

// parallel_for without a runtime, on a worker of a runtime destroyed on
// its own worker, runs in that worker's pool as a TaskGroup's spawns do
// (Runtime::current() is nullptr there). It ran on the default runtime
// before, starting that runtime's workers: every call saw one.
TEST(Runtime, ParallelForAfterOwnWorkerDestructionRunsInThatPool) {
  pwtest::Watchdog w("Runtime.ParallelForAfterOwnWorkerDestructionRunsInThatPool", 60);
  auto rt = std::make_shared<parkway::Runtime>(parkway::Options{.workers = 2});
  std::atomic<int> calls{0}, on_a_live_runtime{0};
  std::atomic<bool> done{false};
  parkway::Runtime* raw = rt.get();
  (void)raw->submit([holder = std::move(rt), &calls, &on_a_live_runtime, &done]() mutable {
    holder.reset();
    parkway::parallel_for(0, 1000, 1, [&](std::size_t) {
      calls.fetch_add(1);
      if (parkway::Runtime::current() != nullptr) on_a_live_runtime.fetch_add(1);
    });
    done.store(true);
  });
  while (!done.load()) std::this_thread::yield();
  EXPECT_EQ(calls.load(), 1000);
  EXPECT_EQ(on_a_live_runtime.load(), 0) << "calls ran on another (the default) runtime";
}

// The same call in a task that shutdown(deadline) left running, once the
// Runtime is destroyed: the shutdown drops its pieces and the call throws
// RuntimeShutdown (docs/guide.md, "Shutdown with a deadline"). It ran the
// whole loop on the default runtime before.
TEST(Runtime, ParallelForInATaskLeftRunningByABoundedShutdownThrows) {
  pwtest::Watchdog w("Runtime.ParallelForInATaskLeftRunningByABoundedShutdownThrows", 60);
  std::atomic<bool> started{false}, destroyed{false}, done{false};
  std::atomic<int> outcome{0};  // 1: returned, 2: RuntimeShutdown, 3: another exception
  std::atomic<int> on_a_live_runtime{0};
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    (void)rt.submit([&] {
      started.store(true);
      while (!destroyed.load()) std::this_thread::sleep_for(1ms);
      try {
        parkway::parallel_for(0, 1000, 1, [&](std::size_t) {
          if (parkway::Runtime::current() != nullptr) on_a_live_runtime.fetch_add(1);
        });
        outcome.store(1);
      } catch (const parkway::RuntimeShutdown&) {
        outcome.store(2);
      } catch (...) {
        outcome.store(3);
      }
      done.store(true);
    });
    while (!started.load()) std::this_thread::yield();
    const parkway::ShutdownReport rep = rt.shutdown(std::chrono::steady_clock::now() + 10ms);
    EXPECT_GE(rep.running, 1u);
  }  // the worker is left running its task
  destroyed.store(true);
  while (!done.load()) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(outcome.load(), 2) << "1: the loop returned normally, 3: another exception";
  EXPECT_EQ(on_a_live_runtime.load(), 0) << "calls ran on another (the default) runtime";
}

// A runtime made in the destroying task often gets the destroyed one's
// address. A group bound to the new runtime must send its tasks there, not
// onto the abandoned worker it was spawned from (50 of 50 rounds went to
// the abandoned worker when groups named runtimes by the Runtime object).
TEST(Runtime, NewRuntimeAtADestroyedOnesAddressRunsItsGroupsTasks) {
  pwtest::Watchdog w("Runtime.NewRuntimeAtADestroyedOnesAddressRunsItsGroupsTasks", 60);
  int wrong = 0;
  for (int round = 0; round < 20; ++round) {
    auto a = std::make_shared<parkway::Runtime>(parkway::Options{.workers = 2});
    std::atomic<bool> done{false};
    parkway::Runtime* raw = a.get();
    (void)raw->submit([holder = std::move(a), &done, &wrong]() mutable {
      holder.reset();
      auto c = std::make_shared<parkway::Runtime>(parkway::Options{.workers = 1});
      parkway::Runtime* where = nullptr;
      {
        parkway::TaskGroup g(*c);
        g.spawn([&where] { where = parkway::Runtime::current(); });
        g.wait();
      }
      if (where != c.get()) ++wrong;
      c.reset();
      done.store(true);
    });
    while (!done.load()) std::this_thread::yield();
  }
  EXPECT_EQ(wrong, 0);
}
