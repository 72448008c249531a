// parker.cpp -- the registry of immortal ParkWords (see parker.hpp).
#include "parker.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace parkway::detail {
namespace {

constexpr std::uint32_t kChunkBits = 8;
constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
constexpr std::uint32_t kMaxChunks = 1u << 16;  // 16M words: far more than threads

struct Registry {
  std::atomic<ParkWord*> chunks[kMaxChunks] = {};
  std::mutex mu;
  std::vector<std::uint32_t> free_ids;
  std::uint32_t next_id = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // immortal on purpose
  return *r;
}

struct ThreadPark {
  std::uint32_t id = acquire_park_word();
  ~ThreadPark() { release_park_word(id); }
};

}  // namespace

std::uint32_t acquire_park_word() noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  std::uint32_t id;
  if (!r.free_ids.empty()) {
    id = r.free_ids.back();
    r.free_ids.pop_back();
  } else {
    id = r.next_id++;
    std::uint32_t c = id >> kChunkBits;
    if (c >= kMaxChunks) {
      std::fprintf(stderr, "parkway: more than %u sleeping threads at once\n", kMaxChunks * kChunkSize);
      std::abort();
    }
    if (!r.chunks[c].load(std::memory_order_relaxed))
      r.chunks[c].store(new ParkWord[kChunkSize], std::memory_order_release);
  }
  park_word(id).word.store(kAwake, std::memory_order_relaxed);
  return id;
}

void release_park_word(std::uint32_t id) noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.free_ids.push_back(id);
}

ParkWord& park_word(std::uint32_t id) noexcept {
  return registry().chunks[id >> kChunkBits].load(std::memory_order_acquire)[id & (kChunkSize - 1)];
}

std::uint32_t this_thread_park_id() noexcept {
  thread_local ThreadPark tp;
  return tp.id;
}

}  // namespace parkway::detail
