// probes.hpp -- USDT probes, provider "parkway" (docs/design/tracing.md;
// tests/check-usdt.sh checks they are present and fire).
//
// Each is a nop until a tracer attaches (perf probe sdt_parkway:*, or
// bpftrace -e 'usdt:/path/libparkway.so:parkway:steal { ... }').
//   spawn(worker, task)            a task pushed on a worker's deque
//   inject(task)                   a task pushed from outside the pool
//   run(worker, task)              a worker starts a task
//   steal(thief, victim, count)    tasks moved between deques
//   inject_take(worker, count)     tasks taken from the injection queue
//   search_begin(worker) / search_end(worker, found)
//   park(worker, park_id) / unpark(worker, handed_off, park_id)   worker -1: an outside thread
//   withdrawn(worker, park_id)     at its recheck, before it slept ([P3a]), a
//                                  worker found a waker had taken it off the idle
//                                  list: that wake's hand-off, with no park to end
//   wake(waker, wakee)             waker == -1: a thread outside the pool
//   notify(waker, park_id, woke)   a task's completion woke its waiter
//   steal_fence(thief, victim)     the thief called membarrier(2) (deque.md)
//   park_fence(worker)             membarrier(2) before a parking recheck
//   slice_yield(worker)            a worker with a ring ended its kernel slice
//                                  between two tasks ([Y1], kernel_slice.hpp)
//
// Each probe also records its event in the in-process trace when
// PARKWAY_TRACE is set (trace/recorder.hpp: on_<name>, one branch while
// off). The arguments are evaluated twice: pass only plain values.
#pragma once

#include <sys/sdt.h>

#include "trace/recorder.hpp"

namespace parkway::detail {
// A constant probe argument, moved into a register: sys/sdt.h describes a
// constant as an immediate ("-4@$1"), which perf drops, so two sites of a
// probe had different argument lists and `perf probe` refused the probe
// ("File exists": steal, unpark) or lost the argument (search_end's
// `found`). One register move at the site; check-usdt.sh checks that no
// probe argument is an immediate.
// Give it the type the probe's other sites pass: perf refuses a probe
// whose sites differ in an argument's size or sign too.
template <class T>
inline T probe_const(T v) noexcept {
  asm volatile("" : "+r"(v));
  return v;
}
}  // namespace parkway::detail
#define PW_PROBE_CONST(v) (::parkway::detail::probe_const(v))

#define PW_PROBE1(name, a)              \
  do {                                  \
    DTRACE_PROBE1(parkway, name, a);    \
    ::parkway::detail::trace::on_##name(a); \
  } while (0)
#define PW_PROBE2(name, a, b)              \
  do {                                     \
    DTRACE_PROBE2(parkway, name, a, b);    \
    ::parkway::detail::trace::on_##name(a, b); \
  } while (0)
#define PW_PROBE3(name, a, b, c)              \
  do {                                        \
    DTRACE_PROBE3(parkway, name, a, b, c);    \
    ::parkway::detail::trace::on_##name(a, b, c); \
  } while (0)
