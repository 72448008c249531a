// parking.cpp -- the parking protocol's state transitions (see parking.hpp).
#include "parking.hpp"

#include "parker.hpp"

namespace parkway::detail {

namespace {
constexpr std::uint64_t kOneIdle = std::uint64_t(1) << 32;
constexpr std::uint64_t kOneSearching = 1;
}  // namespace

Parking::Parking(unsigned nworkers) : n_(nworkers), pos_(nworkers, -1), park_ids_(new std::atomic<std::uint32_t>[nworkers]()) {
  idle_.reserve(nworkers);
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

bool Parking::stop_searching() noexcept {
  // [S2] seq_cst RMW; the caller's recheck of the queues after it pairs
  // with a producer's [N1] fence.
  std::uint64_t prev = state_.fetch_sub(kOneSearching, std::memory_order_seq_cst);
  return searching_of(prev) == 1;
}

int Parking::wake_one() noexcept {
  unsigned w;
  {
    std::lock_guard<std::mutex> g(mu_);  // [W1]
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    if (searching_of(s) != 0 || idle_.empty()) return -1;
    w = idle_.back();
    idle_.pop_back();
    pos_[w] = -1;
    // idle -= 1, searching += 1 in one RMW: producers that read state_
    // from now on see a searcher and do not wake another worker.
    state_.fetch_add(kOneSearching - kOneIdle, std::memory_order_seq_cst);
  }
  park_word(park_id(w)).hand_off();  // [W2]
  return int(w);
}

void Parking::announce_idle(unsigned w, bool searching) noexcept {
  std::lock_guard<std::mutex> g(mu_);
  pos_[w] = int(idle_.size());
  idle_.push_back(w);
  // [P1] seq_cst RMW; pairs with a producer's [N1] fence: the caller's
  // recheck [P2] that follows sees any task pushed before that fence.
  state_.fetch_add(kOneIdle - (searching ? kOneSearching : 0), std::memory_order_seq_cst);
}

bool Parking::withdraw(unsigned w) noexcept {
  std::lock_guard<std::mutex> g(mu_);  // [P3]/[P5]
  int p = pos_[w];
  if (p < 0) return true;  // a waker took us off the list: we are a searcher
  unsigned last = idle_.back();
  idle_[std::size_t(p)] = last;
  pos_[last] = p;
  idle_.pop_back();
  pos_[w] = -1;
  state_.fetch_sub(kOneIdle, std::memory_order_seq_cst);
  return false;
}

}  // namespace parkway::detail
