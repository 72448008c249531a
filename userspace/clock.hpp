// clock.hpp -- the runtime's one reading of CLOCK_MONOTONIC.
//
// Deadlines (io/ring.cpp), kernel slices (kernel_slice.hpp), transaction
// ages (txn/tag.cpp) and trace stamps (trace/recorder.cpp) all count in
// nanoseconds of CLOCK_MONOTONIC, which std::chrono::steady_clock also
// reads on Linux, so a deadline a user computes from steady_clock compares
// with these. clock_gettime goes through the vDSO: no system call.
#pragma once

#include <time.h>

#include <cstdint>

namespace parkway::detail {

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}

}  // namespace parkway::detail
