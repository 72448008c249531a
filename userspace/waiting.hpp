// waiting.hpp -- blocking until a completion condition holds; shared by
// CompletionWord (Future, coroutines) and TaskGroup. The condition's
// completers know the waiter by its ParkWord id (registered beforehand in
// the word they update) and notify that ParkWord; see completion.cpp.
#pragma once

#include <atomic>
#include <cstdint>

namespace parkway::detail {

class Worker;
using DoneFn = bool (*)(void*) noexcept;

// Registering a waiter's ParkWord id in the high half of a 64-bit
// (count | (id + 1) << 32) word. kDone: the low half was already zero;
// kOccupied: another waiter is registered (this one must poll);
// kAlready: this thread's id is there already (an outer wait of the same
// thread, further down its stack, put it there and will remove it).
enum class Reg { kDone, kRegistered, kOccupied, kAlready };
Reg register_waiter(std::atomic<std::uint64_t>& word, std::uint32_t id) noexcept;

// On a worker: run its own deque's tasks (newest first, usually the ones
// waited for) until done(ctx); false if the deque ran dry first.
bool help_own_deque(Worker* me, DoneFn done, void* ctx) noexcept;

// Block until done(ctx): a worker runs other tasks meanwhile (and parks
// when there are none); another thread sleeps on ParkWord `id`. `timed`:
// re-check every millisecond (for a waiter no completer will notify).
void block_until(Worker* me, std::uint32_t id, DoneFn done, void* ctx, bool timed) noexcept;

}  // namespace parkway::detail
