// tsan.hpp -- what the runtime tells ThreadSanitizer.
//
// PARKWAY_TSAN is defined when the build runs under ThreadSanitizer (g++
// defines __SANITIZE_THREAD__, clang has the feature test). TSAN sees only
// C++ atomics, so inline-asm shortcuts that stand for one are off under
// it. It also does not see memory that is mapped and unmapped with raw
// system calls: tsan_acquire/tsan_release name an ordering the kernel
// gives there (IoRing's "A ring's mappings"). Outside TSAN they are
// nothing.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define PARKWAY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PARKWAY_TSAN 1
#endif
#endif

#if defined(PARKWAY_TSAN)
// The runtime's annotation interface (<sanitizer/tsan_interface.h>,
// declared here: not every compiler install ships that header).
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace parkway::detail {

// Everything this thread did before tsan_release(a) happens before
// everything after any later tsan_acquire(a), as TSAN sees it.
inline void tsan_acquire([[maybe_unused]] void* a) noexcept {
#if defined(PARKWAY_TSAN)
  __tsan_acquire(a);
#endif
}
inline void tsan_release([[maybe_unused]] void* a) noexcept {
#if defined(PARKWAY_TSAN)
  __tsan_release(a);
#endif
}

}  // namespace parkway::detail
