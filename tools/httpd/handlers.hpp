// handlers.hpp -- what parkway-httpd answers to a parsed GET or HEAD (or any
// other method): /plaintext, /fib/N and static files under the root.
//
// A handler never touches the socket: it returns a Response, the head (and a
// small body) as bytes plus, for a file, the open File and the byte range
// still to send. The connection (connection.hpp) writes it.
#pragma once

#include <cstdint>
#include <string>

#include "http_parser.hpp"
#include "parkway/coro.hpp"
#include "parkway/io.hpp"

namespace httpd {

struct Response {
  int status = 200;
  std::string bytes;          // the head, then the body when it is in memory
  parkway::io::File file;     // open: the body is file[offset, offset + length)
  std::uint64_t file_offset = 0;
  std::uint64_t file_length = 0;
  bool closes = false;        // its head says "Connection: close": the connection's last answer
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

// The answer to the request `req` has just parsed. `keep_alive` is what the
// response head announces.
parkway::Task<Response> handle_request(const RequestParser& req, bool keep_alive, const HandlerConfig& cfg);

// Makes r the connection's last answer (r.closes, and its head says
// "Connection: close" instead of keep-alive): for a keep-alive answer made
// before the shutdown began and sent after.
void close_after(Response& r);

// A complete response with a short text body (errors, 405, ...). `extra`:
// raw field lines, each ending in CRLF.
Response simple_response(int status, bool keep_alive, bool head_only = false, std::string_view extra = {});

// fib(n) computed in parallel with a parkway::TaskGroup on the calling
// worker's runtime (/fib/N: the server's, or cfg.fib_pool). Once `stop`
// (if any) has fired, every part not yet begun returns 0 at once, so the
// result is meaningless and the call ends within a few serial leaves.
std::uint64_t parallel_fib(int n, const parkway::io::CancelSource* stop = nullptr);

}  // namespace httpd
