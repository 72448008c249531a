// parking.hpp -- who searches for work, who sleeps, and who wakes whom.
//
// The protocol (docs/design/parking.md has the invariants and the proof
// sketch; docs/spec/parking.pml is its SPIN model; the step names below,
// e.g. [P1], are the model's):
//
//   state_ = (idle << 32) | (quiet << 16) | searching, one word, updated
//   only by RMWs. quiet (Q) counts the workers idle in their main loop
//   (not in a helping wait: that one is inside a task) plus those that
//   have left at shutdown; it decides when a worker may leave (below).
//
//   Worker out of local work:
//     start_searching()  [S1]  S += 1 unless 2*S >= N (cap: ~half search)
//     ... steal / take from the injection queue ...
//     found work:  stop_searching() [S2] S -= 1; if that was the last
//                  searcher, a worker is idle and work is still visible
//                  [S3], wake_one()
//                  [the last searcher that finds work wakes the next one]
//     no work:     ParkWord::announce() [P0]; announce_idle() [P1]: push
//                  self on the idle list, idle += 1, S -= 1 if searching;
//                  then RECHECK every queue [P2]; work seen -> withdraw()
//                  [P3] and search again; else sleep on the ParkWord [P4];
//                  woken: [P5] withdraw(); the idle list says whether a
//                  waker removed it (then it is counted as a searcher).
//   Producer after making a task visible (deque push, injection push):
//     should_wake() [N1 fence, N2 load]: S == 0 && idle > 0 -> wake_one()
//     (a worker's push: [N1] is asymmetric, the parker's and the last
//     searcher's rechecks issue membarrier(2), unless every other worker
//     is idle; asymmetric_fence.hpp, parking.md)
//     [W1 lock; W2 CAS idle -= 1, S += 1 only if still S == 0 (the wakee
//     starts as a searcher, so later producers do not wake more); W3 pop
//     the idle list, pos = -1; unlock; W4 leave kHandedOff on the wakee's
//     ParkWord, W5 FUTEX_WAKE if it was kParked].
//
//   Shutdown (stop set), a worker with nothing to run anywhere:
//     snapshot state_ [E2], drain once more, then leave only if every
//     other worker is quiet and state_ is unchanged: CAS Q += 1 [E3];
//     then wake_one() hands the exit on. Otherwise it parks; its [P2]
//     does not sleep when its [P1] made Q == N (it was the last to go
//     quiet), and goes back to leave. So no worker leaves while another
//     still runs a task that may spawn more (parking.md, "Shutdown").
//
// No lost wakeup: a producer's push, fence, load of state_ and a parker's
// RMW of state_, recheck are a Dekker pair: either the producer sees the
// parker idle (and S == 0 -> it wakes someone), or the parker's recheck
// sees the task. If the producer sees S > 0, each searcher either finds
// work (and the last one re-checks after its S -= 1) or parks (and
// re-checks after its S -= 1): the same Dekker pair.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "asymmetric_fence.hpp"
#include "chaos.hpp"

namespace parkway::detail {

class Parking {
 public:
  explicit Parking(unsigned nworkers);

  static unsigned searching_of(std::uint64_t s) noexcept { return unsigned(s & 0xffffu); }
  static unsigned quiet_of(std::uint64_t s) noexcept { return unsigned((s >> 16) & 0xffffu); }
  static unsigned idle_of(std::uint64_t s) noexcept { return unsigned(s >> 32); }

  // [S1] Become a searcher unless about half the workers already are.
  bool start_searching() noexcept;
  // [S2] Stop searching, and say what the baton recheck [S3] needs. It is
  // needed only if this was the last searcher and some worker was idle
  // then (a worker that goes idle later rechecks the queues itself, [P2]).
  // Its heavy fence is needed only if some other worker was busy then:
  // workers that are all idle push nothing, and what they pushed before
  // their [P1] is ordered before this RMW (parking.md, "When the heavy
  // side can be skipped").
  enum class Baton : std::uint8_t {
    kNone,     // not the last searcher, or nobody idle: no recheck
    kFenced,   // heavy fence, then the recheck
    kUnfenced  // every other worker idle: the recheck alone
  };
  Baton stop_searching() noexcept;

