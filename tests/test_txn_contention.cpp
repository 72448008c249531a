// test_txn_contention.cpp -- what the priority tags buy under adversarial
// contention: every producer on the SAME child, workers taking one task per
// claim (so the summary word and the child's head change all the time),
// and a sched_yield() between reading a guarded word and the CAS on it
// (the Hooks seam of txn/inject_tree.hpp): every transaction behaves as if
// the OS preempted it mid-way, so the threads collide even on 2 busy cores.
// Prints the retries per transaction (max and p99.9) with the tags on and
// off; asserts progress only: every thread commits its whole quota, every
// task arrives exactly once. Timings and retry counts depend on the machine
// and are printed, not asserted.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "txn/inject_tree.hpp"

namespace {

using parkway::detail::Task;
using parkway::detail::txn::BasicInjectTree;
using parkway::detail::txn::TxnCounters;

#if defined(__SANITIZE_THREAD__)
constexpr unsigned kScale = 4;
#elif defined(__SANITIZE_ADDRESS__)
constexpr unsigned kScale = 3;
#else
constexpr unsigned kScale = 1;
#endif

bool noop(Task*) noexcept { return true; }

struct WideWindow {
  static void window() noexcept { sched_yield(); }
};
using Tree = BasicInjectTree<WideWindow>;

struct Tally {
  std::vector<std::uint32_t> retries;  // per transaction
  std::uint64_t waits = 0, preempts = 0, bypasses = 0, commits = 0;
  void add(const TxnCounters& c) {
    retries.push_back(c.retries);
    waits += c.waits;
    preempts += c.preempts;
    bypasses += c.bypasses;
    ++commits;
  }
};

struct Summary {
  std::uint32_t max = 0, p999 = 0;
  double mean = 0;
  std::uint64_t n = 0, waits = 0, preempts = 0, bypasses = 0;
};

Summary summarize(std::vector<Tally>& ts) {
  std::vector<std::uint32_t> all;
  Summary s;
  for (auto& t : ts) {
    all.insert(all.end(), t.retries.begin(), t.retries.end());
    s.waits += t.waits;
    s.preempts += t.preempts;
    s.bypasses += t.bypasses;
  }
  s.n = all.size();
  if (all.empty()) return s;
  double sum = 0;
  for (auto r : all) sum += r;
  s.mean = sum / double(all.size());
  std::sort(all.begin(), all.end());
  s.max = all.back();
  s.p999 = all[std::size_t(0.999 * double(all.size() - 1))];
  return s;
}

struct Outcome {
  Summary push, pop;
};

Outcome run(bool tags, unsigned per_producer, unsigned children) {
  constexpr unsigned kProducers = 8, kWorkers = 2;
  Tree q(tags, children);  // 1: all producers collide on its head; 2: the workers' claims collide too
  std::vector<std::unique_ptr<Task[]>> items;
  for (unsigned p = 0; p < kProducers; ++p) {
    items.emplace_back(new Task[per_producer]);
    for (unsigned i = 0; i < per_producer; ++i) items[p][i].invoke = noop;
  }
  const std::uint64_t total = std::uint64_t(kProducers) * per_producer;
  std::vector<Tally> ptally(kProducers), wtally(kWorkers);
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> th;
  for (unsigned w = 0; w < kWorkers; ++w)
    th.emplace_back([&, w] {
      ready.fetch_add(1);
      while (ready.load() < kProducers + kWorkers) {
      }
      while (delivered.load(std::memory_order_relaxed) < total) {
        std::size_t n = 0;
        TxnCounters c;
        Task* t = q.pop_batch(1, &n, &c);  // one task per claim: maximal churn
        if (t) {
          wtally[w].add(c);
          delivered.fetch_add(n, std::memory_order_relaxed);
        }
      }
    });
  for (unsigned p = 0; p < kProducers; ++p)
    th.emplace_back([&, p] {
      ready.fetch_add(1);
      while (ready.load() < kProducers + kWorkers) {
      }
      for (unsigned i = 0; i < per_producer; ++i) {
        TxnCounters c;
        q.push(&items[p][i], &c);
        ptally[p].add(c);
      }
    });
  for (auto& t : th) t.join();

  // progress: every producer committed its whole quota, the workers
  // together took every task (each worker's loop ended)
  for (unsigned p = 0; p < kProducers; ++p) EXPECT_EQ(ptally[p].commits, per_producer) << "producer " << p;
  EXPECT_EQ(delivered.load(), total);
  EXPECT_FALSE(q.maybe_nonempty());
  return {summarize(ptally), summarize(wtally)};
}

void print(const char* what, unsigned children, bool tags, unsigned per, const Outcome& o) {
  std::printf(
      "[ contention ] %-5s children=%u tags=%-3s per-producer=%-5u push: n=%llu retries max=%u p99.9=%u mean=%.3f "
      "waits=%llu preempts=%llu bypasses=%llu | pop: n=%llu retries max=%u p99.9=%u mean=%.3f\n",
      what, children, tags ? "on" : "off", per, (unsigned long long)o.push.n, o.push.max, o.push.p999, o.push.mean,
      (unsigned long long)o.push.waits, (unsigned long long)o.push.preempts, (unsigned long long)o.push.bypasses,
      (unsigned long long)o.pop.n, o.pop.max, o.pop.p999, o.pop.mean);
  std::fflush(stdout);
}

TEST(TxnContention, OneChildEightProducersTwoWorkers) {
  const unsigned short_run = 1000 / kScale, long_run = 4000 / kScale;
  for (bool tags : {false, true}) {
    Outcome a = run(tags, short_run, 1);
    print("short", 1, tags, short_run, a);
    Outcome b = run(tags, long_run, 1);
    print("long", 1, tags, long_run, b);
  }
}

// Two children: the two workers claim different children at the same
// time, so [W1] and [W3] collide on the summary word as well.
TEST(TxnContention, TwoChildrenWorkersCollideOnTheSummary) {
  const unsigned per = 2000 / kScale;
  for (bool tags : {false, true}) print("long", 2, tags, per, run(tags, per, 2));
}

}  // namespace
