// deque.hpp -- a worker's growable Chase-Lev work-stealing deque.
//
// D. Chase, Y. Lev, "Dynamic Circular Work-Stealing Deque", SPAA 2005, with
// the C11 memory orderings of N. M. Lê, A. Pop, A. Cohen, F. Zappa Nardelli,
// "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013
// (Fig. 1). The owner pushes and pops at the bottom (LIFO); thieves steal
// at the top (FIFO) with one CAS on `top`.
//
// Deviations from the paper, each no weaker than it:
//  * push publishes with a release store of `bottom` instead of a release
//    fence + relaxed store (same code on x86; lets ThreadSanitizer, which
//    ignores fences, see the happens-before edge).
//  * steal_batch() takes several tasks by repeating the single-task steal.
//    A one-CAS "steal half" that advances `top` by n is unsafe with this
//    pop: the owner takes bottom slots without a CAS while more than one
//    task remains, so a thief's stale view of `bottom` can overlap them.
//  * Old buffers are retired, not freed, until the deque dies (a thief may
//    still read one); total retired memory is below the final buffer size.
//
// Invariant: each pushed task is returned exactly once, by pop() or by a
// steal; checked by tests/test_deque.cpp under TSAN and ASAN.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "parkway/task.hpp"

namespace parkway::detail {

class Deque {
 public:
  explicit Deque(std::size_t log2_capacity = 8) : buf_(new Buffer(log2_capacity)) {
    own_ = buf_.load(std::memory_order_relaxed);
  }
  ~Deque() {
    delete buf_.load(std::memory_order_relaxed);
    for (Buffer* b : retired_) delete b;
  }
  Deque(const Deque&) = delete;
  Deque& operator=(const Deque&) = delete;

  // Owner only.
  void push(Task* t) {
    if (!try_push(t)) [[unlikely]] push_grown(t);
  }
  // Owner only. false (nothing pushed) when the buffer is full.
  bool try_push(Task* t) noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t tp = top_.load(std::memory_order_acquire);
    Buffer* a = own_;
    if (b - tp > a->mask) [[unlikely]] return false;
    a->put(b, t);
    bottom_.store(b + 1, std::memory_order_release);
    return true;
  }

  // Owner only. nullptr when empty.
  Task* pop() noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    Buffer* a = own_;
    bottom_.store(b, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_relaxed);
    if (t > b) {  // was empty
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    Task* x = a->get(b);
    if (t == b) {  // last task: race the thieves for it
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed))
        x = nullptr;
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return x;
  }

  enum class Steal { kTaken, kEmpty, kLost };

  // Any thread. kLost: raced another thief or the owner; retrying may work.
  Steal steal(Task** out) noexcept {
    std::int64_t t = top_.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::int64_t b = bottom_.load(std::memory_order_acquire);
    if (t >= b) return Steal::kEmpty;
    // acquire (the paper's consume): see the slots of a grown buffer.
    Buffer* a = buf_.load(std::memory_order_acquire);
    Task* x = a->get(t);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed))
      return Steal::kLost;
    *out = x;
    return Steal::kTaken;
  }

  // Thief: takes up to max(1, min(limit, size/2)) tasks from `victim`; the
  // first is returned, the rest are pushed onto *this (the thief's own
  // deque). Returns nullptr if nothing was taken; *lost tells whether a
  // race (rather than emptiness) stopped it.
  Task* steal_batch(Deque& victim, std::size_t limit, std::size_t* taken, bool* lost) {
    *taken = 0;
    *lost = false;
    std::int64_t n = victim.size_hint() / 2;
    if (n < 1) n = 1;
    if (n > std::int64_t(limit)) n = std::int64_t(limit);
    Task* first = nullptr;
    for (std::int64_t i = 0; i < n; ++i) {
      Task* t;
      Steal r = victim.steal(&t);
      if (r != Steal::kTaken) {
        *lost = (r == Steal::kLost);
        break;
      }
      if (!first) first = t; else push(t);
      ++*taken;
    }
    return first;
  }

  // Any thread; a snapshot that may be stale by the time it returns.
  std::int64_t size_hint() const noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t t = top_.load(std::memory_order_relaxed);
    return b > t ? b - t : 0;
  }

  // Any thread; seq_cst loads for the parking recheck (parking.md: the [P2]/[S3] rechecks).
  bool maybe_nonempty() const noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    return b > t;
  }

 private:
  struct Buffer {
    explicit Buffer(std::size_t log2) : mask((std::int64_t(1) << log2) - 1), slots(new std::atomic<Task*>[mask + 1]) {}
    ~Buffer() { delete[] slots; }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    const std::int64_t mask;
    std::atomic<Task*>* const slots;
    Task* get(std::int64_t i) const noexcept { return slots[i & mask].load(std::memory_order_relaxed); }
    void put(std::int64_t i, Task* t) noexcept { slots[i & mask].store(t, std::memory_order_relaxed); }
  };

  __attribute__((noinline)) void push_grown(Task* t) {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t tp = top_.load(std::memory_order_acquire);
    Buffer* a = grow(own_, tp, b);
    a->put(b, t);
    bottom_.store(b + 1, std::memory_order_release);
  }

  __attribute__((noinline)) Buffer* grow(Buffer* a, std::int64_t t, std::int64_t b) {
    std::size_t log2 = 0;
    while ((std::int64_t(1) << log2) <= a->mask) ++log2;
    auto* na = new Buffer(log2 + 1);
    for (std::int64_t i = t; i < b; ++i) na->put(i, a->get(i));
    retired_.push_back(a);
    buf_.store(na, std::memory_order_release);
    own_ = na;
    return na;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  std::atomic<Buffer*> buf_;
  Buffer* own_;                   // owner's copy of buf_ (no atomic load on push/pop)
  std::vector<Buffer*> retired_;  // owner only
};

}  // namespace parkway::detail
