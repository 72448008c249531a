// asymmetric_fence.hpp -- StoreLoad barriers split in two, so that the
// frequent side pays nothing and the rare side pays a membarrier(2) system
// call. Two protocols use it: the [N1] barrier of parking (below: a worker
// pushing onto an unfenced deque is the frequent side; a worker about to
// sleep, or the last searcher handing on the baton, the rare one, which
// skips it when every other worker is idle or pushes onto a fenced deque,
// with a full fence: parking.md), and the deque's steal
// gate (deque.md [D3]-[D8]: the owner's pop is the frequent side, a thief
// entering a steal session on an unfenced deque the rare one).
//
// The Dekker pair (parking.md): the producer stores its push, then loads
// Parking::state_ [N2]; a parker RMWs state_ [P1] (or a searcher [S2]),
// then loads every queue [P2]/[S3]. Symmetric: a full fence on both sides.
// Asymmetric: the producer has only a compiler barrier; the other side,
// after its RMW, calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which
// makes every running thread of the process execute a full barrier before
// it returns. Let B be the point in the producer's instruction stream
// where that barrier ran. If B comes after the producer's [N2] load, it
// also comes after the push (program order), so the push is visible to
// the recheck. If B comes before [N2], then [N2] executes after the
// parker's RMW and reads it or a later value: the producer sees the idle
// worker and wakes it. Either way the pair holds, as with two fences.
// (A thread that is not running has passed through a context switch, a
// full barrier, since its last instruction.)
//
// Decided once per process, when the library loads (before any thread of
// its own starts: the registration is cheap only while the process has
// one thread, asymmetric_fence.cpp): on when the kernel offers the
// expedited private command and the registration works, off when
// PARKWAY_MEMBARRIER=0 is set in the environment or the kernel lacks it
// (then both sides use the full fence).
#pragma once

#include <atomic>

#include "tsan.hpp"  // PARKWAY_TSAN

namespace parkway::detail {

// A full StoreLoad barrier. On x86 a locked RMW of the own stack line is
// cheaper than mfence; elsewhere the C++ fence.
inline void store_load_fence() noexcept {
#if defined(__x86_64__) && !defined(PARKWAY_TSAN)
  asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Written once, before any worker thread exists (thread creation orders it
// before every read); read relaxed on the hot path.
inline std::atomic<bool> g_asymmetric_fence{false};

// Called when the library loads, by the trace recorder before it starts
// its thread, and by every Runtime before it starts its workers; the
// first call decides. Returns whether the asymmetric mode is on.
bool init_asymmetric_fence() noexcept;

inline bool asymmetric_fence_on() noexcept { return g_asymmetric_fence.load(std::memory_order_relaxed); }

// The producer's side of [N1] on an unfenced deque, as a function of the
// mode (Worker::after_push inlines its compiler barrier, the only case
// it meets there): what the store-buffering litmus test exercises.
inline void producer_fence() noexcept {
  if (!asymmetric_fence_on()) [[unlikely]]
    store_load_fence();
  else
    asm volatile("" ::: "memory");  // only the compiler may not reorder
}

// The heavy side: membarrier(2), a full barrier on every other running
// thread of the process (a no-op when the mode is off, where the light
// sides fence themselves). Used by the parking rechecks ([P2], [S3], after
// their seq_cst RMW of state_, when some other worker may be busy) and by
// a thief entering a steal session on
// a deque whose owner pops without a fence ([D8], deque.md).
// Returns false if the system call failed (the kernel documents ENOMEM);
// each caller then falls back to something that needs no barrier on the
// other side: a parker sleeps timed, the last searcher wakes someone
// anyway, a thief gives up its steal.
[[nodiscard]] bool heavy_fence() noexcept;

// Tests only: make heavy_fence() fail, to exercise those fallbacks.
inline std::atomic<bool> g_heavy_fence_fails_for_test{false};

}  // namespace parkway::detail
