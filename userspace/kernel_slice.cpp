// kernel_slice.cpp -- see kernel_slice.hpp.
#include "kernel_slice.hpp"

#include "sched_ext_link.hpp"

#include <sched.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace parkway::detail {

namespace {

// struct sched_attr (include/uapi/linux/sched/types.h); glibc 2.36 has
// no wrapper for the calls.
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
  std::uint32_t sched_util_min;
  std::uint32_t sched_util_max;
};

bool get_attr(SchedAttr* a) noexcept {
  std::memset(a, 0, sizeof *a);
  return syscall(SYS_sched_getattr, 0, a, sizeof *a, 0) == 0;
}

}  // namespace

bool request_kernel_slice(unsigned us) noexcept {
  SchedAttr a;
  if (!get_attr(&a)) return false;
  if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH) return true;
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = std::uint64_t(us) * 1000;
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

std::uint64_t kernel_slice_ns() noexcept {
  SchedAttr a;
  return get_attr(&a) ? a.sched_runtime : 0;
}

bool in_fair_class() noexcept {
  const int p = sched_getscheduler(0);
  return (p == SCHED_OTHER || p == SCHED_BATCH) && !sched_ext_runs_fair_tasks("/sys/kernel/sched_ext");
}


std::uint64_t SliceKeeper::thread_cpu_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec) + 1;  // never 0
}

void SliceKeeper::yield_cpu() noexcept { sched_yield(); }

}  // namespace parkway::detail
