// test_txn_contention.cpp -- what the priority tags buy under adversarial
// contention: every producer on the SAME child, workers taking one task per
// claim (so the summary word and the child's head change all the time),
// and a sched_yield() between reading a guarded word and the CAS on it
// (the Hooks seam of txn/inject_tree.hpp): every transaction behaves as if
// the OS preempted it mid-way, so the threads collide even on 2 busy cores.
// Prints the retries per transaction (max and p99.9) with the tags on and
// off; asserts progress only: every thread commits its whole quota, every
// task arrives exactly once. Timings and retry counts depend on the machine
// and are printed, not asserted. That the tree uses the tags at all is
// asserted by forcing one conflict step by step (FailedPushTagsTheChild,
// FailedClaimTagsTheParent).
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
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

// A thread that pushes one task into a tree of type Q and stays alive
// (keeping its own child) until it is destroyed.
template <class Q>
struct StayingSubmitter {
  std::atomic<bool> pushed{false}, leave{false};
  TxnCounters c;
  std::thread th;
  StayingSubmitter(Q& q, Task* t) {
    th = std::thread([this, &q, t] {
      q.push(t, &c);
      pushed.store(true);
      while (!leave.load()) std::this_thread::yield();
    });
    while (!pushed.load()) std::this_thread::yield();
  }
  ~StayingSubmitter() {
    leave.store(true);
    th.join();
  }
};

// The tree must use the tags, not just commit: a conflict forced step by
// step (no timing), then a third thread that needs the same word. With the
// tags on, the transaction whose CAS failed holds the word's tag
// (TagAfterFail), so the third thread's gate finds it and waits (then
// bypasses after the 1 ms patience, as the holder is parked in the hook).
// Without [P1g] or [P1]'s after_fail() (the first test), or [P2g] or
// [W1]'s after_fail() (the second), nobody would wait; the tests after
// them cover the other sites. With the tags off nobody waits either.
namespace forced {
thread_local bool hooked = false;  // only this thread runs the steps below
thread_local int calls = 0;
std::function<void()> at_first, at_second;  // at the hooked thread's 1st / 2nd window()
struct Hooks {
  static void window() noexcept {
    if (!hooked) return;
    ++calls;
    if (calls == 1 && at_first) at_first();
    if (calls == 2 && at_second) at_second();
  }
};
using Tree = BasicInjectTree<Hooks>;
using Submitter = StayingSubmitter<Tree>;
}  // namespace forced

// [P1] fails, so the producer tags the child; a second producer on the
// same child then waits at [P1g].
TEST(TxnContention, FailedPushTagsTheChild) {
  for (bool tags : {true, false}) {
    forced::Tree q(tags, 1);  // one child: every producer's head
    Task a, x, b;
    a.invoke = x.invoke = b.invoke = noop;
    std::unique_ptr<forced::Submitter> sx, sb;
    forced::at_first = [&] { sx = std::make_unique<forced::Submitter>(q, &x); };   // moves the head: [P1] fails
    forced::at_second = [&] { sb = std::make_unique<forced::Submitter>(q, &b); };  // needs the child's tag
    TxnCounters ca;
    std::thread([&] {
      forced::hooked = true;
      q.push(&a, &ca);
    }).join();
    forced::at_first = forced::at_second = nullptr;
    EXPECT_GE(ca.retries, 1u) << "tags " << tags;
    if (tags) {
      EXPECT_GE(sb->c.waits, 1u) << "the child was not tagged after the failed [P1], or [P1g] was not passed";
    } else {
      EXPECT_EQ(sb->c.waits, 0u);
    }
    std::size_t n = 0, total = 0;
    while (q.pop_batch(32, &n)) total += n;
    EXPECT_EQ(total, 3u);
    sx.reset();
    sb.reset();
  }
}

