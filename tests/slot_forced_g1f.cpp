// slot_forced_g1f.cpp -- the [G1f] case no compiler here produces: the
// owner's first spawn skips [G1] while a heap task that another thread
// spawned into the published group is still pending (slot.md, "The first
// spawn"). A hook stands in for a compiler that folds past the release
// store that publishes the group. Built as its own binary
// (make test-slot-forced), because the hook changes TaskGroup::spawn for
// every lambda of this file.
#include <atomic>
#include <cstdio>
#include <thread>

namespace parkway {
class TaskGroup;
}
// The group whose next spawn must take the [G1f] branch, and how often a
// forced spawn found a heap task pending (the case under test).
static std::atomic<const parkway::TaskGroup*> g_force{nullptr};
static std::atomic<int> g_forced{0}, g_forced_with_pending{0};
static bool force_g1f(const parkway::TaskGroup* g) noexcept;
#define PARKWAY_TEST_FORCE_G1F(group) force_g1f(group)

#include <gtest/gtest.h>

#include <parkway/parkway.hpp>

#include "test_util.hpp"

static bool force_g1f(const parkway::TaskGroup* g) noexcept {
  const parkway::TaskGroup* want = g;
  if (!g_force.compare_exchange_strong(want, nullptr, std::memory_order_acq_rel)) return false;
  g_forced.fetch_add(1, std::memory_order_relaxed);
  if (g->pending() != 0) g_forced_with_pending.fetch_add(1, std::memory_order_relaxed);
  return true;
}

namespace {

// Each round: the owner (this thread, outside the pool) publishes a fresh
// group; another thread spawns a heap task into it that cannot finish
// before the owner's spawn, and waits on the group (not the owner); the
// owner's first spawn then takes the slot through [G1f] with that task
// pending, and waits. Both waits must return with every task run.
TEST(GroupSlotForced, FirstSpawnSkipsG1WithAHeapTaskPending) {
  pwtest::Watchdog w("GroupSlotForced.FirstSpawnSkipsG1WithAHeapTaskPending", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<parkway::TaskGroup*> shared{nullptr};
  std::atomic<int> heap_runs{0}, slot_runs{0};
  std::atomic<int> heap_spawned{0};  // rounds whose heap task was spawned
  std::atomic<int> owner_spawned{0};  // rounds whose owner spawn happened
  std::atomic<int> other_done{0};     // rounds the other thread finished with a group
  std::atomic<bool> stop{false};
  std::thread other([&] {
    int round = 0;
    while (!stop.load(std::memory_order_acquire)) {
      parkway::TaskGroup* g = shared.exchange(nullptr, std::memory_order_acq_rel);
      if (!g) continue;
      ++round;
      g->spawn([&, round] {  // not the owner: a heap task
        while (owner_spawned.load(std::memory_order_acquire) < round) std::this_thread::yield();
        heap_runs.fetch_add(1, std::memory_order_relaxed);
      });
      heap_spawned.store(round, std::memory_order_release);
      g->wait();  // not the owner: registers in pending_, polls while the slot is busy
      other_done.store(round, std::memory_order_release);  // its last touch of *g
    }
  });
  const int rounds = 2000 / pwtest::kSlow;
  for (int i = 1; i <= rounds; ++i) {
    parkway::TaskGroup g(rt);
    shared.store(&g, std::memory_order_release);
    while (heap_spawned.load(std::memory_order_acquire) < i) std::this_thread::yield();
    g_force.store(&g, std::memory_order_release);
    g.spawn([&slot_runs] { slot_runs.fetch_add(1, std::memory_order_relaxed); });  // forced [G1f]
    owner_spawned.store(i, std::memory_order_release);
    g.wait();
    EXPECT_EQ(g.pending(), 0u);
    while (other_done.load(std::memory_order_acquire) < i) std::this_thread::yield();
  }
  stop.store(true, std::memory_order_release);
  other.join();
  EXPECT_EQ(g_forced.load(), rounds) << "the hook must have forced every owner spawn";
  EXPECT_EQ(g_forced_with_pending.load(), rounds) << "each forced spawn must have found the heap task pending";
  EXPECT_EQ(heap_runs.load(), rounds);
  EXPECT_EQ(slot_runs.load(), rounds);
  std::printf("[ forced   ] %d of %d owner spawns took [G1f] with a heap task pending\n",
              g_forced_with_pending.load(), rounds);
}

}  // namespace
