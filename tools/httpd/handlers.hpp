// handlers.hpp -- what parkway-httpd answers to a parsed GET or HEAD (or any
// other method): /plaintext, /fib/N and static files under the root.
//
// A handler never touches the socket: it returns a Response, the head but
// its Connection field and a small body as bytes, plus, for a file, the
// open File and the byte range still to send. The connection
// (connection.hpp) writes it, and decides then whether it is its last.
#pragma once

#include <cstdint>
#include <string>

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

struct HandlerConfig {
  int root_fd = -1;  // the document root (O_DIRECTORY); -1: no static files
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
