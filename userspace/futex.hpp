// futex.hpp -- the two futex calls parkway makes (private futexes only).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

namespace parkway::detail {

// Sleeps while *word == expected (the kernel checks atomically against a
// concurrent futex_wake). Returns on wake, on a mismatch (EAGAIN), on a
// signal or at the timeout; callers re-check their condition in a loop.
inline void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                       const timespec* timeout = nullptr) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, timeout,
          nullptr, 0);
}

inline void futex_wake(std::atomic<std::uint32_t>* word, int n = 1) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr,
          0);
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace parkway::detail
