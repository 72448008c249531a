// open_file_cache.cpp -- the open-file cache's per-thread tables
// (open_file_cache.hpp has what it guarantees).
#include "open_file_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <functional>
#include <new>
#include <unordered_map>

namespace httpd {
namespace {

struct TransparentHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Bumped by out_of_descriptors: a thread that has seen an older value
// closes its entries at its next lookup.
std::atomic<std::uint64_t> g_drop_epoch{0};

struct ThreadTable {
  RootKey root;
  std::uint64_t drop_epoch = 0;
  std::int64_t swept_ns = 0;  // when aged entries were last closed
  std::unordered_map<std::string, OpenFileCache::Entry, TransparentHash, std::equal_to<>> entries;

  void clear() noexcept {
    for (auto& [_, e] : entries) ::close(e.fd);
    entries.clear();
  }
  void sweep(std::int64_t now) noexcept {
    swept_ns = now;
    for (auto it = entries.begin(); it != entries.end();) {
      if (now - it->second.opened_ns >= OpenFileCache::kMaxAgeNs) {
        ::close(it->second.fd);
        it = entries.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Drops what may no longer be served: everything under another root or
  // after an out_of_descriptors, and (once a second) what aged out.
  void refresh(const RootKey& r, std::int64_t now) noexcept {
    const std::uint64_t epoch = g_drop_epoch.load(std::memory_order_relaxed);
    if (!(root == r) || drop_epoch != epoch) {
      clear();
      root = r;
      drop_epoch = epoch;
    }
    if (now - swept_ns >= OpenFileCache::kMaxAgeNs) sweep(now);
  }
  ~ThreadTable() { clear(); }
};

thread_local ThreadTable t_table;

}  // namespace

const OpenFileCache::Entry* OpenFileCache::find(const RootKey& root, std::string_view target, std::int64_t now_ns) {
  ThreadTable& t = t_table;
  t.refresh(root, now_ns);
  auto it = t.entries.find(target);
  if (it == t.entries.end()) return nullptr;
  if (now_ns - it->second.opened_ns >= kMaxAgeNs) {
    ::close(it->second.fd);
    t.entries.erase(it);
    return nullptr;
  }
  return &it->second;
}

const OpenFileCache::Entry* OpenFileCache::put(const RootKey& root, std::string_view target, int fd,
                                               std::string resolved, std::int64_t now_ns, unsigned capacity) {
  ThreadTable& t = t_table;
  t.refresh(root, now_ns);
  if (auto it = t.entries.find(target); it != t.entries.end()) {  // an aged one find left (none): replaced
    ::close(it->second.fd);
    t.entries.erase(it);
  }
  if (t.entries.size() >= capacity && !t.entries.empty()) {
    auto oldest = t.entries.begin();
    for (auto it = t.entries.begin(); it != t.entries.end(); ++it)
      if (it->second.opened_ns < oldest->second.opened_ns) oldest = it;
    ::close(oldest->second.fd);
    t.entries.erase(oldest);
  }
  try {
    auto [it, _] = t.entries.emplace(std::string(target), Entry{fd, std::move(resolved), now_ns});
    return &it->second;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void OpenFileCache::out_of_descriptors() {
  g_drop_epoch.fetch_add(1, std::memory_order_relaxed);
  t_table.clear();
}

std::size_t OpenFileCache::size() { return t_table.entries.size(); }

}  // namespace httpd
