// ready_queue.hpp -- a worker's I/O continuations that are ready to run:
// first in, first out, beside (not in) its work-stealing deque.
//
// Its ring's reaper (the owning worker) appends at the tail; the owner and
// thieves take from the head, each with one CAS. A bounded ring of slots,
// as in Go's per-P run queue or tokio's local queue.
//
// Why a queue of its own (docs/design/io.md, "Ready continuations"): on
// the LIFO deque a continuation could be buried under tasks that another
// continuation of the same batch spawned, and wait for all of them; here
// the oldest runs first, at the worker's next scheduling point, whatever
// the deque holds.
//
// Invariant: each pushed task is taken exactly once, in push order. Why
// it holds: a taker reads the head slot and claims it with a CAS of head
// from h to h + 1, so of all takers that read h one succeeds; the owner
// writes slot tail % kCapacity only while tail - head < kCapacity, so the
// slot a taker read cannot have been overwritten unless head moved past
// it, and then the taker's CAS fails. The tail's release store, read by
// the taker's acquire load, publishes the slot and the task. Checked by
// tests/test_io.cpp (ReadyQueue.*: order, exactly once with four takers
// and the owner, under TSAN and ASAN).
#pragma once

#include <atomic>
#include <cstdint>

#include "parkway/task.hpp"

namespace parkway::io::detail {

class ReadyQueue {
 public:
  static constexpr std::uint32_t kCapacity = 256;

  // Owner only. false if full (the caller keeps the task elsewhere).
  bool push(::parkway::detail::Task* t) noexcept {
    const std::uint32_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) >= kCapacity) return false;
    slots_[tail % kCapacity].store(t, std::memory_order_relaxed);
    // seq_cst: a parking worker's recheck (Worker::any_work_visible) is
    // ordered against it like against a deque push.
    tail_.store(tail + 1, std::memory_order_seq_cst);
    return true;
  }

  // Owner only: how many more push() accepts now (at least this many).
  std::uint32_t room() const noexcept { return kCapacity - size(); }
  // Owner only: how many tasks it holds now (at most this many).
  std::uint32_t size() const noexcept {
    return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire);
  }

  // Any thread: the oldest task, or nullptr if there was none.
  ::parkway::detail::Task* take() noexcept {
    std::uint32_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      if (head == tail_.load(std::memory_order_acquire)) return nullptr;
      ::parkway::detail::Task* t = slots_[head % kCapacity].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        return t;
    }
  }

  // Any thread; seq_cst for the parking recheck. May be stale by the time
  // the caller acts on it.
  bool maybe_nonempty() const noexcept {
    return head_.load(std::memory_order_seq_cst) != tail_.load(std::memory_order_seq_cst);
  }

 private:
  alignas(64) std::atomic<std::uint32_t> head_{0};
  alignas(64) std::atomic<std::uint32_t> tail_{0};
  std::atomic<::parkway::detail::Task*> slots_[kCapacity] = {};
};

}  // namespace parkway::io::detail
