// test_group_slot.cpp -- TaskGroup's inline slot (docs/design/slot.md):
// the owner's fast path, a slot task finished by another thread while the
// owner sleeps or helps ([G3]/[G4]), waiters that are not the owner (they
// poll), and the slot's reuse once freed.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;

// The owner is a thread outside the pool: every slot task is injected and
// finished remotely by a worker, so each wait goes through [G6] + [G3]/[G4]
// or sees the slot already free. A lost [G4] wake hangs (the watchdog).
TEST(GroupSlot, OutsideOwnerIsWokenByRemoteFinish) {
  pwtest::Watchdog w("GroupSlot.OutsideOwnerIsWokenByRemoteFinish", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  const int rounds = 20000 / pwtest::kSlow;
  long sum = 0;
  for (int i = 0; i < rounds; ++i) {
    parkway::TaskGroup g(rt);
    int v = 0;
    g.spawn([&v, i] {
      if (i % 64 == 0) std::this_thread::sleep_for(50us);  // the owner is asleep by then
      v = i;
    });
    g.wait();
    ASSERT_EQ(v, i);
    ASSERT_EQ(g.pending(), 0u);
    sum += v;
  }
  EXPECT_EQ(sum, long(rounds) * (rounds - 1) / 2);
}

// One group reused: the slot is taken again only after its last task
// finished; spawns while it is busy go to the heap and are counted.
TEST(GroupSlot, ReuseAndOverflowToHeap) {
  pwtest::Watchdog w("GroupSlot.ReuseAndOverflowToHeap", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<long> runs{0};
  rt.run([&] {
    parkway::TaskGroup g;
    for (int round = 0; round < 2000 / pwtest::kSlow; ++round) {
      const int n = 1 + round % 9;
      for (int k = 0; k < n; ++k) g.spawn([&runs] { runs.fetch_add(1, std::memory_order_relaxed); });
      g.wait();
      ASSERT_EQ(g.pending(), 0u);
    }
  });
  long want = 0;
  for (int round = 0; round < 2000 / pwtest::kSlow; ++round) want += 1 + round % 9;
  EXPECT_EQ(runs.load(), want);
}

// A worker owner whose slot task is stolen and runs long: the owner helps,
// finds nothing, parks, and must be woken by the thief's [G4].
TEST(GroupSlot, StolenSlotTaskWakesWorkerOwner) {
  pwtest::Watchdog w("GroupSlot.StolenSlotTaskWakesWorkerOwner", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> stolen{0}, ran{0};
  const int rounds = 400 / pwtest::kSlow;
  rt.run([&] {
    for (int i = 0; i < rounds; ++i) {
      parkway::TaskGroup g;
      const auto me = parkway::Runtime::current_worker_index();
      g.spawn([&stolen, &ran, me] {
        ran.fetch_add(1, std::memory_order_relaxed);
        if (parkway::Runtime::current_worker_index() != me) {
          stolen.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::sleep_for(200us);
        }
      });
      std::this_thread::sleep_for(100us);  // let the other worker steal it
      g.wait();
    }
  });
  EXPECT_EQ(ran.load(), rounds);
  // How often the remote path ran is scheduling, not asserted: printed.
  std::printf("slot task stolen in %d of %d rounds\n", stolen.load(), rounds);
}

// A waiter that is not the owner: the owner's plain [G3o] store would not
// wake it, so it polls; it must still return once the slot task is done,
// and see the task's writes.
TEST(GroupSlot, NonOwnerWaiterSeesCompletion) {
  pwtest::Watchdog w("GroupSlot.NonOwnerWaiterSeesCompletion", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int i = 0; i < 200 / pwtest::kSlow; ++i) {
    parkway::TaskGroup g(rt);
    std::atomic<bool> go{false};
    int v = 0;
    g.spawn([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      v = 42;
    });
    std::thread other([&] {
      g.wait();  // not the owner
      EXPECT_EQ(v, 42);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(i % 3 * 300));
    go.store(true, std::memory_order_release);
    other.join();
    EXPECT_EQ(g.pending(), 0u);
  }
}

// A group created on one thread and used only by another: every spawn is a
// counted heap task (the slot belongs to the creator), results intact.
TEST(GroupSlot, GroupUsedByAnotherThread) {
  pwtest::Watchdog w("GroupSlot.GroupUsedByAnotherThread", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  parkway::TaskGroup g(rt);
  std::atomic<int> runs{0};
  std::thread t([&] {
    for (int i = 0; i < 1000; ++i) g.spawn([&runs] { runs.fetch_add(1, std::memory_order_relaxed); });
    g.wait();
  });
  t.join();
  EXPECT_EQ(runs.load(), 1000);
}

// The slot task's exception reaches wait(), whether the owner ran it or a
// worker did; the slot is free again afterwards.
TEST(GroupSlot, SlotTaskExceptionReachesWait) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int i = 0; i < 100; ++i) {
    parkway::TaskGroup g(rt);  // outside owner: a worker runs it
    g.spawn([i] { throw std::runtime_error("slot " + std::to_string(i)); });
    try {
      g.wait();
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "slot " + std::to_string(i));
    }
    EXPECT_EQ(g.pending(), 0u);
  }
  int caught = rt.run([] {
    parkway::TaskGroup g;  // worker owner: usually runs it itself
    g.spawn([] { throw std::logic_error("inline"); });
    try {
      g.wait();
    } catch (const std::logic_error&) {
      return 1;
    }
    return 0;
  });
  EXPECT_EQ(caught, 1);
}

// Spawning from the owner after a shutdown began: the slot spawn is undone
// (slot free again) and RuntimeShutdown reaches the caller.
TEST(GroupSlot, SpawnAfterShutdownUndoesTheSlot) {
  auto rt = std::make_unique<parkway::Runtime>(parkway::Options{.workers = 1});
  parkway::TaskGroup g(*rt);
  rt->shutdown();
  EXPECT_THROW(g.spawn([] {}), parkway::RuntimeShutdown);
  EXPECT_EQ(g.pending(), 0u);
  g.wait();
}

// A group published to another thread before its first spawn: that
// thread spawns heap tasks into it and waits on it while the owner's
// spawns take the slot whenever [G1] finds the group idle. (The group is
// made by the out-of-line TaskGroup(Runtime&), so its first spawn runs
// [G1], not [G1f], under g++ and clang alike: slot.md.) Every task runs
// and both waits return (a hang trips the watchdog).
TEST(GroupSlot, FirstSpawnOfAPublishedGroup) {
  pwtest::Watchdog w("GroupSlot.FirstSpawnOfAPublishedGroup", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<parkway::TaskGroup*> shared{nullptr};
  std::atomic<int> task_runs{0};
  std::atomic<int> other_done{0};  // rounds the other thread finished with a group
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_acquire)) {
      parkway::TaskGroup* g = shared.exchange(nullptr, std::memory_order_acq_rel);
      if (!g) continue;
      g->spawn([&task_runs] { task_runs.fetch_add(1, std::memory_order_relaxed); });
      g->wait();  // not the owner
      other_done.fetch_add(1, std::memory_order_release);  // its last touch of *g
    }
  });
  const int rounds = 5000 / pwtest::kSlow;
  int published = 0;
  for (int i = 0; i < rounds; ++i) {
    parkway::TaskGroup g(rt);
    int v = 0;
    shared.store(&g, std::memory_order_release);
    g.spawn([&v, i] { v = i; });
    g.wait();
    EXPECT_EQ(v, i);
    // If the other thread took the group, its spawn may have come after
    // our wait returned: let it finish with the group, and wait again,
    // before the group dies.
    if (shared.exchange(nullptr, std::memory_order_acq_rel) == nullptr) {
      ++published;
      while (other_done.load(std::memory_order_acquire) < published) std::this_thread::yield();
      g.wait();
    }
    EXPECT_EQ(g.pending(), 0u);
  }
  stop.store(true, std::memory_order_release);
  other.join();
  EXPECT_EQ(other_done.load(), published);
  EXPECT_EQ(task_runs.load(), published);
  std::printf("[ shared   ] %d of %d groups\n", published, rounds);
}

}  // namespace

