// test_taskgroup.cpp -- spawn/join: results, volume, nesting, exceptions.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

using pwtest::fib;
using pwtest::fib_seq;

// A deep, unbalanced tree: node d has (d % 3) children and depth decreases
// by 1 or 2; returns the node count.
long tree(int depth, unsigned seed) {
  if (depth <= 0) return 1;
  std::atomic<long> count{1};
  parkway::TaskGroup g;
  int kids = int(seed % 4);
  for (int k = 0; k < kids; ++k) {
    unsigned s = seed * 1103515245u + 12345u + unsigned(k);
    int d = depth - 1 - int(s % 2);
    g.spawn([&count, d, s] { count += tree(d, s); });
  }
  g.wait();
  return count.load();
}
long tree_seq(int depth, unsigned seed) {
  if (depth <= 0) return 1;
  long c = 1;
  for (int k = 0; k < int(seed % 4); ++k) {
    unsigned s = seed * 1103515245u + 12345u + unsigned(k);
    c += tree_seq(depth - 1 - int(s % 2), s);
  }
  return c;
}

}  // namespace

TEST(TaskGroup, Fib) {
  pwtest::Watchdog w("TaskGroup.Fib", 120);
  for (unsigned workers : {1u, 2u, 4u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    EXPECT_EQ(rt.run([] { return fib(22); }), fib_seq(22)) << workers << " workers";
  }
}

TEST(TaskGroup, MillionTasks) {
  pwtest::Watchdog w("TaskGroup.MillionTasks", 300);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  const long n = 1000000 / pwtest::kSlow;
  std::atomic<long> ran{0};
  rt.run([&] {
    parkway::TaskGroup g;
    for (long i = 0; i < n; ++i) g.spawn([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    g.wait();
  });
  EXPECT_EQ(ran.load(), n);
  parkway::Stats s = rt.stats();
  EXPECT_GE(s.total.executed, std::uint64_t(n));
  EXPECT_GE(s.total.spawned, std::uint64_t(n));
}

TEST(TaskGroup, UnbalancedTree) {
  pwtest::Watchdog w("TaskGroup.UnbalancedTree", 120);
  parkway::Runtime rt(parkway::Options{.workers = 3});
  for (unsigned seed : {7u, 11u, 2024u}) {
    int depth = pwtest::kSanitized ? 14 : 19;
    EXPECT_EQ(rt.run([&] { return tree(depth, seed); }), tree_seq(depth, seed)) << "seed " << seed;
  }
}

TEST(TaskGroup, NestedGroups) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> leaves{0};
  rt.run([&] {
    parkway::TaskGroup outer;
    for (int i = 0; i < 16; ++i)
      outer.spawn([&] {
        parkway::TaskGroup mid;
        for (int j = 0; j < 16; ++j)
          mid.spawn([&] {
            parkway::TaskGroup inner;
            for (int k = 0; k < 8; ++k) inner.spawn([&] { leaves.fetch_add(1); });
            inner.wait();
          });
        mid.wait();
      });
    outer.wait();
  });
  EXPECT_EQ(leaves.load(), 16 * 16 * 8);
}

TEST(TaskGroup, ExceptionReachesWait) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> ran{0};
  EXPECT_THROW(rt.run([&] {
    parkway::TaskGroup g;
    for (int i = 0; i < 100; ++i)
      g.spawn([&, i] {
        ran.fetch_add(1);
        if (i == 37) throw std::runtime_error("task 37 failed");
      });
    g.wait();
  }),
               std::runtime_error);
  // The throw cancelled the group: tasks that had not started were
  // skipped (test_cancel.cpp has the exact counts).
  EXPECT_GE(ran.load(), 1);
  EXPECT_LE(ran.load(), 100);
}

TEST(TaskGroup, ExceptionMessageAndReuse) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  rt.run([] {
    parkway::TaskGroup g;
    g.spawn([] { throw std::logic_error("first"); });
    try {
      g.wait();
      ADD_FAILURE() << "wait() did not rethrow";
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "first");
    }
    int x = 0;
    g.spawn([&] { x = 5; });
    g.wait();  // reusable, and the old exception is gone
    EXPECT_EQ(x, 5);
  });
}

