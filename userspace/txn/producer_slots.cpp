// txn/producer_slots.cpp -- claiming and giving back a tree's children for
// submitting threads (txn/producer_slots.hpp): the cold paths (a thread's
// first push to a tree, its exit, a tree's construction and destruction).
#include "txn/producer_slots.hpp"

#include <algorithm>
#include <bit>
#include <vector>

namespace parkway::detail::txn {

namespace {
std::atomic<std::uint64_t> g_next_serial{1};
}  // namespace

// A thread's claims, one per live tree it pushed to (child | kShared if it
// shares one). Its destructor, at thread exit, gives the owned children
// back and drops the references.
struct ClaimList {
  struct Claim {
    ProducerSlots::Block* b;
    std::uint64_t serial;
    unsigned child;
  };
  std::vector<Claim> v;

  static void drop(const Claim& c) noexcept {
    if (!(c.child & ProducerSlots::kShared))
      c.b->owned.fetch_and(~(std::uint32_t(1) << c.child), std::memory_order_relaxed);
    c.b->unref();
  }
  ~ClaimList();
};

namespace {
thread_local ClaimList t_claims;
// Set once t_claims is destroyed at thread exit. A push after that (from
// the destructor of a thread_local made before the thread's first push,
// or of a static object after exit() destroyed the main thread's
// thread_locals) must not touch t_claims: it shares a fixed child,
// unrecorded.
// Trivially destructible, so it stays readable to the thread's end.
thread_local constinit bool t_claims_gone __attribute__((tls_model("initial-exec"))) = false;
}  // namespace

ClaimList::~ClaimList() {
  for (const Claim& c : v) drop(c);
  t_claims_gone = true;
  // A later push (see t_claims_gone) must stay behind this thread's
  // earlier tasks, which may still sit in the child it just gave back
  // (FIFO per producer): it goes on pushing to that child, now as a sharer
  // (kShared: another thread may claim it; reclaim() never moves such a
  // thread). The cache, trivially destructible, is the only record left:
  // keep the entries that name a claim, and fill the ways that are free.
  // Only a tree whose way another claim holds falls back to lookup()'s
  // fixed child.
  for (auto& e : ProducerSlots::t_cache_) {
    const Claim* mine = nullptr;
    for (const Claim& c : v)
      if (c.serial == e.serial) mine = &c;
    e = mine ? ProducerSlots::Cache{mine->serial, mine->child | ProducerSlots::kShared} : ProducerSlots::Cache{};
  }
  for (const Claim& c : v) {
    auto& e = ProducerSlots::t_cache_[c.serial & (ProducerSlots::kCacheWays - 1)];
    if (e.serial == 0) e = {c.serial, c.child | ProducerSlots::kShared};
  }
}

ProducerSlots::ProducerSlots(unsigned children) noexcept
    : serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)),
      n_(children),
      all_(children >= 32 ? ~std::uint32_t(0) : (std::uint32_t(1) << children) - 1),
      b_(new Block) {}

ProducerSlots::~ProducerSlots() {
  b_->dead.store(true, std::memory_order_relaxed);
  b_->unref();
}

bool ProducerSlots::claim_free(unsigned* child) noexcept {
  std::uint32_t o = b_->owned.load(std::memory_order_relaxed);
  while (o != all_) {
    unsigned c = unsigned(std::countr_zero(all_ & ~o));
    if (b_->owned.compare_exchange_weak(o, o | (std::uint32_t(1) << c), std::memory_order_relaxed)) {
      *child = c;
      return true;
    }
  }
  return false;
}

unsigned ProducerSlots::lookup() noexcept {
  // After the thread's claims were given back (at its exit) and no cache
  // entry kept its child for this tree (~ClaimList): one child for every
  // such push, so they keep their order among themselves.
  if (t_claims_gone) [[unlikely]]
    return unsigned(serial_ % n_) | kShared;
  auto& v = t_claims.v;
  for (const ClaimList::Claim& c : v)
    if (c.serial == serial_) {
      t_cache_[serial_ & (kCacheWays - 1)] = {serial_, c.child};
      return c.child;
    }
  // First push to this tree. Drop the claims on trees destroyed since, so
  // the list stays as long as the number of live trees this thread used.
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](const ClaimList::Claim& c) {
                           if (!c.b->dead.load(std::memory_order_relaxed)) return false;
                           ClaimList::drop(c);
                           return true;
                         }),
          v.end());
  unsigned child;
  if (!claim_free(&child)) child = (next_shared_.fetch_add(1, std::memory_order_relaxed) % n_) | kShared;
  b_->refs.fetch_add(1, std::memory_order_relaxed);
  v.push_back({b_, serial_, child});
  t_cache_[serial_ & (kCacheWays - 1)] = {serial_, child};
  return child;
}

unsigned ProducerSlots::reclaim() noexcept {
  unsigned child;
  if (t_claims_gone || !claim_free(&child)) return mine();
  for (ClaimList::Claim& c : t_claims.v)
    if (c.serial == serial_) c.child = child;
  t_cache_[serial_ & (kCacheWays - 1)] = {serial_, child};
  return child;
}

}  // namespace parkway::detail::txn
