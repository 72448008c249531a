// task_alloc.cpp -- task memory: per-thread free lists of 64/128/256-byte
// blocks in front of malloc.
//
// A task is usually freed by the thread that ran it, which is often not the
// one that allocated it; the block then joins the runner's list. A list
// holds at most kMaxCached blocks (`room` counts down), so a producer/
// consumer pair cannot grow one thread's cache without bound (excess goes
// back to malloc). The lists are plain thread-local PODs (no TLS guard on
// the hot path). `room` starts at 0: a thread caches nothing until its
// first malloc-backed allocation registers a thread-local whose destructor
// returns the cache to malloc at thread exit, so no cached block outlives
// its thread.
#include <cstdlib>
#include <new>

#include "parkway/task.hpp"

namespace parkway::detail {
namespace {

constexpr std::size_t kClasses = 3;
constexpr std::size_t kClassBytes[kClasses] = {64, 128, 256};
constexpr unsigned kMaxCached = 512;

struct FreeBlock {
  FreeBlock* next;
};

struct Cache {
  FreeBlock* head[kClasses];
  unsigned room[kClasses];  // how many more blocks the list may take
  bool registered;
};

thread_local Cache tls_cache __attribute__((tls_model("initial-exec"))) = {};

struct CacheReaper {
  ~CacheReaper() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = tls_cache.head[c]) {
        tls_cache.head[c] = b->next;
        std::free(b);
      }
      tls_cache.room[c] = 0;
    }
  }
};

__attribute__((noinline, cold)) void register_reaper() {
  thread_local CacheReaper reaper;
  (void)reaper;
  tls_cache.registered = true;
  for (std::size_t c = 0; c < kClasses; ++c) tls_cache.room[c] += kMaxCached;
}

inline int class_of(std::size_t bytes) noexcept {
  return bytes <= 64 ? 0 : bytes <= 128 ? 1 : bytes <= 256 ? 2 : -1;
}

}  // namespace

__attribute__((noinline)) void* allocate_from_malloc(std::size_t bytes) {
  if (!tls_cache.registered) register_reaper();
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void* allocate_task(std::size_t bytes) {
  int c = class_of(bytes);
  if (c >= 0) {
    if (FreeBlock* b = tls_cache.head[c]) {
      tls_cache.head[c] = b->next;
      ++tls_cache.room[c];
      return b;
    }
    bytes = kClassBytes[c];
  }
  return allocate_from_malloc(bytes);
}

void free_task(void* p, std::size_t bytes) noexcept {
  int c = class_of(bytes);
  if (c >= 0 && tls_cache.room[c] != 0) {
    auto* b = static_cast<FreeBlock*>(p);
    b->next = tls_cache.head[c];
    tls_cache.head[c] = b;
    --tls_cache.room[c];
    return;
  }
  std::free(p);
}

}  // namespace parkway::detail
