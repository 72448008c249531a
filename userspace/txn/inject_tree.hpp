// txn/inject_tree.hpp -- the 2-level injection queue: per-producer child
// stacks under one parent summary word, updated by priority-tag
// transactions (txn/tag.hpp). Design note: docs/design/priority-tags.md;
// SPIN model: docs/spec/priority_tags.pml (step names [P1].. below are the
// model's).
//
// Words:
//   child i  head: Treiber stack of Task* (newest first), low 48 bits the
//            pointer, high 16 bits a saturating count. Producers only push;
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
//           [P2] if h was empty: CAS summary, set nonempty(i), epoch+1
//                (unconditionally: the epoch bump is what makes a
//                concurrent [W3] that validated an empty child fail)
//           [P2h] else if nonempty(i) reads clear: help set it the same way
//   pop:    [W1] CAS summary: set claimed(i) for an i nonempty & unclaimed
//           [W2] if pending is empty: exchange head -> empty, reverse into
//                pending; hand out up to `max` from pending
//           [W3] CAS summary: clear claimed(i), and nonempty(i) too if
//                pending is empty and a re-read of head (after the read of
//                summary) is empty. Retried CASes re-validate the child.
// No CAS result is ever undone, so without tags every loop is lock-free
// (a failed CAS means another one succeeded); the tags add the bound: a
// transaction that failed gets a stamp and the oldest stamp always goes next.
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

  explicit InjectTree(bool priority_tags, unsigned children = kChildren) noexcept
      : tags_(priority_tags), nchildren_(children == 0 || children > kChildren ? kChildren : children) {}
  InjectTree(const InjectTree&) = delete;
  InjectTree& operator=(const InjectTree&) = delete;

  // The calling thread's child: producers are spread round-robin in the
  // order they first push, so up to kChildren producers get a child each.
  unsigned my_child() const noexcept {
    thread_local unsigned mine = next_producer_.fetch_add(1, std::memory_order_relaxed);
    return mine % nchildren_;
  }

  void push(Task* t, TxnCounters* out = nullptr) noexcept {
    Txn tx(tags_);
    const unsigned i = my_child();
    Child& c = child_[i];
    std::uint64_t h = c.head.load(std::memory_order_relaxed);
    for (;;) {
      t->next = ptr_of(h);
      tx.gate(c.tag);
      // [P1] seq_cst: pairs with the summary re-read in [W3] (the child
      // write here and the summary read below against W3's summary read
      // and head re-read: a store-buffering pair).
      if (c.head.compare_exchange_strong(h, pack(t, count_of(h) + 1), std::memory_order_seq_cst,
                                         std::memory_order_relaxed))
        break;
      tx.after_fail(c.tag);
    }
    const bool announcer = ptr_of(h) == nullptr;
    std::uint64_t s = summary_.load(std::memory_order_seq_cst);
    if (announcer || !(s & nonempty_bit(i))) {
      for (;;) {
        tx.gate(ptag_);
        // [P2] / [P2h] seq_cst: the parking recheck's maybe_nonempty()
        // and Parking::should_wake's fence pair with this write.
        if (summary_.compare_exchange_strong(s, (s | nonempty_bit(i)) + kEpochOne,
                                             std::memory_order_seq_cst))
          break;
        tx.after_fail(ptag_);
        if (!announcer && (s & nonempty_bit(i))) break;  // [P2h] someone announced it
      }
    }
    tx.commit();
    if (out) *out = tx.counters();
  }

  // Up to `max` (>= 1) tasks, oldest first per producer, linked by next.
  Task* pop_batch(std::size_t max, std::size_t* n, TxnCounters* out = nullptr) noexcept;

  bool maybe_nonempty() const noexcept {
    return (summary_.load(std::memory_order_seq_cst) & kNonemptyMask) != 0;
  }

  // Tasks in nonempty children (heads' saturating counts + pending counts).
  std::size_t size_hint() const noexcept;

  bool priority_tags() const noexcept { return tags_; }
  std::uint64_t summary() const noexcept { return summary_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t kPtrMask = (std::uint64_t(1) << 48) - 1;
  static constexpr std::uint64_t kCountMax = 0xffff;
  static constexpr std::uint64_t kNonemptyMask = 0xffff;
  static constexpr std::uint64_t kEpochOne = std::uint64_t(1) << 32;

  static Task* ptr_of(std::uint64_t h) noexcept { return reinterpret_cast<Task*>(h & kPtrMask); }
  static std::uint64_t count_of(std::uint64_t h) noexcept { return h >> 48; }
  static std::uint64_t pack(Task* t, std::uint64_t count) noexcept {
    if (count > kCountMax) count = kCountMax;
    return reinterpret_cast<std::uintptr_t>(t) | (count << 48);
  }
  static std::uint64_t nonempty_bit(unsigned i) noexcept { return std::uint64_t(1) << i; }
  static std::uint64_t claimed_bit(unsigned i) noexcept { return std::uint64_t(1) << (16 + i); }

  struct alignas(64) Child {
    std::atomic<std::uint64_t> head{0};
    TagSlot tag;
  };
  struct alignas(64) Pending {
    Task* first = nullptr;                  // FIFO, owned by the claim holder
    Task* last = nullptr;
    std::atomic<std::size_t> count{0};      // read racily by size_hint()
  };

  const bool tags_;
  const unsigned nchildren_;
  alignas(64) std::atomic<std::uint64_t> summary_{0};
  TagSlot ptag_;
  Child child_[kChildren];
  Pending pending_[kChildren];
  static inline std::atomic<unsigned> next_producer_{0};
};

}  // namespace parkway::detail::txn
