// test_unobserved.cpp -- a task's exception that nobody will rethrow (its
// Future, TaskGroup or Spawned handle went away without asking for it) is
// reported on stderr, once; one that get()/wait()/co_await rethrew is not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

parkway::Task<int> throws_later(std::atomic<bool>* go) {
  while (!go->load()) std::this_thread::yield();
  throw std::runtime_error("coro-boom");
  co_return 0;
}

}  // namespace

TEST(Unobserved, DroppedFutureReportsItsTasksException) {
  pwtest::Watchdog dog("Unobserved.DroppedFutureReportsItsTasksException", 60);
  testing::internal::CaptureStderr();
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    // Dropped while the task still runs: the task lets go last.
    std::atomic<bool> go{false};
    (void)rt.submit([&go]() -> int {
      while (!go.load()) std::this_thread::yield();
      throw std::runtime_error("boom-running");
    });
    go = true;
    // Dropped after the task finished (wait() observes completion, not the
    // exception): the Future lets go last.
    {
      auto f = rt.submit([] { throw std::logic_error("boom-finished"); });
      f.wait();
    }
    // Taken by get(): rethrown there, not reported.
    auto g = rt.submit([] { throw std::runtime_error("boom-taken"); });
    EXPECT_THROW(g.get(), std::runtime_error);
    // A non-std exception.
    (void)rt.submit([] { throw 42; });
  }  // shutdown: every task above has finished and let go
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "boom-running"), 1) << err;
  EXPECT_EQ(count(err, "boom-finished"), 1) << err;
  EXPECT_EQ(count(err, "boom-taken"), 0) << err;
  EXPECT_EQ(count(err, "not derived from std::exception"), 1) << err;
  EXPECT_EQ(count(err, "Future was dropped without get()"), 3) << err;
}

TEST(Unobserved, TaskGroupWithoutWaitReportsIt) {
  pwtest::Watchdog dog("Unobserved.TaskGroupWithoutWaitReportsIt", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  testing::internal::CaptureStderr();
  rt.run([] {
    parkway::TaskGroup g;
    g.spawn([] { throw std::runtime_error("group-boom"); });
    // no wait(): the destructor waits, and reports what it cannot rethrow
  });
  rt.run([] {
    parkway::TaskGroup g;
    g.spawn([] { throw std::runtime_error("group-waited"); });
    EXPECT_THROW(g.wait(), std::runtime_error);
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "group-boom"), 1) << err;
  EXPECT_EQ(count(err, "group-waited"), 0) << err;
  EXPECT_EQ(count(err, "TaskGroup destroyed without wait()"), 1) << err;
}

TEST(Unobserved, DroppedSpawnedReportsItsCoroutinesException) {
  pwtest::Watchdog dog("Unobserved.DroppedSpawnedReportsItsCoroutinesException", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  testing::internal::CaptureStderr();
  {
    std::atomic<bool> go{false};
    auto s = parkway::spawn(throws_later(&go), rt);
    go = true;
  }  // ~Spawned waits for the child, then reports its exception
  {
    std::atomic<bool> go{true};
    auto s = parkway::spawn(throws_later(&go), rt);
    EXPECT_THROW(s.get(), std::runtime_error);
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "coro-boom"), 1) << err;
  EXPECT_EQ(count(err, "Spawned handle was dropped"), 1) << err;
}

// wait() returned, then another thread spawns into the group, and the
// owner learns of it through an atomic before the group dies: the
// destructor must still wait for that task and report its exception (a
// destructor that trusted the earlier wait() would do neither; slot.md,
// "The finished test and the destructor").
TEST(Unobserved, SpawnAfterWaitIsStillJoinedAndReported) {
  pwtest::Watchdog dog("Unobserved.SpawnAfterWaitIsStillJoinedAndReported", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  testing::internal::CaptureStderr();
  std::atomic<bool> late_ran{false};
  rt.run([&] {
    std::atomic<int> stage{0};
    std::thread other;
    {
      parkway::TaskGroup g;
      g.spawn([] {});
      g.wait();
      other = std::thread([&] {
        while (stage.load() != 1) std::this_thread::yield();
        g.spawn([&late_ran] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          late_ran.store(true);
          throw std::runtime_error("late-boom");
        });
        stage.store(2);
      });
      stage.store(1);
      while (stage.load() != 2) std::this_thread::yield();
    }  // ~TaskGroup: the late task is still sleeping
    EXPECT_TRUE(late_ran.load()) << "the destructor returned before the task spawned after wait() ran";
    other.join();
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "late-boom"), 1) << err;
  EXPECT_EQ(count(err, "TaskGroup destroyed without wait()"), 1) << err;
}
