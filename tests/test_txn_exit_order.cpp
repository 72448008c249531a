// test_txn_exit_order.cpp -- a submitting thread's tasks keep their order
// (FIFO per producer, injection_queue.hpp) across its exit: a push made
// from a destructor that runs after the thread gave its children back
// (txn/producer_slots.cpp, ~ClaimList) must not overtake the thread's
// earlier tasks, still queued in its former child.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "txn/inject_tree.hpp"

namespace {

using parkway::detail::Task;
using parkway::detail::txn::InjectTree;

bool noop(Task*) noexcept { return true; }

struct LatePush {  // a thread_local made before the thread's first push
  InjectTree* tree = nullptr;
  Task* item = nullptr;
  ~LatePush() {
    if (tree) tree->push(item);
  }
};

// Two children: a live helper owns child 0, the exiting thread child 1.
// Its push of `a`, then (at exit, after its claims were given back) its
// push of `b`. Before the fix the late push went to child serial % 2, so
// for a tree with an even serial `b` sat in child 0 and one pop_batch
// (which claims child 0 first from a fresh thread's cursor) returned b
// before a. Trees are made back to back, so their serials cover both
// parities.
TEST(TxnExitOrder, APushAtThreadExitStaysBehindTheThreadsEarlierTasks) {
  for (int round = 0; round < 4; ++round) {
    InjectTree q(true, 2);
    Task d, a, b;
    d.invoke = a.invoke = b.invoke = noop;
    std::atomic<bool> pushed{false}, leave{false};
    std::thread helper([&] {  // owns child 0 for the whole test
      q.push(&d);
      pushed.store(true);
      while (!leave.load()) std::this_thread::yield();
    });
    while (!pushed.load()) std::this_thread::yield();
    std::thread([&] {
      thread_local LatePush late;  // destroyed after the thread's claims
      late.tree = &q;
      late.item = &b;
      q.push(&a);
      EXPECT_EQ(q.owned_children(), 3u);
    }).join();
    EXPECT_EQ(q.owned_children(), 1u) << "the exiting thread gave its child back, the late push claimed none";
    std::vector<Task*> order;
    std::thread([&] {  // a fresh thread: its claim cursor starts at child 0
      std::size_t n = 0;
      while (Task* t = q.pop_batch(32, &n))
        for (; t; t = t->next) order.push_back(t);
    }).join();
    ASSERT_EQ(order.size(), 3u) << "round " << round;
    std::size_t ia = 3, ib = 3;
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (order[k] == &a) ia = k;
      if (order[k] == &b) ib = k;
    }
    EXPECT_LT(ia, ib) << "round " << round << ": the push made at thread exit overtook the thread's earlier task";
    leave.store(true);
    helper.join();
  }
}

}  // namespace
