// injection_queue.hpp -- where threads outside the pool hand tasks to it.
//
// Interface the scheduler relies on (any implementation must keep it):
//   push(t)          any thread; t is owned by the queue until popped.
//   pop_batch(max)   a worker takes up to `max` tasks at once (FIFO order),
//                    returned as a list linked through Task::next.
//   maybe_nonempty() a cheap seq_cst check for the parking recheck: after a
//                    push() has returned, every later maybe_nonempty() that
//                    is ordered after it (seq_cst) returns true until the
//                    task is popped.
// This baseline is a mutex-protected FIFO; the priority-tag transactional
// version (docs/design/priority-tags.md) replaces it behind this interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "parkway/task.hpp"

namespace parkway::detail {

class InjectionQueue {
 public:
  explicit InjectionQueue(bool priority_tags) : priority_tags_(priority_tags) {}
  InjectionQueue(const InjectionQueue&) = delete;
  InjectionQueue& operator=(const InjectionQueue&) = delete;

  void push(Task* t) noexcept {
    t->next = nullptr;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (tail_) tail_->next = t; else head_ = t;
      tail_ = t;
      // seq_cst: pairs with the fence a parking worker issues before
      // maybe_nonempty() (parking.md, step R1).
      size_.fetch_add(1, std::memory_order_seq_cst);
    }
  }

  Task* pop_batch(std::size_t max, std::size_t* n) noexcept {
    *n = 0;
    if (size_.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<std::mutex> g(mu_);
    Task* first = head_;
    Task* last = nullptr;
    Task* t = head_;
    while (t && *n < max) { last = t; t = t->next; ++*n; }
    if (!last) return nullptr;
    head_ = t;
    if (!head_) tail_ = nullptr;
    last->next = nullptr;
    size_.fetch_sub(*n, std::memory_order_relaxed);
    return first;
  }

  bool maybe_nonempty() const noexcept { return size_.load(std::memory_order_seq_cst) != 0; }
  std::size_t size_hint() const noexcept { return size_.load(std::memory_order_relaxed); }
  bool priority_tags() const noexcept { return priority_tags_; }

 private:
  const bool priority_tags_;
  std::mutex mu_;
  Task* head_ = nullptr;
  Task* tail_ = nullptr;
  std::atomic<std::size_t> size_{0};
};

}  // namespace parkway::detail