namespace {

// A coroutine that creates a group, spawns its slot task, then resumes on
// another worker (after awaiting a child that ran elsewhere) before it
// waits: the waiter is then not the owner and polls; the result must be
// intact either way.
parkway::Task<long> slow_child(int us) {
  std::this_thread::sleep_for(std::chrono::microseconds(us));
  co_return 1;
}

parkway::Task<long> group_across_resume(int i, std::atomic<int>* moved) {
  parkway::TaskGroup g;
  long a = 0;
  const int before = parkway::Runtime::current_worker_index();
  g.spawn([&a, i] { a = i; });
  auto child = parkway::spawn(slow_child(200));
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  long c = co_await std::move(child);  // may resume on the other worker
  if (parkway::Runtime::current_worker_index() != before) moved->fetch_add(1, std::memory_order_relaxed);
  g.wait();
  co_return a + c;
}

TEST(GroupSlot, CoroutineWaitsAfterMovingThreads) {
  pwtest::Watchdog w("GroupSlot.CoroutineWaitsAfterMovingThreads", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> moved{0};
  const int rounds = 200 / pwtest::kSlow;
  for (int i = 0; i < rounds; ++i) ASSERT_EQ(parkway::sync_wait(rt, group_across_resume(i, &moved)), i + 1);
  std::printf("resumed on another worker before wait() in %d of %d rounds\n", moved.load(), rounds);
}

}  // namespace

namespace {

using namespace std::chrono_literals;

// The owner, blocked in wait() and registered in the slot, helps and runs
// a heap task of the group that spawns again. A spawn that re-took the
// slot with a plain store would wipe the registration, and the new slot
// task would finish remotely without a wake. A spawn from inside the
// group's own tasks never takes the slot ([G1] needs pending_ == 0).
TEST(GroupSlot, NestedSpawnWhileOwnerWaitsIsNotLost) {
  pwtest::Watchdog w("GroupSlot.NestedSpawnWhileOwnerWaitsIsNotLost", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> ran{0};
  for (int round = 0; round < 6; ++round) {
    rt.run([&] {
      parkway::TaskGroup g;
      g.spawn([&] {    // S1 (slot), meant to be stolen by the other worker
        g.spawn([&] {  // H (heap), may be stolen back by the owner
          while (g.pending() != 1) std::this_thread::sleep_for(1ms);  // S1 has finished
          g.spawn([&] {  // S2: a nested spawn, whichever thread runs H
            std::this_thread::sleep_for(20ms);
            ran.fetch_add(1);
          });
          std::this_thread::sleep_for(10ms);
          ran.fetch_add(1);
        });
        std::this_thread::sleep_for(15ms);
        ran.fetch_add(1);
      });
      std::this_thread::sleep_for(3ms);
      g.wait();
      EXPECT_EQ(g.pending(), 0u);
    });
  }
  EXPECT_EQ(ran.load(), 18);
}

// A waiter that is not the owner, while a
// heap task of the group (possibly on the owner thread) spawns a nested
// task: wait() must neither hang nor return before the nested task ends.
TEST(GroupSlot, NonOwnerWaiterWithNestedSpawn) {
  pwtest::Watchdog w("GroupSlot.NonOwnerWaiterWithNestedSpawn", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int round = 0; round < 6; ++round) {
    std::unique_ptr<parkway::TaskGroup> g;
    std::atomic<bool> go{false}, nested_done{false};
    rt.run([&] {  // the group's owner is this worker
      g = std::make_unique<parkway::TaskGroup>();
      char pad[80] = {};  // too big for the slot: a heap task
      g->spawn([&, pad] {
        (void)pad;
        while (!go.load()) std::this_thread::yield();
        std::this_thread::sleep_for(10ms);  // the main thread waits by then
        g->spawn([&] {
          std::this_thread::sleep_for(30ms);
          nested_done = true;
        });
      });
    });
    go = true;
    g->wait();  // the main thread: not the owner
    EXPECT_TRUE(nested_done.load()) << "wait() returned before a task of the group finished (round " << round << ")";
    g.reset();
  }
}

}  // namespace

namespace {

// slot.pml's bug-child-pending case in real threads: the slot task, run by
// a worker while the owner sleeps, spawns a heap task into its own group
// after the owner registered (in the slot only: pending_ was 0). The
// owner must register in pending_ at its recheck, or that task's done()
// wakes nobody.
TEST(GroupSlot, SlotTaskSpawnsIntoItsGroupWhileOwnerSleeps) {
  pwtest::Watchdog w("GroupSlot.SlotTaskSpawnsIntoItsGroupWhileOwnerSleeps", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int round = 0; round < 20; ++round) {
    parkway::TaskGroup g(rt);  // outside owner: the slot task runs on a worker
    std::atomic<bool> h_done{false};
    g.spawn([&] {
      std::this_thread::sleep_for(2ms);  // the owner is asleep by now
      g.spawn([&] {
        std::this_thread::sleep_for(5ms);
        h_done = true;
      });
    });
    g.wait();
    ASSERT_TRUE(h_done.load()) << "round " << round;
  }
}

}  // namespace

namespace {

// A non-owner waiter that decided to sleep from a slot load taken before
// the owner reused the group would be registered nowhere and sleep
// untimed for good (slot.pml X_OLD=2); the decision is made on one
// snapshot of both words. The owner (an outside thread) runs spawn/wait
// rounds while another thread waits on the same group over and over;
// after the owner's last round every wait must return.
TEST(GroupSlot, NonOwnerWaitsWhileOwnerReusesGroup) {
  pwtest::Watchdog w("GroupSlot.NonOwnerWaitsWhileOwnerReusesGroup", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  parkway::TaskGroup g(rt);
  std::atomic<bool> owner_done{false};
  std::atomic<long> waits{0};
  std::thread x([&] {
    while (!owner_done.load(std::memory_order_acquire)) {
      g.wait();
      waits.fetch_add(1, std::memory_order_relaxed);
    }
    g.wait();
  });
  const int rounds = 20000 / pwtest::kSlow;
  std::atomic<long> ran{0};
  for (int i = 0; i < rounds; ++i) {
    g.spawn([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    g.wait();
  }
  owner_done.store(true, std::memory_order_release);
  x.join();
  EXPECT_EQ(ran.load(), rounds);
  std::printf("non-owner waits that returned while the owner reused the group: %ld\n", waits.load());
}

}  // namespace

namespace {

// A worker whose wait learns, in the middle of its helping loop (a
// search round or its park's recheck, not the loop's top), that no
// completer will wake it must still poll. Here the owner waits on a
// worker of b while another thread's id sits in pending_ (it registered
// during H1 and keeps waiting for the slot task S); S then spawns H2, so
// pending_ counts a task whose last done() wakes that other thread only.
// b's one worker searches long (search_rounds), so the owner sees H2 in a
// search round. It set `timed` there, but the loop it was in had been
// started untimed and only its top exits: it parked untimed and slept
// for good once H2 ended (b has no other work to wake it).
TEST(GroupSlot, AWorkerThatMustPollLearntMidLoopDoesNotSleepForGood) {
  pwtest::Watchdog w("GroupSlot.AWorkerThatMustPollLearntMidLoopDoesNotSleepForGood", 120);
  parkway::Runtime a(parkway::Options{.workers = 2, .name = "a"});
  parkway::Runtime b(parkway::Options{.workers = 1, .search_rounds = 1000000, .name = "b"});
  std::atomic<parkway::TaskGroup*> group{nullptr};
  std::atomic<bool> h1_go{false}, owner_waiting{false}, owner_done{false}, other_done{false};
  std::atomic<int> ran{0};
  auto owner = b.submit([&] {
    parkway::TaskGroup g(a);  // the owner is b's worker; the tasks run on a
    g.spawn([&] {             // S, in the slot
      while (!owner_waiting.load()) std::this_thread::yield();
      std::this_thread::sleep_for(5ms);  // the owner is searching by now
      g.spawn([&] {                      // H2: from a worker of a, a heap task
        std::this_thread::sleep_for(1500ms);  // longer than b's searches
        ran.fetch_add(1);
      });
      ran.fetch_add(1);
    });
    g.spawn([&] {  // H1: the slot is busy, so a heap task
      while (!h1_go.load()) std::this_thread::yield();
      ran.fetch_add(1);
    });
    group.store(&g);
    while (g.pending() != 1) std::this_thread::yield();  // H1 done, S still running
    owner_waiting.store(true);
    g.wait();
    owner_done.store(true);
    while (!other_done.load()) std::this_thread::yield();  // g outlives the other wait
  });
  while (!group.load()) std::this_thread::yield();
  std::thread other([&] {
    group.load()->wait();  // registers in pending_ while H1 runs
    other_done.store(true);
  });
  std::this_thread::sleep_for(50ms);
  h1_go.store(true);
  for (int i = 0; i < 5000 && !owner_done.load(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(owner_done.load()) << "the owner's wait was still asleep 5 s after its group finished";
  // Unstick a sleeping owner (a task for b wakes its worker), so the test ends.
  for (int i = 0; i < 100 && !owner_done.load(); ++i) {
    b.submit([] {});
    std::this_thread::sleep_for(10ms);
  }
  owner.get();
  other.join();
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
