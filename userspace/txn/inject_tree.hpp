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
// Transactions (each CAS, and the exchange [W2] and fetch_and [W3a], is
// preceded by gate(); each failed CAS but [W3c] is followed by
// after_fail() and retried, a failed [W3c] is not retried and takes no
// tag; commit() releases the tags):
//   push:   [P1] CAS head h -> t (t->next = h)
//           [P2] only if h was CLOSED: CAS summary, set nonempty(i) and
//                epoch+1 (always bump: that is what fails a [W3] racing
//                with this push). A push onto OPEN or a nonempty stack
//                does not touch the parent: the common path is one CAS.
//   pop:    one transaction per round, one claim each, repeated until the
//           batch holds `max` tasks, nothing is left to claim, or
//           nchildren rounds are done (a refilled child may be claimed
//           again in a later round):
//           [W1] CAS summary: set claimed(i) for an i nonempty & unclaimed
//           [W2] if pending is empty: count = 1 ([W2c], for maybe_nonempty),
//                exchange head -> OPEN, reverse into pending ([W2p]);
//                hand out what the batch still lacks
//           [W3c] if this claim found nothing (pending and head empty):
//                CAS head OPEN -> CLOSED (fails if a push got in: then keep
//                nonempty(i)). A child that just gave tasks stays OPEN, so
//                a streaming producer never touches the parent.
//           [W3a] if we did not close it: fetch_and summary, clear
//                claimed(i) (cannot fail: only the claimer writes that bit)
//           [W3] if we closed it: CAS summary, clear claimed(i), and
//                nonempty(i) too if a re-read of head, after the read of
//                summary, still sees CLOSED. A retried CAS re-validates.
// Producers: child i is owned by one live submitting thread while at most
// nchildren threads push (txn/producer_slots.hpp); more share a child.
// Memory orders: every RMW on a head or the summary and the loads that
// decide ([P2r], [W1r], [W3r], [W3v], maybe_nonempty) are seq_cst; [P1r],
// the reload of a failed [P1], size_hint(), summary() and the pending
// counts are relaxed.
// Lemma: head == OPEN implies nonempty(i) is set (OPEN is made by the
// claimer, which clears the bit only after closing), so a push onto OPEN
// is visible at once. No CAS result is ever undone, so without tags every
// loop is lock-free (a failed CAS means another one succeeded); the tags
// add the bound: a transaction that failed gets a stamp, and the oldest
// stamp is never made to wait (it preempts any tag in its way).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "parkway/task.hpp"
#include "txn/producer_slots.hpp"
#include "txn/tag.hpp"

namespace parkway::detail::txn {

// Test seams: window() runs between reading a guarded word and the CAS on
// it, so a test can widen the race window (tests/test_txn_contention.cpp);
// after_take() runs right after a claimer's [W2] exchange, and
// after_summary_read() right after maybe_nonempty() read the summary, so a
// test can interleave a claim with a parking recheck step by step
// (tests/test_txn_inject.cpp). A Hooks type may leave any of them out.
// The runtime uses NoHooks, which compiles to nothing.
struct NoHooks {
  static void window() noexcept {}
};

template <class Hooks = NoHooks>
class BasicInjectTree {
  static void window() noexcept {
    if constexpr (requires { Hooks::window(); }) Hooks::window();
  }
  static void after_take() noexcept {
    if constexpr (requires { Hooks::after_take(); }) Hooks::after_take();
  }
  static void after_summary_read() noexcept {
    if constexpr (requires { Hooks::after_summary_read(); }) Hooks::after_summary_read();
  }

 public:
  static constexpr unsigned kChildren = 16;

  // `children`: 1, 2, 4, 8 or 16 (rounded down to a power of two; tests
  // use 1 to put every producer on the same child).
  explicit BasicInjectTree(bool priority_tags, unsigned children = kChildren) noexcept
      : tags_(priority_tags), nchildren_(pow2_floor(children)), slots_(nchildren_) {}
  BasicInjectTree(const BasicInjectTree&) = delete;
  BasicInjectTree& operator=(const BasicInjectTree&) = delete;

  // The calling thread's child (txn/producer_slots.hpp): its own while at
  // most nchildren threads push to this tree, claimed at its first push and
  // released when it exits. A thread that had to share a child moves to a
  // freed one once its shared child has handed out everything (head and
  // pending empty), so its tasks keep their order.
  unsigned my_child() noexcept {
    unsigned i = slots_.mine();
    if (i & ProducerSlots::kShared) [[unlikely]] {
      i &= ~ProducerSlots::kShared;
      if (slots_.has_free() && ptr_of(child_[i].head.load(std::memory_order_seq_cst)) == nullptr &&
          pending_[i].count.load(std::memory_order_relaxed) == 0)
        i = slots_.reclaim() & ~ProducerSlots::kShared;
    }
    return i;
  }

  // The children owned by live threads, one bit each (tests).
  std::uint32_t owned_children() const noexcept { return slots_.owned(); }

