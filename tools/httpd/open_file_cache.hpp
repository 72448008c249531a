// open_file_cache.hpp -- each worker thread's descriptors of the files it
// served in the last second, so that a file answer does not look its path
// up again (openat2 with RESOLVE_BENEATH and a close: 2.2 us of the 3.0
// us that opening, stat'ing, reading and closing a cached 4 KiB file
// takes, where a stat and a read of an open one take 0.8 us).
//
// What a client sees, the invariant: an answer from a cached descriptor
// is the answer an open of the path would have given at most a second
// ago (kMaxAgeNs), and its bytes and length are the file's as they are
// now. Why it holds: an entry is made from an open that file_response
// has just done, beneath the root and with its checks; a lookup drops an
// entry older than a second, or made under another root or generation of
// it (RootDir), and opens the path again; every answer fstat's the
// descriptor and reads the file through it, so a file written in place
// is served as written. So a path that now names another file (a rename
// over it, a deploy's switch), a file deleted or a permission taken away
// is served as before for at most a second, as the root itself is (and
// as nginx's open_file_cache does for its `open_file_cache_valid`).
// Checked by tests/check-httpd.sh ("open-file cache").
//
// Descriptors held: at most `capacity` a worker (HandlerConfig::
// file_cache), which main bounds by an eighth of RLIMIT_NOFILE over the
// workers; an open that fails for want of descriptors (EMFILE, ENFILE)
// closes every worker's cached ones (each at its next lookup) and this
// worker's at once, and is tried again.
//
// Only the calling thread touches its cache; file_response uses it before
// its first co_await, so the whole use is on one worker.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace httpd {

// Which root, as it is now, a cached path is under.
struct RootKey {
  const void* dir = nullptr;    // the RootDir, or null for a fixed root_fd
  int fd = -1;                  // the root's descriptor
  std::uint64_t generation = 0; // RootDir's generation of that descriptor
  bool operator==(const RootKey&) const = default;
};

class OpenFileCache {
 public:
  static constexpr std::int64_t kMaxAgeNs = 1'000'000'000;

  struct Entry {
    int fd = -1;           // a regular file, without O_NONBLOCK; owned by the cache
    std::string resolved;  // the path it was opened by (a directory's index.html included)
    std::int64_t opened_ns = 0;
  };

  // The calling thread's entry for `target` (the request's path, its
  // trailing slash included) under `root`, or null; drops the thread's
  // entries that have aged out, or all of them when `root` changed or
  // descriptors ran out somewhere.
  static const Entry* find(const RootKey& root, std::string_view target, std::int64_t now_ns);
  // Takes `fd` (a regular file just opened beneath the root by
  // `resolved`) into the calling thread's cache under `target`, making
  // room (its oldest entry) at `capacity` entries; null, with `fd` still
  // the caller's, when it cannot (no memory). The entry is valid until
  // the thread's next find or put.
  static const Entry* put(const RootKey& root, std::string_view target, int fd, std::string resolved,
                          std::int64_t now_ns, unsigned capacity);
  // An open failed for want of descriptors: every thread's cached ones
  // are closed, this thread's now.
  static void out_of_descriptors();
  // Entries the calling thread holds (for tests).
  static std::size_t size();
};

}  // namespace httpd
