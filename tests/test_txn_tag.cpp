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
  // its 1 ms patience ran out (a loaded or sanitized run can oversleep the
  // holder's 300 us): then it must have counted the bypass.
  TagSlot s;
  Txn holder_tx(true);
  holder_tx.after_fail(s);
  std::atomic<bool> committed{false}, passed{false}, early{false};
  std::atomic<std::uint32_t> bypasses{0};
  std::thread waiter([&] {
    Txn w(true);  // stamped later: younger
    w.gate(s);
    if (!committed.load()) early.store(true);
    bypasses.store(w.counters().bypasses);
    passed.store(true);
    w.commit();
  });
  std::this_thread::sleep_for(std::chrono::microseconds(300));  // under the 1 ms patience
  committed.store(true);
  holder_tx.commit();  // ClearMyTags wakes the futex waiter
  waiter.join();
  EXPECT_TRUE(passed.load());
  if (early.load()) {
    EXPECT_EQ(bypasses.load(), 1u) << "passed a younger-than-holder gate without waiting or bypassing";
  } else {
    EXPECT_EQ(bypasses.load(), 0u);
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