  // [N1, N2] Producer outside the pool, after publishing work: is a wake
  // needed? A full fence orders the push before [N2].
  bool should_wake() const noexcept {
    PW_CHAOS();
    store_load_fence();  // [N1]
    return wake_needed();
  }
  // A worker's push: [N1] is a compiler barrier when membarrier is on and
  // its deque is unfenced (Worker::after_push, then
  // state_after_push_unfenced); here a full fence whatever the mode, for
  // a push onto a fenced deque (parkers may then skip their heavy fence)
  // and a batch moved into a deque. Each returns the [N2] snapshot; the
  // caller tests it with wake_needed() (and switches its deque's steal
  // gate by it).
  std::uint64_t state_after_fenced_push() const noexcept {
    store_load_fence();  // [N1]
    return state_after_push_unfenced();
  }
  // [N2] alone, for a caller that knows the asymmetric mode is on and has
  // put the compiler barrier of [N1] before it (Worker::after_push).
  std::uint64_t state_after_push_unfenced() const noexcept {
    PW_CHAOS();
    return state_.load(std::memory_order_relaxed);  // [N2]
  }
  // Nobody searches and someone is idle: a producer must wake one.
  // Every one of the n workers is idle or searching (a snapshot: a
  // worker may start a task right after). Searchers use it to stop early.
  bool nobody_running(unsigned n) const noexcept {
    const std::uint64_t s = state_.load(std::memory_order_relaxed);
    return idle_of(s) + searching_of(s) >= n;
  }
  static bool wake_needed(std::uint64_t s) noexcept { return searching_of(s) == 0 && idle_of(s) > 0; }
  // [W1..W5] Wake one idle worker as a searcher, if still nobody searches.
  // Returns the index of the worker woken, or -1.
  int wake_one() noexcept;

  // [P1] Worker `w` goes on the idle list (and stops searching if it was).
  // Returns true if every worker is idle now: then the [P2] recheck needs
  // no heavy fence (as for kUnfenced above). `main`: it parks in its main
  // loop, so it is also quiet; *all_quiet (if given) says whether every
  // worker is quiet now.
  bool announce_idle(unsigned w, bool searching, bool main = false, bool* all_quiet = nullptr) noexcept;
  // [P3]/[P5] Worker `w` is awake again. Returns true if a waker took it
  // off the idle list (it then counts as a searcher), false if it removed
  // itself (it is neither idle nor searching).
  bool withdraw(unsigned w) noexcept;

  // [E3] Shutdown: leave for good, counted as quiet, if every other worker
  // was quiet in `seen` (an [E2] snapshot) and state_ still equals it.
  // False: someone else is (or was meanwhile) running; park instead.
  bool try_leave(std::uint64_t seen) noexcept;
  // Workers whose threads could not be created count as gone (quiet), so
  // that the ones that did start can leave.
  void never_started(unsigned k) noexcept;

  // Published once, when the worker's thread starts, before it can go on
  // the idle list; read by wake_one ([W4]) under mu_.
  void set_park_id(unsigned w, std::uint32_t park_id) noexcept {
    park_ids_[w].store(park_id, std::memory_order_seq_cst);
  }
  // kNoParkId until worker w's thread has started and published its id.
  static constexpr std::uint32_t kNoParkId = ~std::uint32_t(0);
  // wake_one ([W4]) needs only acquire; seq_cst costs nothing more on x86.
  std::uint32_t park_id(unsigned w) const noexcept { return park_ids_[w].load(std::memory_order_seq_cst); }

  std::uint64_t snapshot() const noexcept { return state_.load(std::memory_order_seq_cst); }

 private:
  bool wake_needed() const noexcept {
    PW_CHAOS();
    return wake_needed(state_.load(std::memory_order_relaxed));  // [N2]
  }

  const unsigned n_;
  alignas(64) std::atomic<std::uint64_t> state_{0};
  alignas(64) std::mutex mu_;        // guards idle_ and pos_ (slow path only)
  std::vector<unsigned> idle_;       // LIFO: the most recently parked is woken first
  std::vector<bool> quiet_;          // per worker, under mu_: parked in its main loop (counted in Q)
  // Index of each worker in idle_, or -1. Written under mu_; a worker may
  // read its own entry without the lock: only a waker (or the worker
  // itself) makes it -1, so -1 read by the worker means "handed off".
  std::unique_ptr<std::atomic<int>[]> pos_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> park_ids_;
};

}  // namespace parkway::detail
