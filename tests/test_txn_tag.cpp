// test_txn_tag.cpp -- the priority-tag layer (userspace/txn/tag.hpp) rule
// by rule: CanProceed, TagAfterFail, PreemptTag, ClearMyTags, the wait and
// the patience bypass, and the switch that turns it all off.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "txn/tag.hpp"

namespace {

using parkway::detail::txn::older;
using parkway::detail::txn::TagSlot;
using parkway::detail::txn::Txn;

std::uint32_t holder(const TagSlot& s) { return s.word.load() & TagSlot::kStampMask; }

TEST(TxnTag, OlderIsSerialArithmetic) {
  EXPECT_TRUE(older(1, 2));
  EXPECT_FALSE(older(2, 1));
  EXPECT_FALSE(older(5, 5));
  // across the 31-bit wrap: 0x7fffffff was issued just before 1
  EXPECT_TRUE(older(0x7fffffffu, 1));
  EXPECT_FALSE(older(1, 0x7fffffffu));
}

TEST(TxnTag, FailTagsEmptySlotKeepsItUntilCommit) {
  TagSlot s;
  {
    Txn a(true);
    a.gate(s);  // empty: proceeds without a stamp
    EXPECT_EQ(a.stamp(), 0u);
    a.after_fail(s);  // TagAfterFail: empty -> mine
    EXPECT_NE(a.stamp(), 0u);
    EXPECT_EQ(holder(s), a.stamp());
    a.gate(s);  // mine: proceeds
    a.after_fail(s);  // mine -> keep
    EXPECT_EQ(holder(s), a.stamp());
    EXPECT_EQ(a.counters().retries, 2u);
    a.commit();  // ClearMyTags
    EXPECT_EQ(s.word.load(), 0u);
  }
  {
    Txn b(true);
    b.after_fail(s);
    EXPECT_NE(s.word.load(), 0u);
  }  // abort path: the destructor clears
  EXPECT_EQ(s.word.load(), 0u);
}

TEST(TxnTag, FailKeepsAnOlderHoldersTagTakesAYoungers) {
  TagSlot s, other;
  Txn old_tx(true), young(true);
  old_tx.after_fail(other);  // stamps old_tx first: it is the older
  young.after_fail(s);       // young holds s
  EXPECT_TRUE(older(old_tx.stamp(), young.stamp()));
  old_tx.after_fail(s);  // another's, and I am older -> mine
  EXPECT_EQ(holder(s), old_tx.stamp());
  young.after_fail(s);  // another's, and I am younger -> theirs
  EXPECT_EQ(holder(s), old_tx.stamp());
  young.commit();  // not mine any more: left alone
  EXPECT_EQ(holder(s), old_tx.stamp());
  old_tx.commit();
  EXPECT_EQ(s.word.load(), 0u);
  EXPECT_EQ(other.word.load(), 0u);
}

TEST(TxnTag, OlderWaiterPreemptsAYoungerHolder) {
  TagSlot s, other;
  Txn old_tx(true), young(true);
  old_tx.after_fail(other);
  young.after_fail(s);
  old_tx.gate(s);  // PreemptTag: returns at once, the slot is now mine
  EXPECT_EQ(holder(s), old_tx.stamp());
  EXPECT_EQ(old_tx.counters().preempts, 1u);
  old_tx.commit();
  EXPECT_EQ(s.word.load(), 0u);
}

TEST(TxnTag, YoungerWaiterWaitsForTheCommit) {
  // The waiter must not pass the gate before the holder commits, unless
  // its patience ran out (it waited at least kPatienceNs): then it must
  // have counted the bypass. The holder commits once the waiter sleeps on
  // the slot (or has already passed), so no timing decides the outcome: a
  // descheduled main thread can only turn a wake-up into a counted bypass.
  TagSlot s;
  Txn holder_tx(true);
  holder_tx.after_fail(s);  // tagged before the waiter exists: its gate must find it
  std::atomic<bool> committed{false}, passed{false}, early{false};
  std::atomic<std::uint32_t> bypasses{0}, waits{0};
  std::atomic<std::int64_t> waited_ns{0};
  std::thread waiter([&] {
    Txn w(true);  // stamped later: younger
    auto t0 = std::chrono::steady_clock::now();
    w.gate(s);
    if (!committed.load()) early.store(true);
    auto waited = std::chrono::steady_clock::now() - t0;
    waited_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count());
    bypasses.store(w.counters().bypasses);
    waits.store(w.counters().waits);
    passed.store(true);
    w.commit();
  });
  // wait until the waiter sleeps on the slot (kWaiters set) or has passed
  while (!(s.word.load() & TagSlot::kWaiters) && !passed.load()) std::this_thread::yield();
  committed.store(true);
  holder_tx.commit();  // ClearMyTags wakes the futex waiter
  waiter.join();
  EXPECT_TRUE(passed.load());
  EXPECT_EQ(waits.load(), 1u) << "the gate did not see the holder's tag";
  if (bypasses.load() == 0) {
    EXPECT_FALSE(early.load()) << "passed a younger-than-holder gate before the commit without bypassing";
  } else {
    EXPECT_EQ(bypasses.load(), 1u);
    EXPECT_GE(waited_ns.load(), std::int64_t(Txn::kPatienceNs)) << "bypassed before the patience ran out";
  }
  EXPECT_EQ(s.word.load(), 0u);
}

TEST(TxnTag, PatienceBypassesAStuckHolder) {
  TagSlot s;
  Txn stuck(true);  // an older holder that never commits (descheduled)
  stuck.after_fail(s);
  std::thread waiter([&] {
    Txn w(true);
    auto t0 = std::chrono::steady_clock::now();
    w.gate(s);
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count(),
              std::int64_t(Txn::kPatienceNs) / 2);
    EXPECT_EQ(w.counters().bypasses, 1u);
    EXPECT_EQ(holder(s), w.stamp());
    w.commit();
  });
  waiter.join();
  EXPECT_EQ(s.word.load(), 0u);
  stuck.commit();  // its tag was taken: nothing to clear
  EXPECT_EQ(s.word.load(), 0u);
}

TEST(TxnTag, SwitchedOffOnlyCounts) {
  TagSlot s;
  Txn on(true);
  on.after_fail(s);
  Txn off(false);
  off.gate(s);  // never waits, even on another's tag
  off.after_fail(s);
  EXPECT_EQ(off.counters().retries, 1u);
  EXPECT_EQ(off.counters().waits, 0u);
  EXPECT_EQ(off.stamp(), 0u);
  EXPECT_EQ(holder(s), on.stamp());
  on.commit();
}

}  // namespace
