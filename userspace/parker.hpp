// parker.hpp -- a futex word with a wake token that persists.
//
// Every thread that ever sleeps in parkway sleeps on its own ParkWord: each
// worker, and each outside thread that waits for a Future or a TaskGroup.
// A ParkWord is one 32-bit futex word with four values:
//
//   kAwake     the owner is running (or about to decide to sleep)
//   kParked    the owner announced it will sleep; a waker must FUTEX_WAKE
//   kNotified  a wake token: someone asked the owner to look again
//   kHandedOff a wake token from the idle list: the waker took the owner
//              off the idle list and counted it as a searcher. Only a
//              hint: it may be stale (from a hand-off an earlier wake-up
//              already accounted for), so the idle list, not the token,
//              decides at [P5] (parking.md)
//   kParkedRing like kParked, for a worker asleep inside its io_uring ring
//              on a read of the word's doorbell eventfd (the fallback of
//              io.md where IORING_OP_FUTEX_WAIT is missing): a waker
//              writes the doorbell instead of FUTEX_WAKE
//
// Tokens persist: a wake that lands before the owner sleeps leaves the word
// != kParked, so the owner's FUTEX_WAIT(kParked) returns at once and the
// wake is not lost. A token is consumed only by the owner (exchange to
// kAwake). Wakers never overwrite kHandedOff with kNotified.
//
// ParkWords live in a process-wide registry that never frees memory; a
// word is named by a 32-bit id (CompletionWord stores it). A stale id can
// therefore only cause a spurious wake of the id's next owner, never a
// use-after-free; every sleeper re-checks its condition in a loop.
//
// The same word is what a worker parked inside its io_uring ring waits on
// with IORING_OP_FUTEX_WAIT (docs/design/io.md): to a waker it looks
// kParked, and FUTEX_WAKE completes the ring's wait.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "futex.hpp"

namespace parkway::detail {

enum : std::uint32_t { kAwake = 0, kParked = 1, kNotified = 2, kHandedOff = 3, kParkedRing = 4 };

struct alignas(64) ParkWord {
  std::atomic<std::uint32_t> word{kAwake};
  // An eventfd that wakes the owner when it sleeps as kParkedRing, or -1.
  // Set once by the first owner that parks that way, before its first
  // kParkedRing announcement, and never closed: like the word it is
  // immortal, so a stale waker writes at worst a spurious wake into it.
  std::atomic<int> doorbell{-1};

  // Owner: announce the intent to sleep (as kParked, or kParkedRing).
  // Returns the token if one was already there (then the owner must not
  // sleep; the token is consumed).
  std::uint32_t announce(std::uint32_t parked = kParked) noexcept {
    std::uint32_t v = kAwake;
    // seq_cst: a notify() that read kAwake before this is ordered before
    // it, so its token is visible to the owner's recheck that follows.
    if (word.compare_exchange_strong(v, parked, std::memory_order_seq_cst)) return kAwake;  // [P0]
    return word.exchange(kAwake, std::memory_order_acquire);
  }

  // Owner: sleep until a token arrives; consume and return it.
  std::uint32_t sleep() noexcept {
    while (word.load(std::memory_order_acquire) == kParked) futex_wait(&word, kParked);  // [P4]
    return word.exchange(kAwake, std::memory_order_acquire);                            // [P5a]
  }

  // Owner: sleep until a token arrives or the timeout passes; returns the
  // token, or kParked on timeout (the announcement is withdrawn).
  std::uint32_t sleep_for(const timespec& ts) noexcept {
    if (word.load(std::memory_order_acquire) == kParked) futex_wait(&word, kParked, &ts);
    return word.exchange(kAwake, std::memory_order_acquire);
  }

  // Owner: withdraw the announcement (found something to do). Returns a
  // token that arrived meanwhile, or kAwake.
  std::uint32_t cancel() noexcept { return word.exchange(kAwake, std::memory_order_acquire); }  // [P3c]

  // Anyone: leave a kNotified token; wake the owner if it may be asleep.
  // Returns true if a wake was issued. [C4] (a completion), [M2] (a
  // cancel posted to the owner's ring).
  bool notify() noexcept {
    // Always an RMW, also when a token is already there (it is written
    // back unchanged): the owner's exchange that consumes the token then
    // reads this RMW's value or one later in its release sequence, so
    // what the notifier did before (the last done() [C3], a mailbox push
    // [M1], stop [X1]) happens-before the owner's recheck after it. A mere
    // load that finds a token may read one the owner has already taken
    // (nothing orders the load after that exchange), and the owner,
    // parked again, rechecks without seeing the notifier's write: in
    // C++20, [C3] (acq_rel) then this load against the waiter's [P0] then
    // [C2] (acquire) is a store-buffering pair that no seq_cst order
    // forbids (parking.md, "Tokens persist").
    std::uint32_t v = word.load(std::memory_order_relaxed);
    std::uint32_t to;
    do {
      to = (v == kNotified || v == kHandedOff) ? v : kNotified;
    } while (!word.compare_exchange_weak(v, to, std::memory_order_seq_cst, std::memory_order_relaxed));
    return wake_sleeper(v);  // false for a token: its owner is not asleep
  }

  // Idle-list waker: [W4] exchange in kHandedOff, [W5] wake the owner if
  // it was asleep.
  void hand_off() noexcept { wake_sleeper(word.exchange(kHandedOff, std::memory_order_seq_cst)); }

 private:
  // After a token replaced `was`: FUTEX_WAKE a kParked owner (asleep on
  // the word, or inside its ring on an IORING_OP_FUTEX_WAIT of it); ring
  // the doorbell of a kParkedRing one. The doorbell was stored before the
  // owner's kParkedRing announcement, which our RMW read: it is visible.
  bool wake_sleeper(std::uint32_t was) noexcept {
    if (was == kParked) {
      futex_wake(&word);
      return true;
    }
    if (was == kParkedRing) {
      const std::uint64_t one = 1;
      const int fd = doorbell.load(std::memory_order_acquire);
      if (fd >= 0) (void)!::write(fd, &one, sizeof one);
      return true;
    }
    return false;
  }
};

// Registry of immortal ParkWords.
std::uint32_t acquire_park_word() noexcept;     // a free id (may allocate)
void release_park_word(std::uint32_t id) noexcept;
ParkWord& park_word(std::uint32_t id) noexcept;

// The calling thread's ParkWord id (acquired on first use, released at
// thread exit after the thread's C++ thread_local destructors, which may
// still wait). Workers set theirs explicitly.
std::uint32_t this_thread_park_id() noexcept;

// fork(): the registry's mutex is held across it (runtime.cpp's atfork
// handlers call these), so a child never inherits it locked by a thread
// that is not there.
void lock_park_registry_for_fork() noexcept;
void unlock_park_registry_after_fork() noexcept;
// io/group_scope.cpp: the registry of grouped coroutines' I/O (g_mu).
void lock_group_scopes_for_fork() noexcept;
void unlock_group_scopes_after_fork() noexcept;

}  // namespace parkway::detail
