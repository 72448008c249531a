// chaos.hpp -- randomized schedule perturbation for stress tests.
//
// Built with -DPARKWAY_CHAOS (make test-chaos), each PW_CHAOS() point at a
// step of the parking protocol (and of the deque's steal gate, on its
// rare paths) sometimes does nothing, sometimes spins,
// sometimes yields the CPU and sometimes sleeps a few microseconds, so the
// interleavings the SPIN model explores also happen in the real code.
// Without the flag it compiles to nothing.
#pragma once

#ifdef PARKWAY_CHAOS
#include <sched.h>
#include <time.h>

#include <cstdint>

namespace parkway::detail {
inline void chaos_point() noexcept {
  thread_local std::uint64_t x = 0x9E3779B97F4A7C15ull ^ std::uint64_t(reinterpret_cast<std::uintptr_t>(&x));
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  switch (x % 16) {
    case 0:
      sched_yield();
      break;
    case 1: {
      timespec ts{0, long(x >> 40) % 20000};
      nanosleep(&ts, nullptr);
      break;
    }
    case 2:
    case 3:
      for (unsigned i = 0, n = unsigned(x >> 50) % 2000; i < n; ++i) asm volatile("" ::: "memory");
      break;
    default:
      break;
  }
}
}  // namespace parkway::detail
#define PW_CHAOS() ::parkway::detail::chaos_point()
#else
#define PW_CHAOS() ((void)0)
#endif
