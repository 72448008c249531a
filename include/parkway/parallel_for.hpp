// parkway/parallel_for.hpp -- run f(i) for every i in [begin, end).
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <type_traits>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>

#include "parkway/runtime.hpp"
#include "parkway/task_group.hpp"

namespace parkway {

namespace detail {
// One parallel_for call: its callable, its grain, and its stop. The first
// call of f that throws sets `stop` and keeps its exception; from then on
// no piece starts and no range is split off (a piece already running
// finishes its at most `grain` calls), and neither once the group of the
// task that called parallel_for is cancelled (parkway::cancelled()).
template <class F>
struct ForState {
  ForState(F& fn, std::size_t g) noexcept : f(fn), grain(g) {}
  F& f;
  const std::size_t grain;
  std::atomic<bool> stop{false};
  std::exception_ptr error;  // written once, by the call that set stop

  // Past Runtime::shutdown's deadline the loop stops too, but not
  // silently: the pieces it will not run are dropped, and the caller gets
  // RuntimeShutdown (as the waiter of any dropped task does).
  bool stopping() noexcept {
    if (stop.load(std::memory_order_relaxed)) return true;
    if (!cancelled()) [[likely]]
      return false;
    if (stop_requested(nullptr)) fail(dropped_task_error());  // the runtime here drops tasks
    return true;
  }
  void fail(std::exception_ptr e) noexcept {
    if (!stop.exchange(true, std::memory_order_acq_rel)) error = std::move(e);
  }
};

// Splits [b, e) in halves, spawning the upper half, until a piece is at
// most `grain` long; the calling task runs the lowest piece itself. Every
// exception (of f, or of a spawn) goes to s.fail(), so none crosses a
// TaskGroup; g.wait() returns once the spawned halves return, which is at
// once for those that start after the stop.
template <class F>
void parallel_for_split(std::size_t b, std::size_t e, ForState<F>& s) noexcept {
  if (s.stopping()) return;
  TaskGroup g;
  try {
    while (e - b > s.grain) {
      std::size_t mid = b + (e - b) / 2;
      g.spawn([mid, e, &s]() noexcept { parallel_for_split(mid, e, s); });
      e = mid;
      if (s.stopping()) break;
    }
    if (!s.stopping())
      for (std::size_t i = b; i < e; ++i) s.f(i);
  } catch (...) {
    s.fail(std::current_exception());
  }
  // The halves catch their own exceptions; but one dropped unstarted
  // past Runtime::shutdown's deadline leaves RuntimeShutdown in g.
  try {
    g.wait();
  } catch (...) {
    s.fail(std::current_exception());
  }
}

// An index or grain given as a signed integer: a negative one would turn
// into a size_t near 2^64 (an end of -1: a loop of 2^64 - 1 calls). One of
// a type wider than size_t (__int128) past size_t's range would be cut to
// its low bits.
template <class I>
std::size_t for_index(I v, const char* what) {
  if constexpr (std::is_signed_v<I>) {
    if (v < 0) {
      std::string got;
      if constexpr (sizeof(I) <= sizeof(long long)) got = ", got " + std::to_string(static_cast<long long>(v));
      throw std::invalid_argument(std::string("parkway::parallel_for: ") + what + " is negative" + got);
    }
  }
  if constexpr (sizeof(I) > sizeof(std::size_t)) {
    if (v > static_cast<I>(std::numeric_limits<std::size_t>::max()))
      throw std::invalid_argument(std::string("parkway::parallel_for: ") + what +
                                  " is past the largest index, " +
                                  std::to_string(std::numeric_limits<std::size_t>::max()));
  }
  return static_cast<std::size_t>(v);
}

inline void check_range(std::size_t begin, std::size_t end, std::size_t grain) {
  if (grain == 0) throw std::invalid_argument("parkway::parallel_for: grain must be at least 1, got 0");
  if (begin > end)
    throw std::invalid_argument("parkway::parallel_for: begin (" + std::to_string(begin) +
                                ") is past end (" + std::to_string(end) + ")");
}
}  // namespace detail

// Calls f(i) once for each i in [begin, end), in parallel, on `rt`, in
// pieces of at most `grain` indices; returns when all are done. The first
// call that throws stops the loop: no piece starts after it (the pieces
// running then finish, so at most workers x grain calls follow it if f
// does not wait; a wait inside f can start more pieces on its worker,
// and each of those finishes too), and its exception is rethrown once
// they have returned (later ones are dropped). Called inside a task of a group that gets cancelled, the loop
// stops the same way and returns normally (parkway::cancelled() tells).
// Called from a task of another runtime, that task's worker waits for it
// (as in Runtime::run). begin, end and grain are integers of any type; a
// negative one throws std::invalid_argument, as a grain of 0 or begin >
// end do.
namespace detail {
// Both parallel_for overloads: on rt, or (rt null) in the calling
// worker's own pool, as a TaskGroup's spawns run there.
template <class B, class E, class G, class F>
void parallel_for_on(Runtime* rt, B first, E last, G step, F& f) {
  static_assert(std::is_invocable_v<F&, std::size_t&>,  // as s.f(i) calls it: an lvalue index
                "parkway::parallel_for: the callable must take the index, a std::size_t");
  const std::size_t begin = for_index(first, "begin");
  const std::size_t end = for_index(last, "end");
  const std::size_t grain = for_index(step, "grain");
  check_range(begin, end, grain);
  if (begin == end) return;
  ForState<F> s{f, grain};
  // The caller's group goes along (run() on another runtime submits the
  // loop as a task of no group): its cancellation stops the loop there
  // too. The caller waits for the loop, so the group outlives it.
  TaskGroup* outer = tls_group;
  auto loop = [&s, begin, end, outer] {
    GroupScope in(outer);
    parallel_for_split(begin, end, s);
  };
  if (rt)
    rt->run(loop);
  else
    loop();
  if (s.error) std::rethrow_exception(s.error);
}
}  // namespace detail

template <std::integral B, std::integral E, std::integral G, class F>
void parallel_for(Runtime& rt, B first, E last, G step, F&& f) {
  detail::parallel_for_on(&rt, first, last, step, f);
}

// As above, on the calling worker's runtime, or Runtime::default_runtime()
// outside any pool. On a worker of a runtime destroyed while it ran the
// calling task (left running by shutdown(deadline), or the runtime
// destroyed on its own worker), in that worker's pool: past the
// shutdown's deadline the pieces are dropped and the call throws
// RuntimeShutdown; it never starts the default runtime there.
template <std::integral B, std::integral E, std::integral G, class F>
void parallel_for(B begin, E end, G grain, F&& f) {
  detail::parallel_for_on(detail::runtime_for_spawn(), begin, end, grain, f);
}

}  // namespace parkway
