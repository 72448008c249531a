// test_deque.cpp -- Chase-Lev deque: every pushed task is taken exactly
// once under concurrent pop / steal / steal_batch, across growth.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "deque.hpp"
#include "test_util.hpp"

using parkway::detail::Deque;
using parkway::detail::Task;

namespace {

void noop(Task*) noexcept {}

// Owner pushes `total` tasks (ids 0..total-1) in random bursts and pops
// randomly; `thieves` threads steal (single or batch). Each id must be
// seen exactly once.
void run_exactly_once(std::uint64_t seed, std::size_t total, int thieves, bool batch) {
  std::vector<Task> tasks(total);
  for (auto& t : tasks) t.invoke = &noop;
  std::vector<std::atomic<std::uint8_t>> seen(total);
  for (auto& s : seen) s.store(0);
  std::atomic<std::size_t> taken{0};
  std::atomic<bool> done{false};
  Deque victim(2);  // tiny start: forces many grow() calls

  auto mark = [&](Task* t) {
    std::size_t id = std::size_t(t - tasks.data());
    ASSERT_LT(id, total);
    ASSERT_EQ(seen[id].fetch_add(1), 0u) << "task " << id << " taken twice";
    taken.fetch_add(1);
  };

  std::vector<std::thread> ths;
  for (int k = 0; k < thieves; ++k) {
    ths.emplace_back([&, k] {
      Deque mine;  // steal_batch moves extra tasks here; drain them ourselves
      std::mt19937_64 rng(seed * 31 + k);
      while (!done.load(std::memory_order_acquire) || victim.size_hint() > 0) {
        if (batch && (rng() & 1)) {
          std::size_t n;
          bool lost;
          Task* t = mine.steal_batch(victim, 1 + rng() % 16, &n, &lost);
          if (t) mark(t);
          while (Task* x = mine.pop()) mark(x);
        } else {
          Task* t;
          if (victim.steal(&t) == Deque::Steal::kTaken) mark(t);
        }
      }
    });
  }
  std::mt19937_64 rng(seed);
  std::size_t next = 0;
  while (next < total) {
    std::size_t burst = 1 + rng() % 64;
    for (std::size_t i = 0; i < burst && next < total; ++i) victim.push(&tasks[next++]);
    std::size_t pops = rng() % 48;
    for (std::size_t i = 0; i < pops; ++i)
      if (Task* t = victim.pop()) mark(t);
  }
  while (Task* t = victim.pop()) mark(t);
  done.store(true, std::memory_order_release);
  for (auto& t : ths) t.join();
  EXPECT_EQ(taken.load(), total);
  for (std::size_t i = 0; i < total; ++i) ASSERT_EQ(seen[i].load(), 1u) << "task " << i;
}

}  // namespace

TEST(Deque, SingleThreadLifo) {
  Deque d(1);
  std::vector<Task> t(100);
  for (auto& x : t) d.push(&x);
  EXPECT_EQ(d.size_hint(), 100);
  for (int i = 99; i >= 0; --i) EXPECT_EQ(d.pop(), &t[std::size_t(i)]);
  EXPECT_EQ(d.pop(), nullptr);
  Task* out;
  EXPECT_EQ(d.steal(&out), Deque::Steal::kEmpty);
}

TEST(Deque, StealIsFifo) {
  Deque d;
  std::vector<Task> t(10);
  for (auto& x : t) d.push(&x);
  for (int i = 0; i < 10; ++i) {
    Task* out = nullptr;
    ASSERT_EQ(d.steal(&out), Deque::Steal::kTaken);
    EXPECT_EQ(out, &t[std::size_t(i)]);
  }
}

TEST(Deque, StealBatchTakesAboutHalf) {
  Deque victim, thief;
  std::vector<Task> t(40);
  for (auto& x : t) victim.push(&x);
  std::size_t n;
  bool lost;
  Task* first = thief.steal_batch(victim, 32, &n, &lost);
  EXPECT_EQ(first, &t[0]);
  EXPECT_EQ(n, 20u);
  EXPECT_EQ(thief.size_hint(), 19);
  EXPECT_EQ(victim.size_hint(), 20);
}

TEST(Deque, ExactlyOnceOneThief) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) run_exactly_once(seed, 400000 / pwtest::kSlow, 1, false);
}

TEST(Deque, ExactlyOnceManyThievesWithBatches) {
  pwtest::Watchdog w("Deque.ExactlyOnceManyThievesWithBatches", 300);
  for (std::uint64_t seed = 1; seed <= 8; ++seed) run_exactly_once(seed, 500000 / pwtest::kSlow, 3, true);
}