TEST(TaskGroup, NestedExceptionPropagatesOutward) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto f = rt.submit([] {
    parkway::TaskGroup outer;
    outer.spawn([] {
      parkway::TaskGroup inner;
      inner.spawn([] { throw std::out_of_range("deep"); });
      inner.wait();
    });
    outer.wait();
  });
  EXPECT_THROW(f.get(), std::out_of_range);
}

TEST(TaskGroup, FromOutsideThePool) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  parkway::TaskGroup g(rt);
  std::atomic<int> n{0};
  for (int i = 0; i < 1000; ++i) g.spawn([&] { n.fetch_add(1); });
  g.wait();
  EXPECT_EQ(n.load(), 1000);
}

// A task of the group that waits for it would wait for itself: wait()
// throws std::logic_error instead, from the group's own tasks (a heap
// task and the inline slot's). The group's own wait then returns.
TEST(TaskGroup, AWaitFromInsideItsOwnTaskIsRefused) {
  pwtest::Watchdog w("TaskGroup.AWaitFromInsideItsOwnTaskIsRefused", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  parkway::TaskGroup g(rt);
  std::atomic<int> refused{0};
  auto wait_for_g = [&] {
    try {
      g.wait();
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).find("own tasks") != std::string::npos) refused.fetch_add(1);
    }
  };
  g.spawn(wait_for_g);  // the inline slot's task
  g.spawn(wait_for_g);  // a heap task
  g.wait();
  EXPECT_EQ(refused.load(), 2);
  // Waiting from a task of another group is no self-wait.
  parkway::TaskGroup other(rt);
  std::atomic<bool> done{false};
  g.spawn([&] { done.store(true); });
  other.spawn([&] { g.wait(); });
  other.wait();
  EXPECT_TRUE(done.load());
}

TEST(ParallelFor, CoversEveryIndexOnce) {
  pwtest::Watchdog w("ParallelFor.CoversEveryIndexOnce", 120);
  parkway::Runtime rt(parkway::Options{.workers = 3});
  for (std::size_t size : {0ul, 1ul, 2ul, 3ul, 7ul, 97ul, 1000ul, 4099ul, 100003ul}) {
    for (std::size_t grain : {1ul, 2ul, 3ul, 16ul, 1000ul, 1000000ul}) {
      if (pwtest::kSanitized && size > 5000 && grain < 16) continue;
      std::vector<std::atomic<int>> hits(size + 3);
      for (auto& h : hits) h.store(0);
      parkway::parallel_for(rt, 3, size + 3, grain, [&](std::size_t i) { hits[i].fetch_add(1); });
      for (std::size_t i = 0; i < hits.size(); ++i)
        ASSERT_EQ(hits[i].load(), i < 3 ? 0 : 1) << "size " << size << " grain " << grain << " index " << i;
    }
  }
}

TEST(ParallelFor, InsideTasksAndDefaultRuntime) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<long> sum{0};
  rt.run([&] { parkway::parallel_for(0, 1000, 10, [&](std::size_t i) { sum += long(i); }); });
  EXPECT_EQ(sum.load(), 999L * 1000 / 2);
  sum = 0;
  parkway::parallel_for(0, 100, 7, [&](std::size_t i) { sum += long(i); });  // default runtime
  EXPECT_EQ(sum.load(), 99L * 100 / 2);
}

TEST(ParallelFor, BadArgumentsAreNamed) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  try {
    parkway::parallel_for(rt, 0, 10, 0, [](std::size_t) {});
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("grain"), std::string::npos);
  }
  EXPECT_THROW(parkway::parallel_for(rt, 10, 5, 1, [](std::size_t) {}), std::invalid_argument);
}

