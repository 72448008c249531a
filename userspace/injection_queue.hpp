// injection_queue.hpp -- where threads outside the pool hand tasks to it.
//
// Interface the scheduler relies on (any implementation must keep it):
//   push(t)          any thread; t is owned by the queue until popped.
//   pop_batch(max)   a worker takes up to `max` tasks at once, returned as a
//                    list linked through Task::next; FIFO per producer
//                    thread (tasks of different producers may interleave).
//   maybe_nonempty() a cheap seq_cst check for the parking recheck: after a
//                    push() has returned, every later maybe_nonempty() that
//                    is ordered after it (seq_cst) returns true until the
//                    task is claimed by a worker -- or, only while another
//                    push() onto the same child is between its [P1] and
//                    [P2] steps, until that push returns (it makes the
//                    check true again, and its caller's notify_work() then
//                    wakes a sleeper). docs/design/priority-tags.md, "The
//                    parking contract".
//   size_hint()      a relaxed estimate of the number of queued tasks.
//
// The implementation is the 2-level transactional queue of
// txn/inject_tree.hpp, its multi-CAS operations guarded by priority tags
// (txn/tag.hpp) unless Options::priority_tags is false (ablation only).
#pragma once

#include <cstddef>

#include "parkway/task.hpp"
#include "txn/inject_tree.hpp"

namespace parkway::detail {

class InjectionQueue {
 public:
  explicit InjectionQueue(bool priority_tags) : tree_(priority_tags) {}
  InjectionQueue(const InjectionQueue&) = delete;
  InjectionQueue& operator=(const InjectionQueue&) = delete;

  void push(Task* t) noexcept { tree_.push(t); }
  Task* pop_batch(std::size_t max, std::size_t* n) noexcept { return tree_.pop_batch(max, n); }
  bool maybe_nonempty() const noexcept { return tree_.maybe_nonempty(); }
  std::size_t size_hint() const noexcept { return tree_.size_hint(); }
  bool priority_tags() const noexcept { return tree_.priority_tags(); }

 private:
  txn::InjectTree tree_;
};

}  // namespace parkway::detail
