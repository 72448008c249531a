// txn/inject_tree.hpp -- the 2-level injection queue: per-producer child
// stacks under one parent summary word, updated by priority-tag
// transactions (txn/tag.hpp). Design note: docs/design/priority-tags.md;
// SPIN model: docs/spec/priority_tags.pml (step names [P1].. below are the
// model's).
//
// Words:
//   child i  head: Treiber stack of Task* (newest first), low 48 bits the
//            pointer, high 16 bits a saturating count; or, when empty,
//            OPEN (0: nonempty(i) is still set, a claimer holds the child
//            or will find it) or CLOSED (1: nonempty(i) is clear or being
//            cleared; the next push must announce). Producers only push;
//            a worker takes the whole stack at once.
//   parent   summary: bits 0..15 nonempty (child i holds or may hold work),
//            bits 16..31 claimed (a worker is draining child i), bits
//            32..63 the work epoch, bumped by every announcement.
//   pending  per child, consumer side: what a claimer took from the head,
//            in FIFO order; touched only by the worker holding the claim.
//
// Transactions (each CAS is preceded by gate() and followed, on failure,
// by after_fail(); commit() releases the tags):
//   push:   [P1] CAS head h -> t (t->next = h)
//           [P2] only if h was CLOSED: CAS summary, set nonempty(i) and
//                epoch+1 (always bump: that is what fails a [W3] racing
//                with this push). A push onto OPEN or a nonempty stack
//                does not touch the parent: the common path is one CAS.
//   pop:    [W1] CAS summary: set claimed(i) for an i nonempty & unclaimed
//           [W2] if pending is empty: exchange head -> OPEN, reverse into
//                pending; hand out up to `max` from pending
//           [W3c] if this claim found nothing (pending and head empty):
//                CAS head OPEN -> CLOSED (fails if a push got in: then keep
//                nonempty(i)). A child that just gave tasks stays OPEN, so
//                a streaming producer never touches the parent.
//           [W3] CAS summary: clear claimed(i), and nonempty(i) too if we
//                closed the child and a re-read of head, after the read of
//                summary, still sees CLOSED. A retried CAS re-validates.
// Lemma: head == OPEN implies nonempty(i) is set (OPEN is made by the
// claimer, which clears the bit only after closing), so a push onto OPEN
// is visible at once. No CAS result is ever undone, so without tags every
// loop is lock-free (a failed CAS means another one succeeded); the tags
// add the bound: a transaction that failed gets a stamp and the oldest
// stamp always goes next.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "parkway/task.hpp"
#include "txn/tag.hpp"

namespace parkway::detail::txn {

class InjectTree {
 public:
  static constexpr unsigned kChildren = 16;

  // `children`: 1, 2, 4, 8 or 16 (rounded down to a power of two; tests
  // use 1 to put every producer on the same child).
  explicit InjectTree(bool priority_tags, unsigned children = kChildren) noexcept
      : tags_(priority_tags), nchildren_(pow2_floor(children)) {}
  InjectTree(const InjectTree&) = delete;
  InjectTree& operator=(const InjectTree&) = delete;

  // The calling thread's child: producers are spread round-robin in the
  // order they first push, so up to kChildren producers get a child each.
  unsigned my_child() const noexcept {
    thread_local unsigned mine = next_producer_.fetch_add(1, std::memory_order_relaxed);
    return mine & (nchildren_ - 1);
  }

  void push(Task* t, TxnCounters* out = nullptr) noexcept {
    Txn tx(tags_);
    const unsigned i = my_child();
    Child& c = child_[i];
    std::uint64_t h = c.head.load(std::memory_order_relaxed);
    for (;;) {
      t->next = ptr_of(h);
      tx.gate(c.tag);
      // [P1] release: publishes *t to the worker's [W2] exchange.
      // seq_cst: a total order with [W3c] and [W3v] (see [W3]).
      if (c.head.compare_exchange_strong(h, pack(t, count_of(h) + 1), std::memory_order_seq_cst,
                                         std::memory_order_relaxed))
        break;
      tx.after_fail(c.tag);
    }
    if (h == kClosed) {  // the child was closed: announce it in the parent
      std::uint64_t s = summary_.load(std::memory_order_seq_cst);  // [P2r]
      for (;;) {
        tx.gate(ptag_);
        // [P2] set nonempty(i) and bump the epoch even if the bit is set:
        // the bump is what fails a [W3] that re-validated before our [P1].
        // seq_cst: pairs with the parking recheck (maybe_nonempty) and
        // Parking::should_wake's fence.
        if (summary_.compare_exchange_strong(s, (s | nonempty_bit(i)) + kEpochOne,
                                             std::memory_order_seq_cst))
          break;
        tx.after_fail(ptag_);
      }
    }
    tx.commit();
    if (out) *out = tx.counters();
  }

