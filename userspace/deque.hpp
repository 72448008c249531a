// deque.hpp -- a worker's growable Chase-Lev work-stealing deque.
//
// D. Chase, Y. Lev, "Dynamic Circular Work-Stealing Deque", SPAA 2005, with
// the C11 memory orderings of N. M. Lê, A. Pop, A. Cohen, F. Zappa Nardelli,
// "Correct and Efficient Work-Stealing for Weak Memory Models", PPoPP 2013
// (Fig. 1). The owner pushes and pops at the bottom (LIFO); thieves steal
// at the top (FIFO) with one CAS on `top`.
//
// Deviations from the paper, each no weaker than it:
//  * push publishes with a release store of `bottom` instead of a release
//    fence + relaxed store (same code on x86; lets ThreadSanitizer, which
//    ignores fences, see the happens-before edge).
//  * pop's stores of `bottom` are release stores, not relaxed: the paper's
//    proof is in C11, where a relaxed store after push's release store
//    (same thread, same word) continues its release sequence; C++20 dropped
//    that rule (P0982, [diff.cpp17.basic]), so a thief whose acquire load
//    reads pop's store would synchronize with no push (same code on x86).
//  * steal_batch() takes several tasks by repeating the single-task steal.
//    A one-CAS "steal half" that advances `top` by n is unsafe with this
//    pop: the owner takes bottom slots without a CAS while more than one
//    task remains, so a thief's stale view of `bottom` can overlap them.
//  * Old buffers are retired, not freed, until the deque dies (a thief may
//    still read one); total retired memory is below the final buffer size.
//  * The steal gate: pop's seq_cst fence runs only while a thief may be
//    stealing. Thieves steal in sessions announced on `gate_` ([D7]); a
//    thief that finds the owner unfenced ([D8]) runs membarrier(2), the
//    heavy side of an asymmetric fence (asymmetric_fence.hpp), whose
//    barrier on the owner's CPU stands in for the missing fence. The owner
//    turns the fence on while the pool has idle or searching workers
//    ([D1], from Worker::after_push, Worker::fence_if_needed and Worker::park) and off
//    when everyone is busy ([D2]).
//    deque.md has the argument; docs/spec/deque.pml checks it under TSO.
//
// Invariant: each pushed task is returned exactly once, by pop() or by a
// steal; checked by tests/test_deque.cpp under TSAN and ASAN, and by the
// SPIN model docs/spec/deque.pml (make spec-deque).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "asymmetric_fence.hpp"
#include "chaos.hpp"
#include "futex.hpp"
#include "parkway/task.hpp"

namespace parkway::detail {

class Deque {
 public:
  explicit Deque(std::size_t log2_capacity = 8) : buf_(new Buffer(log2_capacity)) {
    own(buf_.load(std::memory_order_relaxed), 0);
  }
  ~Deque() {
    delete buf_.load(std::memory_order_relaxed);
    for (Buffer* b : retired_) delete b;
  }
  Deque(const Deque&) = delete;
  Deque& operator=(const Deque&) = delete;

  // Owner only: from now on every push goes through push_at_limit() (the
  // trace's task level records spawns there, keeping the common path free).
  void force_slow_pushes() noexcept {
    slow_pushes_ = true;
    push_limit_ = INT64_MIN;
  }

  // Owner only.
  void push(Task* t) {
    if (!try_push(t)) [[unlikely]] push_at_limit(t);
  }
  // Owner only. false (nothing pushed) when the cached limit says the
  // buffer may be full; push_at_limit() then looks at top again, and grows
  // the buffer only if it is full.
  bool try_push(Task* t) noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    if (b >= push_limit_) [[unlikely]] return false;
    own_slots_[b & own_mask_].store(t, std::memory_order_relaxed);
    bottom_.store(b + 1, std::memory_order_release);
    return true;
  }

