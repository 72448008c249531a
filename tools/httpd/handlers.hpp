// handlers.hpp -- what parkway-httpd answers to a parsed GET or HEAD (or any
// other method): /plaintext, /fib/N and static files under the root.
//
// A handler never touches the socket: it returns a Response, the head but
// its Connection field and a small body as bytes, plus, for a file, the
// open File and the byte range still to send. The connection
// (connection.hpp) writes it, and decides then whether it is its last.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>

#include "http_parser.hpp"
#include "parkway/coro.hpp"
#include "parkway/io.hpp"

namespace httpd {

struct Response {
  int status = 200;
  // The status line and the fields, but not the Connection field and the
  // empty line: the connection writes those when it sends the answer
  // (response_head_end), once it knows whether the answer is its last.
  std::string fields;
  std::string body;           // the body when it is in memory
  parkway::io::File file;     // open: the body is file[offset, offset + length)
  std::uint64_t file_offset = 0;
  std::uint64_t file_length = 0;
  bool closes = false;        // the connection ends after it, whatever the request asked (a stopped /fib)
};

// The document root as the command line named it, looked up again at most
// once a second: a root that a deploy replaces (a symlink switched to a new
// release, a directory renamed over) is served as it is now, as nginx
// does, not as it was at startup (which served the old release, and 404
// for everything once it was deleted). A request makes its lookups under
// the root before its first co_await, with the descriptor its thread
// holds a reference on, so a root replaced meanwhile stays open for them.
class RootDir {
 public:
  RootDir(std::string path, int fd);  // fd: path opened at startup (owned from here)
  // The root's descriptor now, for lookups made before the caller's next
  // co_await: the calling thread keeps a reference on it until it asks
  // again after the root changed (no shared count touched per request).
  int fd(std::uint64_t* generation = nullptr);  // and the generation of the descriptor returned
  // Has the next fd() look the path up again, not a second later (SIGHUP).
  void look_up_now() noexcept { next_check_ns_.store(0, std::memory_order_relaxed); }

 private:
  void refresh(std::int64_t now_ns);
  std::string path_;
  std::atomic<std::shared_ptr<const int>> fd_;
  std::atomic<std::uint64_t> generation_{0};  // bumped when fd_ is replaced
  std::atomic<std::int64_t> next_check_ns_{0};
  std::atomic<bool> checking_{false};
  dev_t dev_ = 0;  // of fd_'s directory (written by the one checking)
  ino_t ino_ = 0;
};

// Opens a document root: for reading, or as a path only when it may be
// searched but not listed (mode 711). -1 with errno on failure.
int open_root(const char* path);

struct HandlerConfig {
  int root_fd = -1;  // the document root (O_DIRECTORY); -1: no static files
  // Descriptors of files served in the last second kept open per worker,
  // at most this many (open_file_cache.hpp); 0: every answer opens its file.
  unsigned file_cache = 0;
  RootDir* root_dir = nullptr;  // when set, the root's current descriptor (root_fd: startup's, not used)
  // Set both to compute /fib/N on a runtime of its own (the server's workers
  // then only wait for it): the baseline a server without work stealing
  // between its I/O and its compute would be.
  parkway::Runtime* fib_pool = nullptr;
  parkway::Runtime* server = nullptr;  // where the connection continues after it
  // Fired when the server's shutdown grace period is over: a /fib
  // computation still running stops early and its request gets a 503.
  const parkway::io::CancelSource* abort = nullptr;
};

// The answer to the request `req` has just parsed.
parkway::Task<Response> handle_request(const RequestParser& req, const HandlerConfig& cfg);

// Whether `req` (just parsed) is answered by a /fib/N computed in
// parallel (N of at least kParallelFibMin): an answer that takes long to
// make. The connection sends the answers it has batched before it first,
// so that a client that pipelines gets them meanwhile, and one that has
// gone is noticed (the send fails) before the computation rather than
// after its whole batch has been computed for nobody.
inline constexpr int kParallelFibMin = 24;
bool computes_long(const RequestParser& req);

// A complete response with a short text body (errors, 405, ...). `extra`:
// raw field lines, each ending in CRLF.
Response simple_response(int status, bool head_only = false, std::string_view extra = {});

// fib(n) computed in parallel with a parkway::TaskGroup on the calling
// worker's runtime (/fib/N: the server's, or cfg.fib_pool). Once `stop`
// (if any) has fired, every part not yet begun returns 0 at once, so the
// result is meaningless and the call ends within a few serial leaves.
std::uint64_t parallel_fib(int n, const parkway::io::CancelSource* stop = nullptr);

}  // namespace httpd
