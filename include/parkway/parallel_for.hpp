// parkway/parallel_for.hpp -- run f(i) for every i in [begin, end).
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

#include "parkway/runtime.hpp"
#include "parkway/task_group.hpp"

namespace parkway {

namespace detail {
// Splits [b, e) in halves, spawning the upper half, until a piece is at
// most `grain` long; the calling task runs the lowest piece itself. If
// that piece throws, the spawned ones still finish (g.wait()), their
// exception, if any, is dropped, and the piece's own is rethrown: one
// exception leaves, and none is reported as lost by ~TaskGroup.
template <class F>
void parallel_for_split(std::size_t b, std::size_t e, std::size_t grain, F& f) {
  TaskGroup g;
  while (e - b > grain) {
    std::size_t mid = b + (e - b) / 2;
    g.spawn([mid, e, grain, &f] { parallel_for_split(mid, e, grain, f); });
    e = mid;
  }
  std::exception_ptr own;
  try {
    for (std::size_t i = b; i < e; ++i) f(i);
  } catch (...) {
    own = std::current_exception();
  }
  if (!own) {
    g.wait();
    return;
  }
  try {
    g.wait();
  } catch (...) {
  }
  std::rethrow_exception(own);
}

inline void check_range(std::size_t begin, std::size_t end, std::size_t grain) {
  if (grain == 0) throw std::invalid_argument("parkway::parallel_for: grain must be at least 1, got 0");
  if (begin > end)
    throw std::invalid_argument("parkway::parallel_for: begin (" + std::to_string(begin) +
                                ") is past end (" + std::to_string(end) + ")");
}
}  // namespace detail

// Calls f(i) once for each i in [begin, end), in parallel, on `rt`, in
// pieces of at most `grain` indices; returns when all are done. If calls
// of f throw, the rest of each throwing piece is skipped, every other
// piece still runs, and one of the exceptions is rethrown (the others are
// dropped). Called from a task of another runtime, that task's worker
// waits for it (as in Runtime::run).
template <class F>
void parallel_for(Runtime& rt, std::size_t begin, std::size_t end, std::size_t grain, F&& f) {
  detail::check_range(begin, end, grain);
  if (begin == end) return;
  rt.run([&] { detail::parallel_for_split(begin, end, grain, f); });
}

// As above, on the calling worker's runtime, or Runtime::default_runtime()
// outside any pool.
template <class F>
void parallel_for(std::size_t begin, std::size_t end, std::size_t grain, F&& f) {
  Runtime* rt = Runtime::current();
  parallel_for(rt ? *rt : Runtime::default_runtime(), begin, end, grain, static_cast<F&&>(f));
}

}  // namespace parkway
