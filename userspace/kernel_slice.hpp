// kernel_slice.hpp -- the time slice a worker thread asks the kernel's
// fair scheduler for (Options::worker_slice_us; docs/design/parking.md,
// "The kernel's time slice").
#pragma once

#include <cstdint>

namespace parkway::detail {

// Asks for a slice of `us` microseconds for the calling thread
// (sched_setattr's sched_runtime, which EEVDF takes as the thread's slice
// from Linux 6.12; older kernels ignore it). Keeps the thread's policy and
// nice value; does nothing for a thread that is not SCHED_OTHER or
// SCHED_BATCH (a real-time or sched_ext policy has slices of its own).
// Returns false if the kernel refused the call.
bool request_kernel_slice(unsigned us) noexcept;

// The calling thread's slice as the kernel reports it (sched_getattr),
// in nanoseconds; 0 if the kernel reports none.
std::uint64_t kernel_slice_ns() noexcept;

// Is the calling thread in the kernel's fair class (SCHED_OTHER or
// SCHED_BATCH), the one whose slices the two calls above and SliceKeeper
// are about?
bool in_fair_class() noexcept;

// [Y1] The end of a worker's slice, kept by the worker itself at its task
// boundaries (docs/design/parking.md, "Ending the slice at a task
// boundary"). The kernel ends a slice that ran out only at its next
// scheduling event: a wake-up on that CPU, or the timer tick (4 ms at
// HZ=250). A thread waiting for the CPU of a worker in a long stream of
// tasks waited up to that tick, whatever slice the worker asked for. A
// worker with a ring calls at_boundary() between tasks; once it has run a
// whole slice since it last slept or yielded, it yields (sched_yield: EEVDF
// moves its deadline one slice on and picks again; alone on its CPU it goes
// straight on). Only in the fair class: a real-time or SCHED_IDLE thread,
// or one a sched_ext scheduler runs under a policy of its own, is not
// sliced this way. Owner thread only.
class SliceKeeper {
 public:
  // Kept for `slice_us` microseconds (0: never yields).
  void start(unsigned slice_us) noexcept {
    slice_ns_ = std::uint64_t(slice_us) * 1000;
    since_ = 0;
  }
  // true if it yielded.
  bool at_boundary() noexcept {
    if (slice_ns_ == 0) return false;
    const std::uint64_t now = monotonic_ns();
    if (since_ == 0) {  // the first boundary after a sleep or a yield starts the count
      since_ = now;
      return false;
    }
    if (now - since_ < slice_ns_) [[likely]]
      return false;
    yield_cpu();
    since_ = 0;
    return true;
  }
  // The worker slept (parked): its next run starts a new slice.
  void slept() noexcept { since_ = 0; }

 private:
  static std::uint64_t monotonic_ns() noexcept;
  static void yield_cpu() noexcept;
  std::uint64_t slice_ns_ = 0;
  std::uint64_t since_ = 0;
};

}  // namespace parkway::detail