  void push(Task* t, TxnCounters* out = nullptr) noexcept {
    Txn tx(tags_);
    const unsigned i = my_child();
    Child& c = child_[i];
    std::uint64_t h = c.head.load(std::memory_order_relaxed);  // [P1r]
    for (;;) {
      t->next = ptr_of(h);
      window();
      tx.gate(c.tag);  // [P1g]
      // [P1] release: publishes *t to the worker's [W2] exchange. seq_cst:
      // one total order with [W2], [W3c] and the [W3v] re-read.
      if (c.head.compare_exchange_strong(h, pack(t, count_of(h) + 1), std::memory_order_seq_cst,
                                         std::memory_order_relaxed))
        break;
      tx.after_fail(c.tag);  // TagAfterFail; h now holds the new head
    }
    if (h == kClosed) {  // the child was closed: announce it in the parent
      std::uint64_t s = summary_.load(std::memory_order_seq_cst);  // [P2r]
      for (;;) {
        window();
        tx.gate(ptag_);  // [P2g]
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
    tx.commit();  // ClearMyTags
    if (out) *out = tx.counters();
  }

  // Up to `max` (>= 1) tasks, oldest first per producer, linked by next.
  // The batch is filled from as many children as it takes (as
  // moodycamel's try_dequeue_bulk walks its producers): one claim per
  // round, each its own transaction, at most nchildren_ rounds; a child
  // that was refilled or released meanwhile can be claimed twice. Taking
  // only the first child's few tasks made consumers come back several
  // times as often, and each visit's [W2] pulls the producer's head line
  // away from it (priority-tags.md, "Filling a batch from several
  // children").
  Task* pop_batch(std::size_t max, std::size_t* n, TxnCounters* out = nullptr) noexcept {
    *n = 0;
    if (max == 0) max = 1;
    if (out) *out = TxnCounters{};
    Task* batch = nullptr;  // what the rounds so far took, in order
    Task* batch_last = nullptr;
    // Each round is one transaction and claims one child (the first
    // claimable one from this worker's cursor, so possibly one an earlier
    // round took from). The round count bounds the call.
    for (unsigned round = 0; round < nchildren_ && *n < max; ++round) {
      Txn tx(tags_);
      std::uint64_t s = summary_.load(std::memory_order_seq_cst);  // [W1r]
      unsigned i;
      for (;;) {
        std::uint32_t avail = std::uint32_t(s & kNonemptyMask) & ~std::uint32_t((s >> 16) & 0xffff);
        if (avail == 0) {
          tx.commit();
          account(tx, out);
          return batch;
        }
        // the first available child at or after this worker's cursor
        unsigned c = t_cursor_ & (nchildren_ - 1);
        std::uint32_t rot = (avail >> c) | (c ? avail << (32 - c) : 0);
        i = (c + unsigned(std::countr_zero(rot))) & 31;
        window();
        tx.gate(ptag_);  // [W1g]
        // [W1] claim child i. acquire: pending_[i] as the previous claimer
        // left it at its [W3] (release) is visible from here on.
        if (summary_.compare_exchange_strong(s, s | claimed_bit(i), std::memory_order_seq_cst)) break;
        tx.after_fail(ptag_);
      }
      t_cursor_ = i + 1;

      Child& ch = child_[i];
      Pending& p = pending_[i];
      if (!p.first) {
        // Before the head empties, pending says "not empty": a parking
        // recheck (maybe_nonempty) that reads the summary before our [W1],
        // then the head after [W2], must not also read a count of 0 while
        // we are still moving the stack into pending. Seen through [W2]'s
        // release, so a reader that sees the emptied head sees this (or
        // the real count stored below).
        p.count.store(1, std::memory_order_relaxed);  // [W2c]
        tx.gate(ch.tag);  // [W2g]
        // [W2] take the whole stack, leave the head OPEN. An exchange
        // cannot fail; it is still gated, so a producer that holds the
        // child's tag goes first. acquire: pairs with [P1]'s release.
        std::uint64_t h = ch.head.exchange(0, std::memory_order_seq_cst);
        after_take();
        Task* rev = nullptr;
        Task* last = nullptr;
        std::size_t k = 0;
        for (Task* t = ptr_of(h); t;) {  // newest-first -> oldest-first
          Task* nx = t->next;
          if (!last) last = t;
          t->next = rev;
          rev = t;
          t = nx;
          ++k;
        }
        p.first = rev;  // [W2p]
        p.last = last;
        p.count.store(k, std::memory_order_relaxed);
      }

      Task* first = p.first;
      Task* last = nullptr;
      std::size_t k = 0;
      for (Task* t = first; t && *n + k < max; t = t->next) {
        last = t;
        ++k;
      }
      if (last) {  // cut first..last off pending and append it to the batch
        p.first = last->next;
        if (!p.first) p.last = nullptr;
        last->next = nullptr;
        p.count.store(p.count.load(std::memory_order_relaxed) - k, std::memory_order_relaxed);
        if (batch_last)
          batch_last->next = first;
        else
          batch = first;
        batch_last = last;
        *n += k;
      }

      // [W3c] This claim found nothing at all: close the child, so the next
      // push announces itself. (A child that just gave us tasks stays OPEN
      // and announced: a producer streaming into it then never touches the
      // parent; the first claim that finds it dry closes it.) A failed CAS
      // means a push got in; then nonempty(i) stays set (no retry, no tag).
      bool closed = false;
      if (k == 0) {
        std::uint64_t open = 0;
        tx.gate(ch.tag);  // [W3cg]
        closed = ch.head.compare_exchange_strong(open, kClosed, std::memory_order_seq_cst);
      }
      if (!closed) {
        // [W3a] release the claim, keep nonempty(i): nothing to validate
        // (only the claimer writes claimed(i)), so a fetch_and, which
        // cannot fail. Gated like the exchange [W2]. release: pending_[i]
        // goes to the next claimer's [W1].
        window();
        tx.gate(ptag_);  // [W3g]
        summary_.fetch_and(~claimed_bit(i), std::memory_order_seq_cst);  // [W3a]
      } else {
        // [W3] release the claim and clear nonempty(i) too if the child is
        // still closed. The head is re-read after each read of the summary
        // ([W3r], and the reload of a failed CAS): a push onto the closed
        // head after that re-read bumps the epoch in [P2], which fails this
        // CAS.
        s = summary_.load(std::memory_order_seq_cst);  // [W3r]
        for (;;) {
          bool empty = ch.head.load(std::memory_order_seq_cst) == kClosed;  // [W3v]
          std::uint64_t ns = s & ~claimed_bit(i);
          if (empty) ns &= ~nonempty_bit(i);
          window();
          tx.gate(ptag_);  // [W3g]
          if (summary_.compare_exchange_strong(s, ns, std::memory_order_seq_cst)) break;  // [W3]
          tx.after_fail(ptag_);
        }
      }
      tx.commit();  // ClearMyTags
      account(tx, out);
    }
    return batch;
  }

  // True if some announced child is claimed or has tasks in its head or
  // pending list. (A child that gave out its last tasks stays announced
  // and OPEN until a dry claim closes it; it does not count here, so idle
  // workers do not chase it.) Reads the summary, then the announced
  // children's heads (seq_cst) and pending counts (relaxed: a reader that
  // sees a head emptied by [W2] sees [W2c]'s count or a later one, through
  // [W2]'s release): after a push onto child i returned,
  // either nonempty(i) is set and the head still holds the task or a
  // claimer took it, or an announcing push is still in flight.
  bool maybe_nonempty() const noexcept {
    std::uint64_t s = summary_.load(std::memory_order_seq_cst);
    after_summary_read();
    std::uint32_t ne = std::uint32_t(s & kNonemptyMask);
    if (ne & std::uint32_t(s >> 16)) return true;  // a claimer is at work
    while (ne) {
      unsigned i = unsigned(std::countr_zero(ne));
      ne &= ne - 1;
      if (ptr_of(child_[i].head.load(std::memory_order_seq_cst)) != nullptr) return true;
      if (pending_[i].count.load(std::memory_order_relaxed) != 0) return true;
    }
    return false;
  }

  // Tasks in announced children (heads' saturating counts + pending), an
  // estimate: every load is relaxed.
  std::size_t size_hint() const noexcept {
    std::uint32_t ne = std::uint32_t(summary_.load(std::memory_order_relaxed) & kNonemptyMask);
    std::size_t n = 0;
    while (ne) {
      unsigned i = unsigned(std::countr_zero(ne));
      ne &= ne - 1;
      n += count_of(child_[i].head.load(std::memory_order_relaxed));
      n += pending_[i].count.load(std::memory_order_relaxed);
    }
    return n;
  }

  bool priority_tags() const noexcept { return tags_; }
  std::uint64_t summary() const noexcept { return summary_.load(std::memory_order_relaxed); }  // relaxed: tests
  // The tag slots (tests: a transaction of the test's own holds one, to
  // see that a step passes its gate; tests/test_txn_contention.cpp).
  TagSlot& parent_tag() noexcept { return ptag_; }
  TagSlot& child_tag(unsigned i) noexcept { return child_[i].tag; }

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
  static void account(const Txn& tx, TxnCounters* out) noexcept {
    if (!out) return;
    out->retries += tx.counters().retries;
    out->waits += tx.counters().waits;
    out->preempts += tx.counters().preempts;
    out->bypasses += tx.counters().bypasses;
  }

  struct alignas(64) Child {
    std::atomic<std::uint64_t> head{kClosed};
    TagSlot tag;
  };
  struct alignas(64) Pending {
    Task* first = nullptr;  // FIFO, owned by the claim holder
    Task* last = nullptr;
    std::atomic<std::size_t> count{0};  // read racily by size_hint()
  };

  const bool tags_;
  const unsigned nchildren_;
  ProducerSlots slots_;  // which thread owns which child
  alignas(64) std::atomic<std::uint64_t> summary_{0};  // every child starts closed
  TagSlot ptag_;
  Child child_[kChildren];
  Pending pending_[kChildren];
  static inline thread_local unsigned t_cursor_ = 0;  // where this worker starts looking
};

using InjectTree = BasicInjectTree<NoHooks>;

}  // namespace parkway::detail::txn