  // The capacity check reads a cached limit, top + capacity, instead of
  // top itself: top only grows, so a limit from an older top is lower and
  // a push that passes it never overwrites a slot a thief may still read.
  // Only a push that reaches the limit loads top again (acquire, as the
  // paper's push: the thieves' reads of the slots it frees happen-before),
  // here, and grows the buffer if it is really full. Owner only; after
  // try_push() returned false.
  __attribute__((noinline)) void push_at_limit(Task* t) {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t tp = top_.load(std::memory_order_acquire);
    Buffer* a = own_;
    if (b - tp > own_mask_) a = grow(own_, tp, b);
    else limit_from(tp);
    a->put(b, t);
    bottom_.store(b + 1, std::memory_order_release);
  }

  // Owner only. nullptr when empty.
  Task* pop() noexcept {
    std::int64_t t, b;
    if (Task* x = pop_unless_last(&t, &b)) [[likely]] return x;
    return pop_last(t, b);
  }

  // Owner only. pop()'s common case: the newest task if more than one was
  // left; else nullptr, with the t and b that pop_last(t, b) needs to end
  // the pop (callers that count tasks keep that call out of line).
  Task* pop_unless_last(std::int64_t* tp, std::int64_t* bp) noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    // [D3] release: a thief's acquire load of bottom that reads this store
    // must see the pushes' slots (and buf_) that it may then take. In C++20
    // a relaxed store here would end the push's release sequence
    // ([intro.races], [diff.cpp17.basic]), and the thief would synchronize
    // with nothing. The same plain mov on x86.
    bottom_.store(b, std::memory_order_release);
    asm volatile("" ::: "memory");
    // [D4] fenced, or a thief in session. acquire: [D6] may not be read
    // before it (the compiler, or a CPU weaker than x86; deque.pml
    // abl-top-before-gate). The barrier above keeps it after [D3].
    if (gate_set())
      store_load_fence();                            // [D5] the paper's seq_cst fence
    std::int64_t t = top_.load(std::memory_order_relaxed);  // [D6]
    if (t < b) [[likely]] {  // more than one task: b is ours without a CAS
      Task* x = own_slots_[b & own_mask_].load(std::memory_order_relaxed);
#if defined(__SANITIZE_ADDRESS__) || defined(PARKWAY_TSAN) || defined(PARKWAY_CHAOS)
      if (!x) __builtin_trap();  // checked builds: a broken invariant crashes here
#else
      if (!x) __builtin_unreachable();  // no task is nullptr (push never stores one)
#endif
      return x;
    }
    *tp = t;
    *bp = b;
    return nullptr;
  }

  // The end of a pop that found at most one task (t >= b): t > b, it was
  // empty; t == b, the last task: race the thieves for it.
  __attribute__((noinline)) Task* pop_last(std::int64_t t, std::int64_t b) noexcept {
    Task* x = nullptr;
    if (t == b) {
      x = own_slots_[b & own_mask_].load(std::memory_order_relaxed);
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed))
        x = nullptr;
    }
    bottom_.store(b + 1, std::memory_order_release);  // release: as [D3]
    return x;
  }

  enum class Steal { kTaken, kEmpty, kLost };

  // Any thread but the owner. One steal session for one task. kLost: raced
  // another thief or the owner; retrying may work.
  Steal steal(Task** out) noexcept {
    if (!looks_nonempty()) return Steal::kEmpty;
    Session session(*this);
    if (!session.entered()) return Steal::kLost;
    return steal_one(out);
  }

  // Thief: takes up to max(1, min(limit, size/2)) tasks from `victim` in
  // one session; the first is returned, the rest are pushed onto *this
  // (the thief's own deque). Returns nullptr if nothing was taken; *lost
  // tells whether a race (rather than emptiness) stopped it, *paid_fence
  // (if given) whether the session had to call membarrier ([D8]).
  Task* steal_batch(Deque& victim, std::size_t limit, std::size_t* taken, bool* lost, bool* paid_fence = nullptr) {
    *taken = 0;
    *lost = false;
    if (paid_fence) *paid_fence = false;
    if (!victim.looks_nonempty()) return nullptr;
    std::int64_t n = victim.size_hint() / 2;
    if (n < 1) n = 1;
    if (n > std::int64_t(limit)) n = std::int64_t(limit);
    Task* first = nullptr;
    Session session(victim);  // left on every exit, also if push() throws
    if (paid_fence) *paid_fence = session.paid_fence();
    if (!session.entered()) {
      *lost = true;
      return nullptr;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      Task* t;
      Steal r = victim.steal_one(&t);
      if (r != Steal::kTaken) {
        *lost = (r == Steal::kLost);
        break;
      }
      if (!first) {
        first = t;
      } else {
        push(t);  // may grow; our own deque
      }
      ++*taken;
    }
    return first;
  }

  // Owner only: the fence switch of the steal gate (Worker::after_push).
  bool fenced() const noexcept { return fence_mode_ != kModeOff; }
  // Fenced, and the fence may be switched off (the asymmetric mode is on,
  // or not yet known to be off).
  bool fence_clearable() const noexcept { return fence_mode_ == kModeOn; }
  // [D1] Pops fence from now on (a thief may come: someone idle or searching).
  __attribute__((noinline)) void fence_on() noexcept {
    gate_.fetch_or(kFenced, std::memory_order_seq_cst);
    fence_mode_ = kModeOn;
  }
  // [D2] Pops stop fencing, unless a thief is in a session now (then the
  // CAS fails and the deque stays fenced). With the asymmetric mode off
  // the deque stays fenced for good.
  __attribute__((noinline)) void try_fence_off() noexcept {
    if (!asymmetric_fence_on()) {
      fence_mode_ = kModeForGood;
      return;
    }
    PW_CHAOS();
    std::uint64_t expect = kFenced;
    if (gate_.compare_exchange_strong(expect, 0, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      fence_mode_ = kModeOff;
#if !defined(__x86_64__)
      // A parker that read kFenced before this CAS skipped its membarrier
      // (parking.md, "When the heavy side can be skipped"): the owner's
      // later [N2] loads must read that parker's RMW, which precedes the
      // CAS. x86's locked CAS orders them; a weaker CPU needs the fence.
      std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
    }
  }

  // Any thread, after its own seq_cst RMW of Parking::state_: the gate
  // shows kFenced, so every push the owner made either was followed by a
  // full fence ([N1] of a fenced push, Worker::after_push_fenced) or came
  // before the RMW that set the bit, which this load reads or follows
  // (parking.md, "When the heavy side can be skipped").
  bool pushes_fenced() const noexcept { return (gate_.load(std::memory_order_seq_cst) & kFenced) != 0; }

  // Owner only: slots in the current buffer.
  std::int64_t capacity() const noexcept { return own_mask_ + 1; }

  // Any thread; a snapshot that may be stale by the time it returns.
  std::int64_t size_hint() const noexcept {
    std::int64_t b = bottom_.load(std::memory_order_relaxed);
    std::int64_t t = top_.load(std::memory_order_relaxed);
    return b > t ? b - t : 0;
  }

  // Any thread; seq_cst loads for the parking recheck (parking.md: the [P2]/[S3] rechecks).
  bool maybe_nonempty() const noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    return b > t;
  }

 private:
  struct Buffer {
    explicit Buffer(std::size_t log2) : mask((std::int64_t(1) << log2) - 1), slots(new std::atomic<Task*>[mask + 1]) {}
    ~Buffer() { delete[] slots; }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    const std::int64_t mask;
    std::atomic<Task*>* const slots;
    Task* get(std::int64_t i) const noexcept { return slots[i & mask].load(std::memory_order_relaxed); }
    void put(std::int64_t i, Task* t) noexcept { slots[i & mask].store(t, std::memory_order_relaxed); }
  };

  // The gate word: kFenced (owner's pops fence) + kThief per thief in a
  // steal session. Starts fenced: correct whatever the mode.
  static constexpr std::uint64_t kFenced = 1;
  static constexpr std::uint64_t kThief = 2;
  // How long a thief waits for an unfenced owner to fence itself (it does
  // so at its next push once it sees this thief searching) before paying
  // for membarrier(2); about a microsecond.
  static constexpr int kFenceWaitSpins = 64;

  // [D4]: the gate word is non-zero, an acquire load. On x86 (TSO, every
  // load is acquire) one compare with memory that the branch fuses with,
  // instead of a load, a test and the branch; the "memory" clobber keeps
  // the compiler from moving [D6] above it, as acquire does.
  bool gate_set() const noexcept {
#if defined(__x86_64__) && !defined(PARKWAY_TSAN)
    bool set;
    asm volatile("cmpq $0, %1" : "=@ccne"(set) : "m"(*reinterpret_cast<const std::uint64_t*>(&gate_)) : "memory");
    return set;
#else
    return gate_.load(std::memory_order_acquire) != 0;
#endif
  }

  // A stale look: false means empty when read (no session needed).
  bool looks_nonempty() const noexcept {
    std::int64_t t = top_.load(std::memory_order_acquire);
    std::int64_t b = bottom_.load(std::memory_order_acquire);
    return t < b;
  }

  // A thief's steal session on this deque, [D7] to [D10]. entered() is
  // false (and the session already left) if membarrier failed: the owner
  // may be popping unfenced, so this thief must not steal.
  class Session {
   public:
    explicit Session(Deque& d) noexcept : d_(d), in_(d.enter_session(&heavy_)) {}
    ~Session() {
      if (in_) d_.leave_session();
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    bool entered() const noexcept { return in_; }
    bool paid_fence() const noexcept { return heavy_; }  // called membarrier (or tried to)

   private:
    Deque& d_;
    bool heavy_ = false;
    const bool in_;
  };

  bool enter_session(bool* heavy) noexcept {
    PW_CHAOS();  // (chaos points on the rare paths only: never in pop)
    for (int i = 0; i < kFenceWaitSpins && !(gate_.load(std::memory_order_relaxed) & kFenced); ++i) cpu_relax();
    std::uint64_t old = gate_.fetch_add(kThief, std::memory_order_seq_cst);  // [D7]
    PW_CHAOS();
    if (!(old & kFenced)) {  // [D8] the owner's pops may not fence
      *heavy = true;
      if (!heavy_fence()) [[unlikely]] {
        leave_session();
        return false;
      }
    }
    return true;
  }
  void leave_session() noexcept { gate_.fetch_sub(kThief, std::memory_order_release); }  // [D10]

  // Lê et al.'s steal, inside a session.
  Steal steal_one(Task** out) noexcept {
    std::int64_t t = top_.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::int64_t b = bottom_.load(std::memory_order_acquire);
    if (t >= b) return Steal::kEmpty;
    // acquire (the paper's consume): see the slots of a grown buffer.
    Buffer* a = buf_.load(std::memory_order_acquire);
    Task* x = a->get(t);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed))  // [D9]
      return Steal::kLost;
    *out = x;
    return Steal::kTaken;
  }

  __attribute__((noinline)) Buffer* grow(Buffer* a, std::int64_t t, std::int64_t b) {
    std::size_t log2 = 0;
    while ((std::int64_t(1) << log2) <= a->mask) ++log2;
    auto* na = new Buffer(log2 + 1);
    for (std::int64_t i = t; i < b; ++i) na->put(i, a->get(i));
    retired_.push_back(a);
    buf_.store(na, std::memory_order_release);
    own(na, t);
    return na;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  std::atomic<std::uint64_t> gate_{kFenced};  // on top_'s line: pop reads both
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  // Owner's copy of gate_ & kFenced: kModeOff, kModeOn, or kModeForGood
  // (on, and the asymmetric mode is off: never switched off).
  static constexpr std::uint8_t kModeOff = 0, kModeOn = 1, kModeForGood = 2;
  std::uint8_t fence_mode_ = kModeOn;
  std::atomic<Buffer*> buf_;
  void own(Buffer* a, std::int64_t top) noexcept {
    own_ = a;
    own_mask_ = a->mask;
    own_slots_ = a->slots;
    limit_from(top);
  }
  void limit_from(std::int64_t top) noexcept {
    push_limit_ = slow_pushes_ ? INT64_MIN : top + own_mask_ + 1;
  }
  // The owner's copies of buf_ and of its fields (push and pop load no
  // pointer to reach a slot), and the bottom a push may not reach without
  // looking at top again (push_at_limit).
  Buffer* own_;
  std::int64_t own_mask_;
  std::atomic<Task*>* own_slots_;
  std::int64_t push_limit_;
  bool slow_pushes_ = false;  // force_slow_pushes()
  std::vector<Buffer*> retired_;  // owner only
};

}  // namespace parkway::detail
