// trace/recorder.hpp -- the in-process trace recorder's event sites
// (PARKWAY_TRACE=FILE; docs/design/tracing.md, docs/tracing.md).
//
// Every USDT probe of probes.hpp also calls the function of the same name
// here (on_steal for `steal`, ...), so the probes and the trace file share
// one event model; the I/O layer and Worker::execute call the rest. Each
// site costs one predictable branch on a byte while tracing is off (the
// level, set once when the library loads and cleared at exit). The
// recording itself is out of line, in recorder.cpp: a timestamp and 16
// bytes appended to the calling thread's buffer, never a lock or a
// system call on the way.
#pragma once

#include <atomic>
#include <cstdint>

#include "tsan.hpp"  // PARKWAY_TSAN
#include "trace/format.hpp"

namespace parkway::detail {
struct Task;
}

namespace parkway::detail::trace {

using trace_format::EventType;

// 0 off, 1 scheduling events, 2 also spawn and run begin/end of every task.
// Hidden: a site reads it PC-relative, not through the GOT.
extern std::atomic<std::uint8_t> g_level __attribute__((visibility("hidden")));

// level > min. On x86-64 one compare of the byte in memory and one branch
// (the compiler loads an atomic into a register first: one instruction
// more on every spawn); a relaxed load elsewhere and under ThreadSanitizer,
// which cannot see the asm read.
template <std::uint8_t min>
[[gnu::always_inline]] inline bool level_above() noexcept {
#if defined(__x86_64__) && !defined(PARKWAY_TSAN)
  asm goto("cmpb %0, %1\n\tja %l[on]" : : "i"(min), "m"(g_level) : "cc" : on);
  return false;
on:
  return true;
#else
  return g_level.load(std::memory_order_relaxed) > min;
#endif
}
[[gnu::always_inline]] inline bool sched_on() noexcept { return level_above<0>(); }
[[gnu::always_inline]] inline bool tasks_on() noexcept { return level_above<1>(); }

// Appends one event to the calling thread's buffer (or counts it dropped).
[[gnu::cold]] void record(EventType type, std::uint8_t a8, std::uint16_t a16, std::uint32_t a32) noexcept;
void record_task(EventType type, const void* task) noexcept;
// Worker::execute with the task level on: run begin, the task, run end.
bool run_traced(Task* t) noexcept;

// The probes' twins (probes.hpp). The worker of worker-side events is the
// recording thread's own; arguments that would repeat it are not stored.
// spawn and run are recorded off the common path: a worker started with
// the task level on forces its pushes through Worker::spawn_at_limit and
// its own pops through run_own_slow, which record them (a call here, on
// the path of every spawn, made the compiler save registers on it).
inline void on_spawn(int, const void*) noexcept {}
inline void on_run(int, const void*) noexcept {}
// A thread about to inject into runtime `rt` or wake one of its workers
// from outside (RuntimeImpl::inject; wake_one_from, through on_wake_begin):
// a kRuntime event when `rt` is not the last one the thread's stream names
// (a dropped one names none: it is recorded again next time), so the reader
// can tell the runtimes of one process apart. A worker's stream names its own
// runtime; the event sends its later injections and outside wakes to `rt`.
void note_runtime(const void* rt) noexcept;
inline void on_outside_runtime(const void* rt) noexcept {
  if (sched_on()) [[unlikely]] note_runtime(rt);
}
inline void on_inject(const void* t) noexcept {
  if (sched_on()) [[unlikely]] record_task(EventType::kInject, t);
}
inline void on_steal(int, int victim, std::size_t n) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kSteal, 0, std::uint16_t(victim), std::uint32_t(n));
}
inline void on_steal_fence(int, int victim) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kStealFence, 0, std::uint16_t(victim), 0);
}
inline void on_inject_take(int, std::size_t n) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kInjectTake, 0, 0, std::uint32_t(n));
}
inline void on_search_begin(int) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kSearchBegin, 0, 0, 0);
}
inline void on_search_end(int, int found) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kSearchEnd, std::uint8_t(found), 0, 0);
}
inline void on_park(int, std::uint32_t park_id) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kPark, 0, 0, park_id);
}
inline void on_unpark(int, int handed_off, std::uint32_t park_id) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kUnpark, std::uint8_t(handed_off), 0, park_id);
}
// A wake is stamped when the waker sets out ([W1], before it takes the
// wakee off the idle list), not when it is recorded (after FUTEX_WAKE
// returned, when the wakee may have run and parked again): on_wake_begin
// before Parking::wake_one, on_wake after it. A thread outside the pool
// (outside_rt non-null) names the runtime first.
void stamp_wake() noexcept;
void record_wake(std::uint16_t wakee, std::uint32_t waker) noexcept;
[[gnu::always_inline]] inline void on_wake_begin(const void* outside_rt) noexcept {
  if (sched_on()) [[unlikely]] {
    if (outside_rt) note_runtime(outside_rt);
    stamp_wake();
  }
}
inline void on_wake(int waker, int wakee) noexcept {
  if (sched_on()) [[unlikely]] record_wake(std::uint16_t(wakee), std::uint32_t(waker));
}
// A worker that was about to sleep and found work at its recheck ([P3a])
// after a waker had taken it off the idle list: the hand-off that wake
// made, with no park to end (kUnpark, a8 = 1, a16 = 1). Fired only when
// handed off, so that each wake of a worker has one handed-off unpark.
inline void on_withdrawn(int, std::uint32_t park_id) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kUnpark, 1, 1, park_id);
}
inline void on_notify(int, std::uint32_t park_id, int woke) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kNotify, std::uint8_t(woke), 0, park_id);
}
inline void on_park_fence(int) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kParkFence, 0, 0, 0);
}
inline void on_slice_yield(int) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kSliceYield, 0, 0, 0);
}
// A blocking wait of a task on a worker (TaskGroup::wait, Future::get,
// block_until) that helped or slept returns: the join edge of the task
// graph, for the report's span (task level). A wait that finds its tasks
// finished returns inline in the program and records nothing; the reader
// infers those joins (docs/design/tracing.md, "Work and span").
inline void on_join() noexcept {
  if (tasks_on()) [[unlikely]] record(EventType::kJoin, 0, 0, 0);
}
// The I/O layer (no USDT probe): an operation handed to the ring, and its
// completion (the last CQE of an operation and its linked timeout).
inline void on_io_submit(std::uint8_t opcode) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kIoSubmit, opcode, 0, 0);
}
inline void on_io_complete(int res) noexcept {
  if (sched_on()) [[unlikely]] record(EventType::kIoComplete, 0, 0, std::uint32_t(res));
}

}  // namespace parkway::detail::trace
