// connection.hpp -- one HTTP/1.1 connection of parkway-httpd, as a coroutine,
// and the state the server's connections share (limits, timeouts, and the
// two cancel sources a graceful shutdown fires).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "handlers.hpp"
#include "http_parser.hpp"
#include "parkway/coro.hpp"
#include "parkway/io.hpp"

namespace httpd {

struct ServerConfig {
  HandlerConfig handler;
  Limits limits;
  std::chrono::seconds header_timeout{10};  // the whole head must arrive within it
  std::chrono::seconds body_timeout{10};    // and then the whole body within this
  std::chrono::seconds idle_timeout{30};    // keep-alive wait for the next request
  std::chrono::seconds shutdown_timeout{5};  // SIGTERM: busy connections may finish within it
  bool access_log = false;                  // one line per response (AccessLog)
};

// The access log's lines go to stderr, or to a file, from a thread of its
// own, through a bounded buffer: a log reader that stops reading costs the
// lines that do not fit (counted, and reported at the end), never a worker
// blocked in write(2) (which stopped every worker, and with them SIGTERM's
// handling).
// A stderr made non-blocking is waited on, like a blocking one; lines whose
// write fails (a closed pipe, a full disk) are counted and reported too.
class AccessLog {
 public:
  // The writer thread; before the first line. The lines go to the file
  // `path` names (appended to, made if missing), or to stderr without
  // one. 0, or the errno of the file's open.
  int start(const char* path = nullptr);
  void write(std::string_view line) noexcept;
  // SIGUSR1 (log rotation: the file was renamed): the lines from here on
  // go to a file the path names now. A path that cannot be opened says so
  // on stderr, and the lines go on to the file before. Only with a file.
  void reopen() noexcept;
  bool to_file() const noexcept;
  void stop() noexcept;          // writes what is left, waiting at most 1 s for the reader
  ~AccessLog() { stop(); }

 private:
  struct Shared;
  std::shared_ptr<Shared> s_;    // shared with the writer thread, which may outlive this
};

struct ServerState {
  ServerConfig config;
  AccessLog log;                 // started when config.access_log
  // Fired first at shutdown: keep-alive connections waiting for their
  // next request close.
  parkway::io::CancelSource idle;
  // Fired when the shutdown grace period is over: everything else ends.
  parkway::io::CancelSource abort;
  std::atomic<int> connections{0};  // serve_connection coroutines running
};

// Serves requests on `s` until the client closes, an error, a timeout or
// the shutdown. Counts itself in state.connections (the caller increments
// it before starting this coroutine; the coroutine decrements it at the end).
parkway::Task<void> serve_connection(parkway::io::Socket s, ServerState& state);

}  // namespace httpd
