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

}  // namespace parkway::detail