// [W1] fails (an announcement changed the summary), so the worker tags the
// parent; a producer announcing another child then waits at [P2g].
TEST(TxnContention, FailedClaimTagsTheParent) {
  for (bool tags : {true, false}) {
    forced::Tree q(tags);
    Task t0, t1, t2;
    t0.invoke = t1.invoke = t2.invoke = noop;
    auto s0 = std::make_unique<forced::Submitter>(q, &t0);  // something to claim
    std::unique_ptr<forced::Submitter> s1, s2;
    forced::at_first = [&] { s1 = std::make_unique<forced::Submitter>(q, &t1); };   // announces: [W1] fails
    forced::at_second = [&] { s2 = std::make_unique<forced::Submitter>(q, &t2); };  // [P2] needs the parent's tag
    TxnCounters cw;
    std::size_t n = 0;
    Task* got = nullptr;
    std::thread([&] {
      forced::hooked = true;
      got = q.pop_batch(1, &n, &cw);
    }).join();
    forced::at_first = forced::at_second = nullptr;
    EXPECT_EQ(n, 1u);
    EXPECT_NE(got, nullptr);
    EXPECT_GE(cw.retries, 1u) << "tags " << tags;
    EXPECT_EQ(s1->c.waits, 0u);
    if (tags) {
      EXPECT_GE(s2->c.waits, 1u) << "the parent was not tagged after the failed [W1], or [P2g] was not passed";
    } else {
      EXPECT_EQ(s2->c.waits, 0u);
    }
    std::size_t total = n;
    while (q.pop_batch(32, &n)) total += n;
    EXPECT_EQ(total, 3u);
  }
}

// Every other tag site of push and pop_batch, one test each (the two tests
// above cover [P1g], [P1]'s TagAfterFail, [P2g] and [W1]'s TagAfterFail).
// Each test makes one site meet a tag it must respect, and nothing else
// meets one: either a transaction of the test's own, older than the
// tree's, holds the word's slot when the site's gate runs (the tree's
// transaction waits, then bypasses after the 1 ms patience), or the
// site's CAS fails and a third thread then needs the word (it waits for
// the failed transaction's tag). Without that site's gate() or
// after_fail(), nobody waits.
namespace sites {
using parkway::detail::txn::TagSlot;
using parkway::detail::txn::Txn;
thread_local bool hooked = false;  // only this thread runs the steps below
thread_local int calls = 0;
std::function<void()> at_window[4];  // at the hooked thread's window() number 1..3
std::function<void()> at_take;       // at the hooked thread's after_take() (right after [W2])
struct Hooks {
  static void window() noexcept {
    if (!hooked) return;
    ++calls;
    if (calls < 4 && at_window[calls]) at_window[calls]();
  }
  static void after_take() noexcept {
    if (hooked && at_take) at_take();
  }
};
using Tree = BasicInjectTree<Hooks>;

void reset() {
  for (auto& f : at_window) f = nullptr;
  at_take = nullptr;
}
template <class F>
void run_hooked(F f) {
  std::thread([&] {
    hooked = true;
    f();
  }).join();
  reset();
}

using Submitter = StayingSubmitter<Tree>;

std::size_t drain(Tree& q) {
  std::size_t n = 0, total = 0;
  while (q.pop_batch(32, &n)) total += n;
  return total;
}

bool no_tags_left(Tree& q) {
  if (q.parent_tag().word.load() != 0) return false;
  for (unsigned i = 0; i < Tree::kChildren; ++i)
    if (q.child_tag(i).word.load() != 0) return false;
  return true;
}

// One task, t0, pushed by a submitter that stays alive, and a hooked
// pop_batch(1) on the tree that meets, at one site, the tag of a
// transaction older than its own (holder); c counts what the pop's
// transaction met.
struct OlderTag {
  Tree q{true};
  Task t0{noop};
  Submitter s0{q, &t0};
  Txn holder{true};
  TxnCounters c;
  unsigned child() const { return unsigned(std::countr_zero(q.owned_children())); }
  // The holder tags `tag` before the pop starts and commits right after
  // the pop's [W2]. Returns what the pop took.
  Task* pop_held_until_take(TagSlot& tag) {
    holder.after_fail(tag);
    at_take = [this] { holder.commit(); };
    return pop_hooked();
  }
  // The holder tags `tag` right after the pop's [W2] and commits once the
  // pop has returned. Returns what the pop took.
  Task* pop_tagged_at_take(TagSlot& tag) {
    at_take = [&] { holder.after_fail(tag); };
    Task* got = pop_hooked();
    holder.commit();
    return got;
  }
  // What each test below checks last: the pop's transaction waited for
  // the holder's tag (else the check fails with `missed`), and no tag is
  // left.
  void expect_waited(const std::string& missed) {
    EXPECT_GE(c.waits, 1u) << missed;
    EXPECT_TRUE(no_tags_left(q));
  }

 private:
  Task* pop_hooked() {
    std::size_t n = 0;
    Task* got = nullptr;
    run_hooked([&] { got = q.pop_batch(1, &n, &c); });
    return got;
  }
};
}  // namespace sites

