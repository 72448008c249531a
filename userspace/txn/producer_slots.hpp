// txn/producer_slots.hpp -- which child of an injection tree
// (txn/inject_tree.hpp) a submitting thread pushes to. Design note:
// docs/design/priority-tags.md, "One child per producer".
//
// Each tree owns a ProducerSlots: one bit per child, set while a live
// thread owns that child. A thread's first push to a tree claims a free
// bit (one CAS) and records the claim in a thread-local list; a small
// thread-local cache (tree serial -> child) answers the later pushes
// without touching a shared word. The thread's exit releases its bits. So
// while at most `children` live threads push to a tree, each has a child
// of its own, however many threads came and went before and whatever other
// trees they push to. When every child is owned, a newcomer shares one
// (round-robin) and is marked kShared; the tree moves it to a freed child
// once its shared child has handed out everything (so that its earlier
// tasks still go first).
//
// Serials, not addresses, identify trees: a tree built where a destroyed
// one stood gets a new serial, so a stale cache entry never matches. The
// owned bits live in a block that the tree and each thread's claim hold a
// reference to, so a thread may exit after the tree is gone; no lock is
// taken anywhere (so fork() cannot inherit one held).
#pragma once

#include <atomic>
#include <cstdint>

namespace parkway::detail::txn {

class ProducerSlots {
 public:
  static constexpr unsigned kShared = 0x100;  // in mine(): a child shared with its owner

  explicit ProducerSlots(unsigned children) noexcept;  // 1..32
  ~ProducerSlots();
  ProducerSlots(const ProducerSlots&) = delete;
  ProducerSlots& operator=(const ProducerSlots&) = delete;

  // The calling thread's child in this tree, | kShared if it does not own
  // it. The first call from a thread claims one.
  unsigned mine() noexcept {
    const Cache& c = t_cache_[serial_ & (kCacheWays - 1)];
    if (c.serial == serial_) [[likely]] return c.child;
    return lookup();
  }

  // A child is free (some owner exited since every child was taken).
  bool has_free() const noexcept { return b_->owned.load(std::memory_order_relaxed) != all_; }

  // For a thread whose mine() has kShared: claim a free child if there is
  // one. Returns the new mine().
  unsigned reclaim() noexcept;

  // The owned bits (tests).
  std::uint32_t owned() const noexcept { return b_->owned.load(std::memory_order_relaxed); }

 private:
  struct Cache {
    std::uint64_t serial;
    unsigned child;
  };
  // Direct-mapped by serial: a thread that alternates between a few trees
  // (several runtimes) still hits. Serial 0 is never issued.
  static constexpr unsigned kCacheWays = 4;
  static inline thread_local constinit Cache t_cache_[kCacheWays] __attribute__((tls_model("initial-exec"))) = {};

  // Shared by the tree and every thread that claimed in it; the last one
  // to let go frees it. On a line of its own: written only when a thread
  // claims or gives back a child, never by push or pop.
  struct alignas(64) Block {
    std::atomic<std::uint32_t> owned{0};  // bit i: a live thread owns child i
    std::atomic<std::uint32_t> refs{1};   // the tree + one per claiming thread
    std::atomic<bool> dead{false};        // the tree was destroyed
    void unref() noexcept {
      if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
  };
  friend struct ClaimList;

  unsigned lookup() noexcept;
  bool claim_free(unsigned* child) noexcept;

  const std::uint64_t serial_;
  const unsigned n_;
  const std::uint32_t all_;
  Block* const b_;
  std::atomic<unsigned> next_shared_{0};
};

}  // namespace parkway::detail::txn