// A negative begin, end or grain (a signed integer) is refused, naming
// it. Converted to size_t, an end of -1 was a loop of 2^64 - 1 calls
// (here f stops it after 1000) and a grain of -1 one piece of the whole
// range.
TEST(ParallelFor, NegativeArgumentsAreNamed) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  std::atomic<int> calls{0};
  auto f = [&](std::size_t) {
    if (calls.fetch_add(1) >= 1000) throw std::runtime_error("ran past any range the caller meant");
  };
  auto expect_named = [](auto call, const char* name) {
    try {
      call();
      ADD_FAILURE() << name << ": no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  };
  const int minus_one = -1;
  const long minus_five = -5;
  expect_named([&] { parkway::parallel_for(rt, 0, minus_one, 1, f); }, "end");
  expect_named([&] { parkway::parallel_for(rt, minus_five, 10, 1, f); }, "begin");
  expect_named([&] { parkway::parallel_for(rt, 0, 10, minus_one, f); }, "grain");
  expect_named([&] { parkway::parallel_for(0, minus_one, 1, f); }, "end");  // the default runtime
  EXPECT_EQ(calls.load(), 0);
  parkway::parallel_for(rt, 0, 10, 3, f);  // signed and non-negative: as before
  EXPECT_EQ(calls.load(), 10);
}

TEST(ParallelFor, ExceptionPropagates) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  EXPECT_THROW(parkway::parallel_for(rt, 0, 1000, 1,
                                     [](std::size_t i) {
                                       if (i == 500) throw std::runtime_error("index 500");
                                     }),
               std::runtime_error);
}

// Several pieces throw: one exception leaves parallel_for, the loop stops
// after the first, and nothing is reported on stderr as a lost exception
// (no exception crosses the loop's own groups).
TEST(ParallelFor, ManyThrowingPiecesRethrowOneAndReportNone) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    int caught = 0;
    testing::internal::CaptureStderr();
    try {
      parkway::parallel_for(rt, 0, 1000, 1, [&](std::size_t i) {
        ran.fetch_add(1);
        if (i % 100 == 0) throw std::runtime_error("index " + std::to_string(i));
      });
    } catch (const std::runtime_error&) {
      ++caught;
    }
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(caught, 1);
    EXPECT_GE(ran.load(), 1);
    EXPECT_LE(ran.load(), 1000);
    EXPECT_EQ(err.find("lost"), std::string::npos) << err;
  }
}

// parallel_for at the top of size_t's range with odd grains (no
// begin + grain that overflows), an empty range, and bad arguments.
TEST(ParallelFor, RangesAtTheTopOfSizeT) {
  pwtest::Watchdog w("ParallelFor.RangesAtTheTopOfSizeT", 30);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  for (std::size_t grain : {std::size_t(1), std::size_t(3), std::size_t(7), kMax / 2, kMax - 1, kMax}) {
    std::atomic<std::size_t> n{0}, sum_low{0};
    parkway::parallel_for(rt, kMax - 100, kMax, grain, [&](std::size_t i) {
      n.fetch_add(1);
      sum_low.fetch_add(kMax - i);
    });
    EXPECT_EQ(n.load(), 100u) << "grain " << grain;
    EXPECT_EQ(sum_low.load(), 5050u) << "grain " << grain;
  }
  std::atomic<int> calls{0};
  parkway::parallel_for(rt, 5, 5, 1, [&](std::size_t) { calls++; });
  EXPECT_EQ(calls.load(), 0);
  EXPECT_THROW(parkway::parallel_for(rt, 6, 5, 1, [&](std::size_t) { calls++; }), std::invalid_argument);
  EXPECT_THROW(parkway::parallel_for(rt, 0, 5, 0, [&](std::size_t) { calls++; }), std::invalid_argument);
}
