// deadline_heap.hpp -- the deadlines of one ring's operations, earliest
// first (docs/design/io.md, "Timeouts").
//
// An operation with a timeout or a deadline is not given a kernel timer of
// its own: its ring keeps (deadline, operation) in this binary min-heap,
// and the ring's owner cancels the operations whose deadline has passed
// at its scheduling points and wakes from a ring park no later than the
// earliest one. Each operation knows its place in the heap (`pos`), so an
// operation that completes first leaves in O(log n). Owner thread only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace parkway::io::detail {

// T has a member `std::uint32_t deadline_pos` that only this heap writes
// (kNoDeadline when the object is in no heap).
inline constexpr std::uint32_t kNoDeadline = ~std::uint32_t(0);

template <class T>
class DeadlineHeap {
 public:
  bool empty() const noexcept { return v_.empty(); }
  std::size_t size() const noexcept { return v_.size(); }
  // The earliest deadline (nanoseconds of CLOCK_MONOTONIC); heap not empty.
  std::int64_t earliest() const noexcept { return v_.front().at; }

  void push(T* x, std::int64_t at) {
    v_.push_back({at, x});
    x->deadline_pos = std::uint32_t(v_.size() - 1);
    up(v_.size() - 1);
  }

  // Removes x if it is in the heap.
  void erase(T* x) noexcept {
    const std::uint32_t i = x->deadline_pos;
    if (i == kNoDeadline) return;
    x->deadline_pos = kNoDeadline;
    const std::size_t last = v_.size() - 1;
    if (i != last) {
      v_[i] = v_[last];
      v_[i].x->deadline_pos = i;
      v_.pop_back();
      if (!up(i)) down(i);
    } else {
      v_.pop_back();
    }
  }

  // Removes and returns the earliest entry if its deadline is at or
  // before `now`, else nullptr.
  T* pop_expired(std::int64_t now) noexcept {
    if (v_.empty() || v_.front().at > now) return nullptr;
    T* x = v_.front().x;
    erase(x);
    return x;
  }

 private:
  struct Entry {
    std::int64_t at;
    T* x;
  };

  void place(std::size_t i, Entry e) noexcept {
    v_[i] = e;
    e.x->deadline_pos = std::uint32_t(i);
  }
  // Sifts entry i towards the root; true if it moved.
  bool up(std::size_t i) noexcept {
    const Entry e = v_[i];
    const std::size_t start = i;
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (v_[parent].at <= e.at) break;
      place(i, v_[parent]);
      i = parent;
    }
    place(i, e);
    return i != start;
  }
  void down(std::size_t i) noexcept {
    const Entry e = v_[i];
    const std::size_t n = v_.size();
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && v_[c + 1].at < v_[c].at) ++c;
      if (e.at <= v_[c].at) break;
      place(i, v_[c]);
      i = c;
    }
    place(i, e);
  }

  std::vector<Entry> v_;
};

}  // namespace parkway::io::detail
