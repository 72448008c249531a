// txn/inject_tree.cpp -- the worker side of the 2-level injection queue
// (txn/inject_tree.hpp has the layout and the step list).
#include "txn/inject_tree.hpp"

#include <bit>

namespace parkway::detail::txn {

namespace {
// Where this worker starts looking, so workers spread over the children.
thread_local unsigned t_cursor = 0;
}  // namespace

Task* InjectTree::pop_batch(std::size_t max, std::size_t* n, TxnCounters* out) noexcept {
  *n = 0;
  if (max == 0) max = 1;
  if (out) *out = TxnCounters{};
  auto account = [out](const Txn& tx) {
    if (!out) return;
    out->retries += tx.counters().retries;
    out->waits += tx.counters().waits;
    out->preempts += tx.counters().preempts;
    out->bypasses += tx.counters().bypasses;
  };
  // Each round is one transaction; a round that claims a child found empty
  // (a stale nonempty bit) clears the bit, so the rounds are bounded.
  for (unsigned round = 0; round < nchildren_; ++round) {
    Txn tx(tags_);
    std::uint64_t s = summary_.load(std::memory_order_seq_cst);
    unsigned i;
    for (;;) {
      std::uint32_t avail = std::uint32_t(s & kNonemptyMask) & ~std::uint32_t((s >> 16) & 0xffff);
      if (avail == 0) {
        tx.commit();
        account(tx);
        return nullptr;
      }
      // first available child at or after the cursor
      unsigned c = t_cursor % nchildren_;
      std::uint32_t rot = (avail >> c) | (c ? avail << (32 - c) : 0);
      i = (c + unsigned(std::countr_zero(rot))) % 32;
      tx.gate(ptag_);
      // [W1] claim child i. seq_cst/acquire: pending_[i] as the previous
      // claimer left it at its [W3] (release) is visible from here on.
      if (summary_.compare_exchange_strong(s, s | claimed_bit(i), std::memory_order_seq_cst)) break;
      tx.after_fail(ptag_);
    }
    t_cursor = i + 1;

    Child& ch = child_[i];
    Pending& p = pending_[i];
    if (!p.first) {
      tx.gate(ch.tag);
      // [W2] take the whole stack, leave the head OPEN (an exchange
      // cannot fail; it is still gated, so a producer that holds the
      // child's tag goes first). acquire: pairs with [P1]'s release.
      std::uint64_t h = ch.head.exchange(0, std::memory_order_seq_cst);
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
      p.first = rev;
      p.last = last;
      p.count.store(k, std::memory_order_relaxed);
    }

    Task* first = p.first;
    Task* last = nullptr;
    std::size_t k = 0;
    for (Task* t = first; t && k < max; t = t->next) {
      last = t;
      ++k;
    }
    if (last) {
      p.first = last->next;
      if (!p.first) p.last = nullptr;
      last->next = nullptr;
      p.count.store(p.count.load(std::memory_order_relaxed) - k, std::memory_order_relaxed);
    }
    *n = k;

    // [W3c] This claim found nothing at all: close the child, so the next
    // push announces itself. (A child that just gave us tasks stays OPEN
    // and announced: a producer streaming into it then never touches the
    // parent; the first claim that finds it dry closes it.) A failed CAS
    // means a push got in; then nonempty(i) stays set (no retry, so no tag).
    bool closed = false;
    if (k == 0) {
      std::uint64_t open = 0;
      tx.gate(ch.tag);
      closed = ch.head.compare_exchange_strong(open, kClosed, std::memory_order_seq_cst);
    }
    // [W3] release the claim; clear nonempty(i) too if the child is still
    // closed. The head is re-read after each read of the summary ([W3r],
    // and the reload of a failed CAS): a push onto the closed head after
    // that re-read bumps the epoch in [P2], which fails this CAS.
    s = summary_.load(std::memory_order_seq_cst);  // [W3r]
    for (;;) {
      bool empty = closed && ch.head.load(std::memory_order_seq_cst) == kClosed;  // [W3v]
      std::uint64_t ns = s & ~claimed_bit(i);
      if (empty) ns &= ~nonempty_bit(i);
      tx.gate(ptag_);
      if (summary_.compare_exchange_strong(s, ns, std::memory_order_seq_cst)) break;
      tx.after_fail(ptag_);
    }
    tx.commit();
    account(tx);
    if (k) return first;
  }
  return nullptr;
}

std::size_t InjectTree::size_hint() const noexcept {
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

}  // namespace parkway::detail::txn