// [W1g]: an older transaction holds the parent until the claim's [W2].
TEST(TxnContention, ClaimPassesTheParentsGate) {
  sites::OlderTag s;
  EXPECT_EQ(s.pop_held_until_take(s.q.parent_tag()), &s.t0);
  s.expect_waited("[W1g] did not wait for the parent's older tag");
}

// [W2g]: an older transaction holds the child's tag until after [W2].
TEST(TxnContention, TakePassesTheChildsGate) {
  sites::OlderTag s;
  EXPECT_EQ(s.pop_held_until_take(s.q.child_tag(s.child())), &s.t0);
  s.expect_waited("[W2g] did not wait for the child's older tag");
}

// [W3g] before [W3a]: the parent is tagged right after [W2] of a claim
// that hands out a task.
TEST(TxnContention, ReleasePassesTheParentsGate) {
  sites::OlderTag s;
  EXPECT_EQ(s.pop_tagged_at_take(s.q.parent_tag()), &s.t0);
  s.expect_waited("[W3g] before [W3a] did not wait for the parent's older tag");
}

// [W3cg] and [W3g] before [W3]: a dry claim (the child announced, OPEN and
// empty) closes the child, then clears its bit; the child's or the
// parent's tag is taken right after its [W2].
TEST(TxnContention, DryClaimPassesTheCloseAndClearGates) {
  for (bool child : {true, false}) {
    sites::OlderTag s;
    const unsigned i = s.child();
    std::size_t n = 0;
    ASSERT_EQ(s.q.pop_batch(1, &n), &s.t0);  // the child stays announced and OPEN
    EXPECT_EQ(s.pop_tagged_at_take(child ? s.q.child_tag(i) : s.q.parent_tag()), nullptr);
    EXPECT_EQ(s.q.summary() & 0xffffffffu, 0u) << "the dry claim closed the child and cleared its bit";
    s.expect_waited(std::string(child ? "[W3cg]" : "[W3g] before [W3]") + " did not wait for the older tag");
  }
}

// [P2] fails (another announcement changed the summary), so the producer
// tags the parent; a third producer announcing then waits at [P2g].
TEST(TxnContention, FailedAnnouncementTagsTheParent) {
  sites::Tree q(true);
  Task a, t1, t2;
  a.invoke = t1.invoke = t2.invoke = noop;
  std::unique_ptr<sites::Submitter> s1, s2;
  sites::at_window[2] = [&] { s1 = std::make_unique<sites::Submitter>(q, &t1); };  // [P2] fails
  sites::at_window[3] = [&] { s2 = std::make_unique<sites::Submitter>(q, &t2); };  // needs the parent
  TxnCounters ca;
  sites::run_hooked([&] { q.push(&a, &ca); });
  EXPECT_GE(ca.retries, 1u);
  EXPECT_EQ(s1->c.waits, 0u);
  EXPECT_GE(s2->c.waits, 1u) << "the parent was not tagged after the failed [P2]";
  EXPECT_EQ(sites::drain(q), 3u);
  EXPECT_TRUE(sites::no_tags_left(q));
}

// [W3] of a dry claim fails (an announcement changed the summary), so the
// worker tags the parent; a producer announcing then waits at [P2g].
TEST(TxnContention, FailedClearTagsTheParent) {
  sites::Tree q(true);
  Task t0, t1, t2;
  t0.invoke = t1.invoke = t2.invoke = noop;
  sites::Submitter s0(q, &t0);
  std::size_t n = 0;
  ASSERT_EQ(q.pop_batch(1, &n), &t0);  // the child stays announced and OPEN
  std::unique_ptr<sites::Submitter> s1, s2;
  // window 1 is [W1]'s, window 2 [W3]'s (after [W3c] closed the child)
  sites::at_window[2] = [&] { s1 = std::make_unique<sites::Submitter>(q, &t1); };  // [W3] fails
  sites::at_window[3] = [&] { s2 = std::make_unique<sites::Submitter>(q, &t2); };  // needs the parent
  TxnCounters cw;
  Task* got = nullptr;
  sites::run_hooked([&] { got = q.pop_batch(1, &n, &cw); });  // a later round takes t1 or t2
  EXPECT_NE(got, nullptr);
  EXPECT_GE(cw.retries, 1u);
  EXPECT_EQ(s1->c.waits, 0u);
  EXPECT_GE(s2->c.waits, 1u) << "the parent was not tagged after the failed [W3]";
  EXPECT_EQ(n + sites::drain(q), 2u);
  EXPECT_TRUE(sites::no_tags_left(q));
}

}  // namespace