  // Up to `max` (>= 1) tasks, oldest first per producer, linked by next.
  Task* pop_batch(std::size_t max, std::size_t* n, TxnCounters* out = nullptr) noexcept;

  // True if some announced child is claimed or has tasks in its head or
  // pending list. (A child that gave out its last tasks stays announced
  // and OPEN until a dry claim closes it; it does not count here, so idle
  // workers do not chase it.) Reads the summary, then the announced
  // children's heads, all seq_cst: after a push onto child i returned,
  // either nonempty(i) is set and the head still holds the task or a
  // claimer took it, or an announcing push is still in flight.
  bool maybe_nonempty() const noexcept {
    std::uint64_t s = summary_.load(std::memory_order_seq_cst);
    std::uint32_t ne = std::uint32_t(s & kNonemptyMask);
    if (ne & std::uint32_t(s >> 16)) return true;  // a claimer is at work
    while (ne) {
      unsigned i = unsigned(__builtin_ctz(ne));
      ne &= ne - 1;
      if (ptr_of(child_[i].head.load(std::memory_order_seq_cst)) != nullptr) return true;
      if (pending_[i].count.load(std::memory_order_relaxed) != 0) return true;
    }
    return false;
  }

  // Tasks in nonempty children (heads' saturating counts + pending counts).
  std::size_t size_hint() const noexcept;

  bool priority_tags() const noexcept { return tags_; }
  std::uint64_t summary() const noexcept { return summary_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t kPtrMask = ((std::uint64_t(1) << 48) - 1) & ~std::uint64_t(7);
  static constexpr std::uint64_t kClosed = 1;  // empty and not announced (see the header)
  static constexpr std::uint64_t kCountMax = 0xffff;
  static constexpr std::uint64_t kNonemptyMask = 0xffff;
  static constexpr std::uint64_t kEpochOne = std::uint64_t(1) << 32;

  static Task* ptr_of(std::uint64_t h) noexcept { return reinterpret_cast<Task*>(h & kPtrMask); }
  static std::uint64_t count_of(std::uint64_t h) noexcept { return h >> 48; }
  static std::uint64_t pack(Task* t, std::uint64_t count) noexcept {
    if (count > kCountMax) count = kCountMax;
    return reinterpret_cast<std::uintptr_t>(t) | (count << 48);
  }
  static unsigned pow2_floor(unsigned n) noexcept {
    if (n == 0 || n > kChildren) return kChildren;
    while (n & (n - 1)) n &= n - 1;
    return n;
  }
  static std::uint64_t nonempty_bit(unsigned i) noexcept { return std::uint64_t(1) << i; }
  static std::uint64_t claimed_bit(unsigned i) noexcept { return std::uint64_t(1) << (16 + i); }

  struct alignas(64) Child {
    std::atomic<std::uint64_t> head{kClosed};
    TagSlot tag;
  };
  struct alignas(64) Pending {
    Task* first = nullptr;                  // FIFO, owned by the claim holder
    Task* last = nullptr;
    std::atomic<std::size_t> count{0};      // read racily by size_hint()
  };

  const bool tags_;
  const unsigned nchildren_;
  alignas(64) std::atomic<std::uint64_t> summary_{0};  // every child starts closed
  TagSlot ptag_;
  Child child_[kChildren];
  Pending pending_[kChildren];
  static inline std::atomic<unsigned> next_producer_{0};
};

}  // namespace parkway::detail::txn
