// txn/tag.hpp -- priority tags: the contention manager of parkway's
// multi-CAS transactions (docs/design/priority-tags.md; model:
// docs/spec/priority_tags.pml).
//
// Algorithm outline (after KAME's STM bundle/unbundle "negotiate"):
//   Each guarded word w has a TagSlot: 0 (empty) or the stamp of the one
//   transaction that claims w. A stamp is a ticket from a global clock,
//   taken the first time a transaction fails a CAS or has to wait, and kept
//   until it commits: smaller (older) stamps win, and a retrying transaction
//   only grows older relative to newcomers.
//   gate(w)        CanProceed: before every CAS on w, go on if the slot is
//                  empty or mine; else PreemptTag if I am older than the
//                  holder, else wait (spin, then timed futex waits).
//   after_fail(w)  TagAfterFail: empty -> mine; mine -> keep; held by a
//                  younger one -> mine; held by an older one -> theirs.
//   (success)      TagAfterSuccess: keep the tag until commit.
//   commit()       ClearMyTags: release every slot still holding my stamp,
//                  wake its waiters. The destructor does the same (abort).
// Tags only order who may CAS next; every CAS still validates the word, so
// safety never depends on them. That is why a waiter whose patience
// (kPatienceNs) runs out may take the tag over regardless of age: a tag
// holder that the OS descheduled delays contenders by at most that much.
//
// Txn(false) turns the mechanism off (Options::priority_tags = false):
// gate() and after_fail() then only count.
#pragma once

#include <atomic>
#include <cstdint>

namespace parkway::detail::txn {

// A tag slot word: 0 = empty, else stamp (bits 0..30, never 0) | kWaiters.
struct TagSlot {
  static constexpr std::uint32_t kWaiters = 0x80000000u;  // someone sleeps on it
  static constexpr std::uint32_t kStampMask = 0x7fffffffu;
  std::atomic<std::uint32_t> word{0};
};

// Stamps are 31-bit serial numbers: a is older than b iff a - b is negative
// modulo 2^31 (valid while live stamps span less than 2^30 tickets).
inline bool older(std::uint32_t a, std::uint32_t b) noexcept {
  return ((a - b) & TagSlot::kStampMask) > (TagSlot::kStampMask >> 1);
}

// What one transaction cost; the contention test and the bench read these.
struct TxnCounters {
  std::uint32_t retries = 0;   // failed CASes (each one re-reads and tries again)
  std::uint32_t waits = 0;     // gates that found another transaction's tag
  std::uint32_t preempts = 0;  // PreemptTag taken over a younger holder
  std::uint32_t bypasses = 0;  // patience ran out: took an older holder's tag
};

class Txn {
 public:
  static constexpr unsigned kMaxHeld = 4;           // distinct slots one transaction tags
  static constexpr std::uint64_t kPatienceNs = 1000000;  // 1 ms, then bypass

  explicit Txn(bool enabled) noexcept : on_(enabled) {}
  ~Txn() {
    if (nheld_) clear_my_tags();
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  // CanProceed (+ PreemptTag, + the timed wait). Call right before a CAS.
  void gate(TagSlot& s) noexcept {
    if (!on_) return;
    std::uint32_t v = s.word.load(std::memory_order_acquire);
    if (v == 0 || (stamp_ != 0 && (v & TagSlot::kStampMask) == stamp_)) return;
    gate_slow(s);
  }

  // TagAfterFail. Call after the CAS on the word guarded by `s` failed.
  void after_fail(TagSlot& s) noexcept {
    ++c_.retries;
    if (on_) after_fail_slow(s);
  }

  // ClearMyTags at commit.
  void commit() noexcept {
    if (nheld_) clear_my_tags();
  }

  const TxnCounters& counters() const noexcept { return c_; }
  std::uint32_t stamp() const noexcept { return stamp_; }
  bool enabled() const noexcept { return on_; }

 private:
  void gate_slow(TagSlot& s) noexcept;
  void after_fail_slow(TagSlot& s) noexcept;
  void clear_my_tags() noexcept;
  void ensure_stamp() noexcept;
  void hold(TagSlot& s) noexcept;
  static void wake_all(TagSlot& s) noexcept;
  bool take_over(TagSlot& s, std::uint32_t v, std::uint32_t& counter) noexcept;

  const bool on_;
  std::uint8_t nheld_ = 0;
  std::uint32_t stamp_ = 0;  // 0: not stamped yet (younger than everyone)
  TagSlot* held_[kMaxHeld];  // [0, nheld_) valid
  TxnCounters c_;
};

}  // namespace parkway::detail::txn
