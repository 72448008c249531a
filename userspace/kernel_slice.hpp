// kernel_slice.hpp -- the time slice a worker thread asks the kernel's
// fair scheduler for (Options::worker_slice_us; docs/design/parking.md,
// "The kernel's time slice").
#pragma once

#include <cstdint>

#include "clock.hpp"

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

// Is the calling thread in the kernel's fair class, the one whose slices
// the two calls above and SliceKeeper are about? Its policy must be
// SCHED_OTHER or SCHED_BATCH, and no sched_ext scheduler may be running
// those policies' tasks: one loaded in switch-all mode (as
// `parkway sched load` does) takes every such thread while the policy
// stays SCHED_OTHER; a sched_yield there would only end the slice that
// scheduler gave (and scx_parkway would queue the yielding worker as a
// preempted one). Checked when a worker starts.
bool in_fair_class() noexcept;


// [Y1] The end of a worker's slice, kept by the worker itself at its task
// boundaries (docs/design/parking.md, "Ending the slice at a task
// boundary"). The kernel ends a slice that ran out only at its next
// scheduling event: a wake-up on that CPU, or the timer tick (4 ms at
// HZ=250). A thread waiting for the CPU of a worker in a long stream of
// tasks waited up to that tick, whatever slice the worker asked for. A
// worker with a ring asks due() between tasks, and yields (yield_now())
// once it has run a whole slice since it last slept or yielded:
// sched_yield, which in EEVDF moves its deadline on and picks again; alone
// on its CPU it goes straight on. The count is of wall time (the vDSO
// clock, read at boundaries spaced to about a sixteenth of a slice),
// confirmed by the thread's CPU time (a system call, only when the wall
// time says so): a worker that the kernel took off
// its CPU meanwhile got a new slice when it came back, and counts from
// there. Only in the fair class (in_fair_class): a real-time or
// SCHED_IDLE thread, or one a sched_ext scheduler runs (SCHED_EXT, or any
// SCHED_OTHER thread under a switch-all scheduler), is not sliced this
// way. Owner thread only.
class SliceKeeper {
 public:
  // Kept for `slice_us` microseconds (0: never due).
  void start(unsigned slice_us) noexcept {
    slice_ns_ = std::uint64_t(slice_us) * 1000;
    slept();
  }
  bool due() noexcept {
    if (slice_ns_ == 0 || --countdown_ != 0) [[likely]]
      return false;
    const std::uint64_t now = monotonic_ns();
    // Look at the clock about every slice/16 to slice/8: every boundary
    // when tasks are long, every few hundred when they take nanoseconds (a
    // clock read per boundary cost a fork-join of tiny tasks 80%).
    const std::uint64_t gap = now - last_;
    last_ = now;
    if (gap < slice_ns_ / 16 && stride_ < kMaxStride) stride_ *= 2;
    else if (gap > slice_ns_ / 8 && stride_ > 1) stride_ /= 2;
    countdown_ = stride_;
    if (wall_ == 0) {  // the first look after a sleep starts the count
      wall_ = now;
      cpu_ = 0;  // not read: most runs after a sleep are short
      return false;
    }
    if (now - wall_ < slice_ns_) return false;
    if (cpu_ != 0) {
      const std::uint64_t cpu = thread_cpu_ns();
      if (cpu - cpu_ < slice_ns_) {  // off its CPU meanwhile: a new slice began
        wall_ = now;
        cpu_ = cpu;
        return false;
      }
    }
    return true;
  }
  // Gives up the CPU and starts the next count.
  void yield_now() noexcept {
    yield_cpu();
    wall_ = last_ = monotonic_ns();
    cpu_ = thread_cpu_ns();
  }
  // The worker slept (parked): its next run starts a new slice, counted
  // from its first boundary.
  void slept() noexcept {
    wall_ = 0;
    countdown_ = 1;
  }

 private:
  static constexpr std::uint32_t kMaxStride = 256;
  static std::uint64_t thread_cpu_ns() noexcept;
  static void yield_cpu() noexcept;
  std::uint64_t slice_ns_ = 0;
  std::uint64_t wall_ = 0;  // monotonic time the count began; 0: at the next look
  std::uint64_t cpu_ = 0;   // the thread's CPU time then; 0: not read
  std::uint64_t last_ = 0;  // monotonic time of the last look
  std::uint32_t stride_ = 1;     // boundaries between two looks
  std::uint32_t countdown_ = 1;  // boundaries to the next look
};

}  // namespace parkway::detail
