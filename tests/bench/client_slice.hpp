// client_slice.hpp -- an open-loop load client asks the fair scheduler for
// a short time slice (echo_client --rate, http_open_loop).
//
// An open-loop client sleeps until each request's due time. On a machine
// whose CPUs the server keeps busy, the woken client waits for a CPU: for
// the running thread's slice to end, and then behind threads with shorter
// slices, which EEVDF picks first (parkway's workers ask for 300 us). A
// client on its own machine would send on time, so the benchmarks' clients
// ask for a 100 us slice: EEVDF then lets their wake-up preempt the
// running thread at once. What is left of their lateness is reported
// (send lag) and charged to the latency, which counts from the due time.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace bench {

// Asks for a `us` microsecond slice for the calling thread (EEVDF takes a
// SCHED_OTHER thread's sched_runtime as its slice). true only if the
// thread is SCHED_OTHER and reads the slice back: kernels before 6.12
// take the call and ignore it.
inline bool request_client_slice(unsigned us) {
  struct {  // struct sched_attr (include/uapi/linux/sched/types.h); glibc 2.36 has no wrapper
    std::uint32_t size, sched_policy;
    std::uint64_t sched_flags;
    std::int32_t sched_nice;
    std::uint32_t sched_priority;
    std::uint64_t sched_runtime, sched_deadline, sched_period;
    std::uint32_t sched_util_min, sched_util_max;
  } a;
  std::memset(&a, 0, sizeof a);
  if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0 || a.sched_policy != 0 /* SCHED_OTHER */) return false;
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = std::uint64_t(us) * 1000;
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) return false;
  std::memset(&a, 0, sizeof a);
  return syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0 && a.sched_runtime == std::uint64_t(us) * 1000;
}

}  // namespace bench
