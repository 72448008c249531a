// test_txn_inject.cpp -- the 2-level transactional injection queue
// (userspace/txn/inject_tree.hpp) alone and under the runtime: FIFO per
// producer, exactly-once delivery under stress (tags on and off), nothing
// left at shutdown, one child per live producer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "injection_queue.hpp"
#include "parkway/parkway.hpp"
#include "txn/inject_tree.hpp"

namespace {

using parkway::detail::Task;
using parkway::detail::txn::InjectTree;

#if defined(__SANITIZE_THREAD__)
constexpr int kScale = 4;  // TSAN on 2 cores: keep the suite short
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kScale = 4;
#else
constexpr int kScale = 1;
#endif

struct Item : Task {
  std::uint32_t producer = 0;
  std::uint32_t seq = 0;
};

bool noop(Task*) noexcept { return true; }

TEST(TxnInject, SingleThreadFifoAndBatches) {
  for (bool tags : {true, false}) {
    InjectTree q(tags);
    EXPECT_FALSE(q.maybe_nonempty());
    std::size_t n = 99;
    EXPECT_EQ(q.pop_batch(8, &n), nullptr);
    EXPECT_EQ(n, 0u);
    std::vector<Item> items(100);
    for (std::uint32_t i = 0; i < items.size(); ++i) {
      items[i].invoke = noop;
      items[i].seq = i;
      q.push(&items[i]);
      EXPECT_TRUE(q.maybe_nonempty());
    }
    EXPECT_EQ(q.size_hint(), 100u);
    std::uint32_t want = 0;
    while (Task* t = q.pop_batch(7, &n)) {
      EXPECT_LE(n, 7u);
      std::size_t k = 0;
      for (; t; t = t->next, ++k) EXPECT_EQ(static_cast<Item*>(t)->seq, want++);
      EXPECT_EQ(k, n);
      if (want < 100) {
        EXPECT_TRUE(q.maybe_nonempty());
      }
    }
    EXPECT_EQ(want, 100u);
    EXPECT_FALSE(q.maybe_nonempty());
    EXPECT_EQ(q.size_hint(), 0u);
  }
}

// A batch is filled from several children: three live producers (a child
// each) push 5 tasks apiece; pop_batch(12) returns 12 tasks from more than
// one child, FIFO per producer, linked and terminated; the next call
// returns the other 3, and then nothing is left.
TEST(TxnInject, BatchFillsFromSeveralChildren) {
  for (bool tags : {true, false}) {
    InjectTree q(tags);
    constexpr std::uint32_t kProducers = 3, kEach = 5;
    std::vector<Item> items(kProducers * kEach);
    std::atomic<std::uint32_t> pushed{0};
    std::vector<std::thread> th;
    for (std::uint32_t p = 0; p < kProducers; ++p)
      th.emplace_back([&, p] {
        for (std::uint32_t i = 0; i < kEach; ++i) {
          Item& it = items[p * kEach + i];
          it.invoke = noop;
          it.producer = p;
          it.seq = i;
          q.push(&it);
        }
        // stay alive until all have pushed: a thread that exited gives its
        // child back, and the next one would take it
        pushed.fetch_add(1);
        while (pushed.load() != kProducers) std::this_thread::yield();
      });
    for (auto& t : th) t.join();
    std::uint32_t next_seq[kProducers] = {};
    std::size_t total = 0;
    for (std::size_t want : {std::size_t(12), std::size_t(32)}) {
      std::size_t n = 0;
      Task* t = q.pop_batch(want, &n);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(n, std::min<std::size_t>(want, kProducers * kEach - total));
      std::size_t k = 0;
      bool seen[kProducers] = {};
      for (; t; t = t->next, ++k) {
        auto* it = static_cast<Item*>(t);
        ASSERT_LT(it->producer, kProducers);
        EXPECT_EQ(it->seq, next_seq[it->producer]++);
        seen[it->producer] = true;
      }
      EXPECT_EQ(k, n);
      if (want == 12) {
        EXPECT_GE(int(seen[0]) + int(seen[1]) + int(seen[2]), 2) << "one batch, several children";
      }
      total += k;
    }
    EXPECT_EQ(total, std::size_t(kProducers * kEach));
    std::size_t n = 7;
    EXPECT_EQ(q.pop_batch(32, &n), nullptr);
    EXPECT_EQ(n, 0u);
    EXPECT_FALSE(q.maybe_nonempty());
  }
}

TEST(TxnInject, InterfaceWrapperKeepsTheContract) {
  parkway::detail::InjectionQueue q(true);
  EXPECT_TRUE(q.priority_tags());
  Item a, b;
  a.invoke = b.invoke = noop;
  q.push(&a);
  q.push(&b);
  EXPECT_TRUE(q.maybe_nonempty());
  std::size_t n = 0;
  Task* t = q.pop_batch(1, &n);
  EXPECT_EQ(t, &a);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(t->next, nullptr);
  EXPECT_TRUE(q.maybe_nonempty());  // b is still pending
  t = q.pop_batch(32, &n);
  EXPECT_EQ(t, &b);
  EXPECT_FALSE(q.maybe_nonempty());
}

// 8 producers, 2 workers; every item delivered exactly once, FIFO per
// producer as seen by each worker; nothing left when all is done.
void stress(bool tags, unsigned children) {
  constexpr unsigned kProducers = 8, kWorkers = 2;
  const std::uint32_t per = 250000 / kScale;
  InjectTree q(tags, children);
  std::vector<std::unique_ptr<Item[]>> items;
  for (unsigned p = 0; p < kProducers; ++p) {
    items.emplace_back(new Item[per]);
    for (std::uint32_t i = 0; i < per; ++i) {
      items[p][i].invoke = noop;
      items[p][i].producer = p;
      items[p][i].seq = i;
    }
  }
  std::unique_ptr<std::atomic<std::uint8_t>[]> seen(new std::atomic<std::uint8_t>[kProducers * per]);
  for (std::size_t i = 0; i < std::size_t(kProducers) * per; ++i) seen[i].store(0, std::memory_order_relaxed);
  std::atomic<unsigned> producers_done{0};
  std::atomic<std::uint64_t> delivered{0}, dups{0}, order_errors{0}, oversize{0};

  std::vector<std::thread> th;
  for (unsigned w = 0; w < kWorkers; ++w)
    th.emplace_back([&, w] {
      std::vector<std::int64_t> last(kProducers, -1);
      std::size_t max = 1 + w * 7;
      for (;;) {
        bool done = producers_done.load(std::memory_order_acquire) == kProducers;
        std::size_t n = 0;
        Task* t = q.pop_batch(max, &n);
        max = max % 32 + 1;
        if (!t) {
          if (done && !q.maybe_nonempty()) break;
          std::this_thread::yield();
          continue;
        }
        std::size_t k = 0;
        for (; t; t = t->next, ++k) {
          auto* it = static_cast<Item*>(t);
          if (seen[std::size_t(it->producer) * per + it->seq].fetch_add(1, std::memory_order_relaxed) != 0)
            dups.fetch_add(1);
          if (std::int64_t(it->seq) <= last[it->producer]) order_errors.fetch_add(1);
          last[it->producer] = it->seq;
        }
        if (k != n || k > 32) oversize.fetch_add(1);
        delivered.fetch_add(k, std::memory_order_relaxed);
      }
    });
  for (unsigned p = 0; p < kProducers; ++p)
    th.emplace_back([&, p] {
      for (std::uint32_t i = 0; i < per; ++i) q.push(&items[p][i]);
      producers_done.fetch_add(1, std::memory_order_release);
    });
  for (auto& t : th) t.join();

  EXPECT_EQ(delivered.load(), std::uint64_t(kProducers) * per);
  EXPECT_EQ(dups.load(), 0u);
  EXPECT_EQ(order_errors.load(), 0u);
  EXPECT_EQ(oversize.load(), 0u);
  std::uint64_t missing = 0;
  for (std::size_t i = 0; i < std::size_t(kProducers) * per; ++i) missing += seen[i].load() != 1;
  EXPECT_EQ(missing, 0u);
  EXPECT_FALSE(q.maybe_nonempty());
  std::size_t n = 0;
  EXPECT_EQ(q.pop_batch(32, &n), nullptr);
}

TEST(TxnInject, Stress8Producers2WorkersTagsOn) { stress(true, InjectTree::kChildren); }
TEST(TxnInject, Stress8Producers2WorkersTagsOff) { stress(false, InjectTree::kChildren); }
// All producers on one child: the child word is contended too.
TEST(TxnInject, StressOneSharedChildTagsOn) { stress(true, 1); }
TEST(TxnInject, StressOneSharedChildTagsOff) { stress(false, 1); }

// Through the runtime: 8 external producers, 2 workers, every submission
// runs exactly once, nothing lost at shutdown.
TEST(TxnInject, RuntimeExternalSubmitters) {
  for (bool tags : {true, false}) {
    constexpr unsigned kProducers = 8;
    const unsigned per = 100000 / kScale;
    std::atomic<std::uint64_t> ran{0};
    {
      parkway::Options o;
      o.workers = 2;
      o.priority_tags = tags;
      parkway::Runtime rt(o);
      std::vector<std::thread> th;
      for (unsigned p = 0; p < kProducers; ++p)
        th.emplace_back([&] {
          parkway::TaskGroup g(rt);
          for (unsigned i = 0; i < per; ++i) g.spawn([&] { ran.fetch_add(1, std::memory_order_relaxed); });
          g.wait();
        });
      for (auto& t : th) t.join();
      EXPECT_EQ(ran.load(), std::uint64_t(kProducers) * per) << "tags=" << tags;
      // fire-and-forget tasks still queued at shutdown must run too
      for (unsigned i = 0; i < 1000; ++i) rt.submit([&] { ran.fetch_add(1, std::memory_order_relaxed); });
    }  // ~Runtime: shutdown runs everything accepted
    EXPECT_EQ(ran.load(), std::uint64_t(kProducers) * per + 1000) << "tags=" << tags;
  }
}

// One child per live producer: a submitting thread's child is its own
// while at most kChildren threads push to the tree, however many threads
// pushed before and exited, or pushed to other trees meanwhile.
TEST(TxnInject, LiveProducersGetDistinctChildren) {
  InjectTree q(true);
  Item a, b;
  a.invoke = b.invoke = noop;
  std::atomic<int> stage{0};
  unsigned cx = 99, cy = 99;
  std::thread x([&] {  // a long-lived submitter
    q.push(&a);
    cx = q.my_child();
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  std::vector<Item> gone(15);
  {
    InjectTree other(true);  // another runtime's queue
    for (unsigned i = 0; i < gone.size(); ++i) {
      gone[i].invoke = noop;
      std::thread([&, i] { (i % 2 ? other : q).push(&gone[i]); }).join();  // short-lived submitters
    }
    std::size_t n = 0;
    while (other.pop_batch(32, &n)) {
    }
  }
  std::thread([&] {  // the second live submitter
    q.push(&b);
    cy = q.my_child();
  }).join();
  EXPECT_NE(cx, cy) << "two live submitters share child " << cx;
  std::size_t total = 0, n = 0;
  while (q.pop_batch(32, &n)) total += n;
  EXPECT_EQ(total, 2u + 8u);
  stage.store(2);
  x.join();
}

// A producer stalled between [P1] (onto a CLOSED head) and [P2] delays only
// its own child: another live producer's finished push is visible to
// maybe_nonempty() and claimable at once.
namespace stall {
std::atomic<bool> release{false}, stalled{false};
thread_local bool is_a = false;
thread_local int calls = 0;
struct Hooks {
  static void window() noexcept {
    if (!is_a || ++calls != 2) return;  // A's second window(): in the [P2] loop
    stalled.store(true);
    while (!release.load()) std::this_thread::yield();
  }
};
}  // namespace stall

TEST(TxnInject, StalledAnnouncerDoesNotHideAnotherProducer) {
  using Tree = parkway::detail::txn::BasicInjectTree<stall::Hooks>;
  for (bool tags : {true, false}) {
    stall::release = false;
    stall::stalled = false;
    Tree q(tags);
    Item a, b;
    a.invoke = b.invoke = noop;
    std::thread ta([&] {
      stall::is_a = true;
      q.push(&a);
    });
    while (!stall::stalled.load()) std::this_thread::yield();  // A: past [P1], before [P2]
    std::vector<Item> gone(15);
    {
      Tree other(tags);  // 15 earlier short-lived submitters, elsewhere
      for (unsigned i = 0; i < gone.size(); ++i) {
        gone[i].invoke = noop;
        std::thread([&, i] { other.push(&gone[i]); }).join();
      }
      std::size_t n = 0;
      while (other.pop_batch(32, &n)) {
      }
    }
    std::thread([&] { q.push(&b); }).join();  // B's push has returned
    EXPECT_TRUE(q.maybe_nonempty()) << "tags " << tags << ": B's task is hidden behind the stalled A";
    std::size_t n = 0;
    Task* t = q.pop_batch(32, &n);
    EXPECT_EQ(n, 1u) << "tags " << tags;
    EXPECT_EQ(t, &b);
    stall::release = true;
    ta.join();
    t = q.pop_batch(32, &n);
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(t, &a);
  }
}

// More live submitters than children: the newcomer shares a child, and
// moves to a child its owner gave back (at exit) once the shared child has
// handed out the newcomer's earlier tasks.
TEST(TxnInject, SharedChildMovesToAFreedOne) {
  InjectTree q(true, 2);
  std::vector<Item> items(4);
  for (auto& it : items) it.invoke = noop;
  std::atomic<bool> leave0{false}, leave1{false};
  std::atomic<int> ready{0};
  unsigned c0 = 99, c1 = 99;
  std::thread t0([&] {
    q.push(&items[0]);
    c0 = q.my_child();
    ready.fetch_add(1);
    while (!leave0.load()) std::this_thread::yield();
  });
  std::thread t1([&] {
    q.push(&items[1]);
    c1 = q.my_child();
    ready.fetch_add(1);
    while (!leave1.load()) std::this_thread::yield();
  });
  while (ready.load() != 2) std::this_thread::yield();
  EXPECT_NE(c0, c1);
  EXPECT_EQ(q.owned_children(), 3u);
  std::thread t2([&] {
    q.push(&items[2]);  // both children owned: shares one
    EXPECT_EQ(q.owned_children(), 3u);
    leave0.store(true);
    t0.join();  // c0's owner exits and gives it back
    EXPECT_EQ(q.owned_children(), 3u & ~(1u << c0));
    std::size_t n = 0;
    while (q.pop_batch(32, &n)) {
    }
    q.push(&items[3]);
    EXPECT_EQ(q.my_child(), c0) << "the sharer moved to the freed child";
    EXPECT_EQ(q.owned_children(), 3u);
  });
  t2.join();
  leave1.store(true);
  t1.join();
  EXPECT_EQ(q.owned_children(), 0u) << "every exited thread gave its child back";
  std::size_t n = 0, total = 0;
  while (q.pop_batch(32, &n)) total += n;
  EXPECT_EQ(total, 1u);
}

// A thread that submits to several trees owns a child in each, and its
// exit gives them all back, skipping trees destroyed meanwhile.
TEST(TxnInject, ChildrenAreGivenBackAtThreadExit) {
  InjectTree a(true), b(true);
  std::vector<Item> items(40);
  for (auto& it : items) it.invoke = noop;
  std::thread([&] {
    auto gone = std::make_unique<InjectTree>(true);
    for (unsigned i = 0; i < 30; ++i) (i % 3 == 0 ? a : i % 3 == 1 ? b : *gone).push(&items[i]);
    EXPECT_EQ(std::popcount(a.owned_children()), 1);
    EXPECT_EQ(std::popcount(b.owned_children()), 1);
    std::size_t n = 0;
    while (gone->pop_batch(32, &n)) {
    }
    gone.reset();  // destroyed while this thread still holds a claim on it
  }).join();
  EXPECT_EQ(a.owned_children(), 0u);
  EXPECT_EQ(b.owned_children(), 0u);
  std::size_t n = 0, total = 0;
  while (a.pop_batch(32, &n)) total += n;
  while (b.pop_batch(32, &n)) total += n;
  EXPECT_EQ(total, 20u);
}

// A push after the thread's claims were given back at its exit: the
// destructor of a thread_local made before the thread's first push runs
// after them and pushes to a tree it had not used. It shares a child and
// records nothing (before, it wrote its claim into the destroyed claim
// list: a crash here, or a child owned for good); its task still comes out.
struct PushAtExit {
  InjectTree* tree = nullptr;
  Item* item = nullptr;
  ~PushAtExit() {
    if (tree) tree->push(item);
  }
};

TEST(TxnInject, APushAfterTheThreadGaveItsChildrenBack) {
  InjectTree a(true), b(true);
  std::vector<Item> items(2);
  for (auto& it : items) it.invoke = noop;
  std::thread([&] {
    thread_local PushAtExit late;  // made before the first push: destroyed after the claims
    late.tree = &b;
    late.item = &items[1];
    a.push(&items[0]);
  }).join();
  EXPECT_EQ(a.owned_children(), 0u);
  EXPECT_EQ(b.owned_children(), 0u) << "a push at thread exit claimed a child nobody gives back";
  std::size_t n = 0, total = 0;
  while (a.pop_batch(32, &n)) total += n;
  while (b.pop_batch(32, &n)) total += n;
  EXPECT_EQ(total, 2u);
}

}  // namespace

// The parking recheck (maybe_nonempty) against a claim, step by step: the
// recheck reads the summary before the claim ([W1]), the claimer empties
// the head ([W2]), and the recheck then reads the head and the pending
// count while the claimer is still moving the stack into pending. It used
// to see an empty head and a count of 0 and answer "nothing queued" with
// every task still there, so a worker could go to sleep beside them.
namespace recheck_race {
std::atomic<int> step{0};  // 1: recheck read the summary; 2: head taken; 3: recheck done
struct Hooks {
  static void after_summary_read() noexcept {
    if (step.load() != 0) return;
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
  }
  static void after_take() noexcept {
    if (step.load() != 1) return;
    step.store(2);
    while (step.load() != 3) std::this_thread::yield();
  }
};
}  // namespace recheck_race

TEST(TxnInject, RecheckDuringAClaimSeesTheTasks) {
  using Tree = parkway::detail::txn::BasicInjectTree<recheck_race::Hooks>;
  for (bool tags : {true, false}) {
    recheck_race::step = 0;
    Tree q(tags, 1);
    std::vector<Item> items(8);
    for (auto& it : items) {
      it.invoke = noop;
      q.push(&it);
    }
    bool seen = false;
    std::thread recheck([&] {
      seen = q.maybe_nonempty();
      recheck_race::step.store(3);
    });
    while (recheck_race::step.load() != 1) std::this_thread::yield();
    std::size_t n = 0;
    Task* got = q.pop_batch(1, &n);  // claims, takes the head, hands out one
    recheck.join();
    EXPECT_TRUE(seen) << "tags " << tags << ": the recheck saw no work while 8 tasks were queued";
    EXPECT_EQ(n, 1u);
    EXPECT_NE(got, nullptr);
    EXPECT_TRUE(q.maybe_nonempty());  // 7 left in pending
  }
}
