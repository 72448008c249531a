// parker.cpp -- the registry of immortal ParkWords (see parker.hpp).
#include "parker.hpp"

#include <pthread.h>

#include <cstdint>
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

// The calling thread's id, kNoId before its first blocking wait. A plain
// thread_local with no destructor, so it stays readable while the
// thread's C++ thread_local objects are destroyed: one of their
// destructors may still wait on a Future. The id goes back to the registry
// from a pthread key destructor, which glibc runs after all of those
// (and again, up to PTHREAD_DESTRUCTOR_ITERATIONS times, if a later key
// destructor took a new one). A thread_local object releasing it in its
// destructor gave the id back too early: a destructor that ran after it
// waited on an id another live thread could be given, and two threads on
// one word lose each other's wakeups.
constexpr std::uint32_t kNoId = ~std::uint32_t(0);
thread_local std::uint32_t t_park_id = kNoId;

void release_at_thread_exit(void* v) noexcept {
  release_park_word(std::uint32_t(reinterpret_cast<std::uintptr_t>(v) - 1));
  t_park_id = kNoId;
}

pthread_key_t park_id_key() noexcept {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, &release_at_thread_exit) != 0) {
      std::fprintf(stderr, "parkway: pthread_key_create failed\n");
      std::abort();
    }
    return k;
  }();
  return key;
}

// Both one-time initialisations done when the library loads, not at some
// first use that a fork() could interrupt: a child would find the
// function-local static's guard taken by a thread it does not have.
// init_priority 101: before a statically linked program's own initialisers.
struct RegistryInit {
  RegistryInit() noexcept {
    registry();
    park_id_key();
  }
};
__attribute__((init_priority(101))) const RegistryInit g_registry_init;

}  // namespace

void lock_park_registry_for_fork() noexcept { registry().mu.lock(); }
void unlock_park_registry_after_fork() noexcept { registry().mu.unlock(); }

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
  if (t_park_id == kNoId) [[unlikely]] {
    const pthread_key_t key = park_id_key();
    t_park_id = acquire_park_word();
    // id + 1: a key's destructor runs only for a non-null value.
    pthread_setspecific(key, reinterpret_cast<void*>(std::uintptr_t(t_park_id) + 1));
  }
  return t_park_id;
}

}  // namespace parkway::detail
