// txn/tag.cpp -- the slow paths of the priority-tag layer (txn/tag.hpp):
// stamping, PreemptTag, the timed wait, TagAfterFail, ClearMyTags.
#include "txn/tag.hpp"

#include <climits>
#include <ctime>

#include "clock.hpp"
#include "futex.hpp"

namespace parkway::detail::txn {

namespace {

constexpr unsigned kSpins = 64;          // pause-spins before the first futex wait
constexpr long kWaitSliceNs = 50000;     // one futex wait, then look again

// The stamp clock: one ticket per transaction that ever has to negotiate.
// Uncontended transactions never touch it.
// On a line of its own: every stamping transaction writes it, and it must
// not drag unrelated data (or be dragged) between cores. alignas on the
// variable alone only starts the line: the linker put other data in the
// rest of it (nm: the next symbol 8 bytes on), so the struct pads it to 64.
struct alignas(64) StampClock {
  std::atomic<std::uint32_t> next{1};
};
static_assert(sizeof(StampClock) == 64, "the stamp clock fills its cache line");
StampClock g_stamp_clock;

}  // namespace

void Txn::ensure_stamp() noexcept {
  while (stamp_ == 0) stamp_ = g_stamp_clock.next.fetch_add(1, std::memory_order_relaxed) & TagSlot::kStampMask;
}

void Txn::hold(TagSlot& s) noexcept {
  for (unsigned i = 0; i < nheld_; ++i)
    if (held_[i] == &s) return;
  if (nheld_ < kMaxHeld) held_[nheld_++] = &s;
  // More distinct slots than kMaxHeld cannot happen: parkway's transactions
  // guard two words (txn/inject_tree.hpp).
}

void Txn::wake_all(TagSlot& s) noexcept { futex_wake(&s.word, INT_MAX); }

// Replace the holder's stamp `v` (as last read) with mine: PreemptTag, or
// the patience bypass. Waiters parked on the slot re-check who holds it.
bool Txn::take_over(TagSlot& s, std::uint32_t v, std::uint32_t& counter) noexcept {
  if (!s.word.compare_exchange_strong(v, stamp_, std::memory_order_acq_rel)) return false;
  hold(s);
  ++counter;
  if (v & TagSlot::kWaiters) wake_all(s);
  return true;
}

// CanProceed failed: the slot holds another transaction's stamp.
// Model: GATE in docs/spec/priority_tags.pml (STAMP, then PreemptTag or the
// blocked wait; BYPASS=1 is the patience bypass), one atomic step there.
// Here it is gate()'s load, the stamp's fetch_add, then loads each followed
// by at most one CAS that validates it; why the model's single step covers
// that: priority-tags.md, section 3.
void Txn::gate_slow(TagSlot& s) noexcept {
  ensure_stamp();
  ++c_.waits;
  unsigned spins = 0;
  std::uint64_t t0 = 0;
  for (;;) {
    std::uint32_t v = s.word.load(std::memory_order_acquire);
    std::uint32_t holder = v & TagSlot::kStampMask;
    if (v == 0 || holder == stamp_) return;  // CanProceed
    if (older(stamp_, holder)) {
      // PreemptTag: an older waiter replaces a younger holder's stamp. The
      // holder's finished CASes stay valid (nothing is undone); it simply
      // waits for me at its next gate on this word.
      if (take_over(s, v, c_.preempts)) return;
      continue;
    }
    if (spins < kSpins) {
      ++spins;
      cpu_relax();
      continue;
    }
    std::uint64_t now = monotonic_ns();
    if (t0 == 0) {
      t0 = now;
    } else if (now - t0 >= kPatienceNs) {
      // The older holder has not committed for kPatienceNs: most likely the
      // OS descheduled it. Take the tag anyway (safe: tags never replace
      // validation). It will preempt us back at its next gate.
      if (take_over(s, v, c_.bypasses)) return;
      continue;
    }
    if (!(v & TagSlot::kWaiters)) {
      if (!s.word.compare_exchange_strong(v, v | TagSlot::kWaiters, std::memory_order_acq_rel)) continue;
      v |= TagSlot::kWaiters;
    }
    timespec ts{0, kWaitSliceNs};
    futex_wait(&s.word, v, &ts);  // woken by ClearMyTags / PreemptTag, or times out
  }
}

// TagAfterFail: empty -> mine; mine -> keep (the stamp is fixed);
// another's and I am older -> mine; otherwise keep theirs. Model: TAGFAIL,
// a step of its own after the failed CAS (p1fail .. w3fail), atomic there;
// here a stamp, a load, and a CAS that validates it.
void Txn::after_fail_slow(TagSlot& s) noexcept {
  ensure_stamp();
  std::uint32_t v = s.word.load(std::memory_order_acquire);
  for (;;) {
    std::uint32_t holder = v & TagSlot::kStampMask;
    if (holder == stamp_) {
      hold(s);  // already mine (e.g. taken in gate by PreemptTag)
      return;
    }
    if (v != 0 && !older(stamp_, holder)) return;  // an older one keeps it
    if (s.word.compare_exchange_weak(v, stamp_, std::memory_order_acq_rel)) {
      hold(s);
      if (v & TagSlot::kWaiters) wake_all(s);
      return;
    }
  }
}

// ClearMyTags: release each slot that still carries my stamp (a slot taken
// over by PreemptTag or a bypass is no longer mine and is left alone).
// Model: CLEARTAGS (with UNSTAMP: the stamp dies with the transaction).
void Txn::clear_my_tags() noexcept {
  for (unsigned i = 0; i < nheld_; ++i) {
    TagSlot& s = *held_[i];
    std::uint32_t v = s.word.load(std::memory_order_relaxed);
    while ((v & TagSlot::kStampMask) == stamp_) {
      if (s.word.compare_exchange_weak(v, 0, std::memory_order_acq_rel)) {
        if (v & TagSlot::kWaiters) wake_all(s);
        break;
      }
    }
    held_[i] = nullptr;
  }
  nheld_ = 0;
}

}  // namespace parkway::detail::txn
