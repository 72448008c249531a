// parking.cpp -- the parking protocol's state transitions (see parking.hpp).
#include "parking.hpp"

#include <cstdio>
#include <cstdlib>

#include "parker.hpp"
#include "parkway/options.hpp"

namespace parkway::detail {

namespace {
constexpr std::uint64_t kOneIdle = std::uint64_t(1) << 32;
constexpr std::uint64_t kOneQuiet = std::uint64_t(1) << 16;
constexpr std::uint64_t kOneSearching = 1;
static_assert(kMaxWorkers < (1u << 16), "S and Q are 16-bit fields of state_");

// What a worker on the idle list adds to state_: I, and Q if it parked in
// its main loop.
constexpr std::uint64_t listed(bool quiet) noexcept { return kOneIdle + (quiet ? kOneQuiet : 0); }

// A count that would go below zero means the protocol's bookkeeping is
// broken; stop loudly instead of hanging later with a wrapped counter.
[[noreturn, gnu::cold]] void violated(const char* what) noexcept {
  std::fprintf(stderr, "parkway: parking protocol violated: %s\n", what);
  std::abort();
}
}  // namespace

Parking::Parking(unsigned nworkers)
    : n_(nworkers),
      quiet_(nworkers, false),
      pos_(new std::atomic<int>[nworkers]),
      park_ids_(new std::atomic<std::uint32_t>[nworkers]) {
  idle_.reserve(nworkers);
  for (unsigned i = 0; i < nworkers; ++i) {
    pos_[i].store(-1, std::memory_order_relaxed);
    park_ids_[i].store(kNoParkId, std::memory_order_relaxed);
  }
}

bool Parking::start_searching() noexcept {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  do {
    if (2 * searching_of(s) >= n_ && searching_of(s) > 0) return false;
    // [S1] seq_cst RMW
  } while (!state_.compare_exchange_weak(s, s + kOneSearching, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  return true;
}

Parking::Baton Parking::stop_searching() noexcept {
  // [S2] seq_cst RMW; the caller's recheck of the queues after it pairs
  // with a producer's [N1] fence.
  std::uint64_t prev = state_.fetch_sub(kOneSearching, std::memory_order_seq_cst);
  if (searching_of(prev) == 0) violated("stop_searching with no searcher counted");
  if (searching_of(prev) != 1 || idle_of(prev) == 0) return Baton::kNone;
  // Everyone but the caller idle: each of them went idle with a [P1] RMW
  // of state_ that comes before this one, so what it pushed is visible.
  return idle_of(prev) + 1 == n_ ? Baton::kUnfenced : Baton::kFenced;
}

int Parking::wake_one() noexcept {
  unsigned w;
  {
    std::lock_guard<std::mutex> g(mu_);  // [W1]
    if (idle_.empty()) return -1;
    // [W2] idle -= 1, searching += 1 in one CAS that requires S == 0: a
    // worker may start searching (lock-free [S1]) after any earlier load,
    // and then nobody is to be woken (the cap and "wake only when nobody
    // searches" both depend on it). idle_ only changes under mu_.
    const unsigned back = idle_.back();
    const std::uint64_t leaves = listed(quiet_[back]);
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    do {
      if (searching_of(s) != 0) return -1;
    } while (!state_.compare_exchange_weak(s, s + kOneSearching - leaves, std::memory_order_seq_cst,
                                           std::memory_order_relaxed));
    w = back;
    quiet_[w] = false;
    idle_.pop_back();
    // [W3] after [W2]: a wakee that reads -1 here without the lock (its
    // withdraw fast path) must already be counted as a searcher.
    pos_[w].store(-1, std::memory_order_release);
  }
  PW_CHAOS();
  park_word(park_id(w)).hand_off();  // [W4], [W5]
  return int(w);
}

bool Parking::announce_idle(unsigned w, bool searching, bool main, bool* all_quiet) noexcept {
  std::lock_guard<std::mutex> g(mu_);
  pos_[w].store(int(idle_.size()), std::memory_order_relaxed);
  idle_.push_back(w);
  quiet_[w] = main;
  // [P1] seq_cst RMW; pairs with a producer's [N1] fence: the caller's
  // recheck [P2] that follows sees any task pushed before that fence.
  std::uint64_t prev = state_.fetch_add(listed(main) - (searching ? kOneSearching : 0), std::memory_order_seq_cst);
  if (searching && searching_of(prev) == 0) violated("a searcher parked with no searcher counted");
  if (all_quiet) *all_quiet = quiet_of(prev) + (main ? 1 : 0) == n_;
  return idle_of(prev) + 1 == n_;
}

bool Parking::withdraw(unsigned w) noexcept {
  // A waker took us off the list (and counted us as a searcher): no lock.
  if (pos_[w].load(std::memory_order_acquire) < 0) return true;  // [P3a]/[P5b]
  std::lock_guard<std::mutex> g(mu_);                            // [P3b]/[P5c]
  int p = pos_[w].load(std::memory_order_relaxed);
  if (p < 0) return true;
  unsigned last = idle_.back();
  idle_[std::size_t(p)] = last;
  pos_[last].store(p, std::memory_order_relaxed);
  idle_.pop_back();
  pos_[w].store(-1, std::memory_order_relaxed);
  state_.fetch_sub(listed(quiet_[w]), std::memory_order_seq_cst);
  quiet_[w] = false;
  return false;
}

void Parking::never_started(unsigned k) noexcept {
  state_.fetch_add(k * kOneQuiet, std::memory_order_seq_cst);
}

bool Parking::try_leave(std::uint64_t seen) noexcept {
  if (quiet_of(seen) + 1 != n_) return false;
  // [E3] seq_cst CAS: nobody went idle, woke or searched since [E2].
  return state_.compare_exchange_strong(seen, seen + kOneQuiet, std::memory_order_seq_cst,
                                        std::memory_order_relaxed);
}

}  // namespace parkway::detail
