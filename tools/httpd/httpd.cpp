// httpd.cpp -- parkway-httpd: an HTTP/1.1 server on the parkway runtime.
//
//   parkway-httpd --port N [--bind ADDR] [--root DIR] [--workers N]
//                 [--access-log] [--access-log-file PATH]
//                 [--header-timeout S] [--body-timeout S]
//                 [--idle-timeout S] [--shutdown-timeout S] [--fib-pool N]
//                 [--file-cache N]
//
// The main thread blocks SIGTERM, SIGINT and SIGQUIT (nginx's graceful
// stop), SIGHUP and SIGUSR1 (the workers inherit the mask) and a
// coroutine reads them from a signalfd through the ring. SIGHUP, the
// reload of nginx's and of a systemd unit's ExecReload, looks the root up
// again at once (the options are read at startup only); SIGUSR1, nginx's
// reopening of its logs (what logrotate sends once it has renamed them),
// reopens the --access-log-file, and has nothing to reopen without one;
// each says so on stderr and the server goes on. Shutdown:
// stop accepting and close the listening socket (connections still in its
// backlog are reset, new ones refused), close keep-alive connections
// waiting for their next request, give the others --shutdown-timeout
// seconds (5) to finish the request in hand (each then closes), cancel
// what is left, exit 0. A /fib computation still running then stops
// early (its request is answered 503).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "connection.hpp"
#include "parkway/parkway.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;

namespace {

const char kUsage[] =
    "usage: parkway-httpd --port N [--bind ADDR] [--root DIR] [--workers N]\n"
    "                     [--access-log] [--access-log-file PATH]\n"
    "                     [--header-timeout S] [--body-timeout S]\n"
    "                     [--idle-timeout S] [--shutdown-timeout S] [--fib-pool N]\n"
    "                     [--file-cache N]\n"
    "  --port N            TCP port (0: any free port, printed at startup)\n"
    "  --bind ADDR         address to listen on (default 127.0.0.1)\n"
    "  --root DIR          serve the files under DIR (none by default)\n"
    "  --workers N         worker threads (default: one per CPU)\n"
    "  --access-log        log each response on stderr (from a thread of its own:\n"
    "                      lines a stalled reader leaves no room for are dropped)\n"
    "  --access-log-file PATH  log each response to the file PATH (appended to,\n"
    "                      made if missing) instead; SIGUSR1 opens PATH again\n"
    "                      (after a log rotation renamed the file)\n"
    "  --header-timeout S  seconds a request head may take to arrive (default 10)\n"
    "  --body-timeout S    seconds a request body may take to arrive after its head\n"
    "                      (default 10)\n"
    "  --idle-timeout S    seconds a keep-alive connection may stay idle (default 30)\n"
    "  --shutdown-timeout S  on SIGTERM, SIGINT or SIGQUIT, seconds busy connections\n"
    "                      may take to finish the request in hand (default 5; a\n"
    "                      second signal ends it at once; SIGHUP looks the root\n"
    "                      up again, SIGUSR1 reopens the access log's file: both\n"
    "                      say so on stderr)\n"
    "  --file-cache N      files each worker keeps open for a second after serving\n"
    "                      them, so that their next answers skip the path's lookup\n"
    "                      (default 64, at most an eighth of the descriptor limit\n"
    "                      over the workers; 0: none). A path that names another\n"
    "                      file, or no file, is served as before for up to a second;\n"
    "                      a file written in place is served as written at once\n"
    "  --fib-pool N        compute /fib/N on a separate pool of N threads, not on the\n"
    "                      server's workers (a baseline for measurements; without it,\n"
    "                      /fib runs on the workers)\n";

[[noreturn]] void usage_error(const char* what) {
  std::fprintf(stderr, "parkway-httpd: %s\n%s", what, kUsage);
  std::exit(2);
}

long number_arg(const char* s, long lo, long hi, const char* name) {
  long v = 0;
  std::string_view t(s);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || v < lo || v > hi) usage_error(name);
  return v;
}

// True for an accept error that only says this one connection went away
// before it was taken: accept again at once.
bool transient_accept_error(const io::Error& e) {
  return e == std::errc::connection_aborted || e == std::errc::interrupted ||
         e == std::errc::resource_unavailable_try_again || e == std::errc::protocol_error ||
         e == std::errc::operation_canceled;
}

// Accepts until `stop` fires; each connection gets a detached coroutine.
// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), accept
// fails at once until a connection closes: wait 10 ms before the next try,
// the pending connections wait in the listen backlog meanwhile. Any other
// error is reported (once) and retried after the same pause, never in a
// busy loop.
// What run_server and its accept loop share. The loop holds it too: the
// server stops waiting for the loop after the grace period and a second,
// so its frame may end first.
struct Accepting {
  io::CancelSource stop;
  std::atomic<bool> done{false};
};

Task<void> accept_loop(io::Listener& l, httpd::ServerState& st, std::shared_ptr<Accepting> a) {
  io::CancelSource& stop = a->stop;
  bool reported = false;
  while (!stop.cancelled()) {
    auto c = co_await l.accept({.cancel = &stop});
    if (c) {
      st.connections.fetch_add(1, std::memory_order_relaxed);
      parkway::detach(httpd::serve_connection(std::move(*c), st));
      continue;
    }
    const io::Error& e = c.error();
    if (transient_accept_error(e)) continue;
    const bool out_of_resources = e == std::errc::too_many_files_open ||
                                  e == std::errc::too_many_files_open_in_system ||
                                  e == std::errc::no_buffer_space || e == std::errc::not_enough_memory;
    if (!out_of_resources && !reported) {
      std::fprintf(stderr, "parkway-httpd: %s (retrying)\n", e.message().c_str());
      reported = true;
    }
    (void)co_await io::sleep_for(10ms, &stop);
  }
  a->done.store(true, std::memory_order_release);
}

// An operation on a worker's ring, which that worker makes first.
Task<io::Result<void>> first_ring() { co_return co_await io::sleep_for(std::chrono::nanoseconds(1)); }

// `line` on stderr through the ring, from a task of its own: a stderr pipe
// nobody reads (a stalled log collector) holds that write, not a worker
// or the wait for the next signal.
Task<void> note(std::string line) { (void)co_await io::write(2, std::as_bytes(std::span(line)), -1); }

// The next SIGTERM, SIGINT or SIGQUIT on `sigfd`: true when one came, false when
// the read failed (cancelled at the runtime's end). A SIGHUP or SIGUSR1
// before it is answered (the file's comment) and the wait goes on.
Task<bool> next_signal(int sigfd, httpd::ServerState& st) {
  httpd::RootDir* root = st.config.handler.root_dir;
  signalfd_siginfo si{};
  for (;;) {
    auto n = co_await io::read(sigfd, {reinterpret_cast<std::byte*>(&si), sizeof si}, -1);
    if (!n && n.error() != std::errc::interrupted) co_return false;
    if (!n || *n != sizeof si) continue;
    if (si.ssi_signo == SIGHUP) {
      if (root) root->look_up_now();
      parkway::detach(note(std::string("parkway-httpd: SIGHUP: ") +
                           (root ? "the root is looked up again" : "no root to look up again") +
                           "; options are read at startup only\n"));
    } else if (si.ssi_signo == SIGUSR1) {
      if (st.log.to_file())
        st.log.reopen();  // the log's thread opens it and says so
      else
        parkway::detach(note(std::string("parkway-httpd: SIGUSR1: no log file to reopen (") +
                             (st.config.access_log ? "the access log is stderr" : "no access log") + ")\n"));
    } else {
      co_return true;
    }
  }
}

// Runs the server until SIGTERM, SIGINT or SIGQUIT arrives on `sigfd`, then shuts
// down: no new connections, idle ones closed, busy ones given the grace
// period (--shutdown-timeout), which a second signal ends at once.
Task<void> run_server(io::Listener& l, httpd::ServerState& st, int sigfd) {
  auto accepting = std::make_shared<Accepting>();
  io::CancelSource& stop = accepting->stop;
  std::atomic<bool>& accept_done = accepting->done;
  parkway::detach(accept_loop(l, st, accepting));

  co_await next_signal(sigfd, st);

  stop.cancel();     // no new connections
  st.idle.cancel();  // connections between requests close now
  // A second signal ends the grace period at once.
  parkway::detach([](int fd, httpd::ServerState* s) -> Task<void> {
    if (co_await next_signal(fd, *s)) s->abort.cancel();
  }(sigfd, &st));
  const auto deadline = std::chrono::steady_clock::now() + st.config.shutdown_timeout;
  auto in_grace = [&] { return std::chrono::steady_clock::now() < deadline && !st.abort.cancelled(); };
  // Close the listening socket once the accept loop has left it (its
  // accept cancelled): a client that connects now is refused at once
  // rather than queued in a backlog nobody takes from.
  while (!accept_done.load(std::memory_order_acquire) && in_grace()) (void)co_await io::sleep_for(1ms);
  if (accept_done.load(std::memory_order_acquire)) l.close();  // else main closes it at the end
  while ((st.connections.load(std::memory_order_acquire) > 0 || !accept_done.load(std::memory_order_acquire)) &&
         in_grace())
    (void)co_await io::sleep_for(10ms);
  st.abort.cancel();  // the grace period is over
  const auto hard = std::chrono::steady_clock::now() + 1s;
  while ((st.connections.load(std::memory_order_acquire) > 0 || !accept_done.load(std::memory_order_acquire)) &&
         std::chrono::steady_clock::now() < hard)
    (void)co_await io::sleep_for(10ms);
}

}  // namespace

int main(int argc, char** argv) {
  long port = -1, workers = long(parkway::online_cpus()), fib_pool = 0, file_cache = 64;
  const char* bind_addr = "127.0.0.1";
  const char* root = nullptr;
  const char* log_file = nullptr;
  auto st = std::make_unique<httpd::ServerState>();
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error((std::string(a) + ": missing its value").c_str());
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--port") port = number_arg(value(), 0, 65535, "--port: expected 0..65535");
    else if (a == "--bind") bind_addr = value();
    else if (a == "--root") root = value();
    else if (a == "--workers") workers = number_arg(value(), 1, parkway::kMaxWorkers, "--workers: expected 1..4096");
    else if (a == "--access-log") st->config.access_log = true;
    else if (a == "--access-log-file") {
      log_file = value();
      if (!*log_file) usage_error("--access-log-file: expected a path");
      st->config.access_log = true;
    }
    else if (a == "--header-timeout")
      st->config.header_timeout = std::chrono::seconds(number_arg(value(), 1, 86400, "--header-timeout: expected 1..86400"));
    else if (a == "--body-timeout")
      st->config.body_timeout = std::chrono::seconds(number_arg(value(), 1, 86400, "--body-timeout: expected 1..86400"));
    else if (a == "--idle-timeout")
      st->config.idle_timeout = std::chrono::seconds(number_arg(value(), 1, 86400, "--idle-timeout: expected 1..86400"));
    else if (a == "--shutdown-timeout")
      st->config.shutdown_timeout =
          std::chrono::seconds(number_arg(value(), 1, 86400, "--shutdown-timeout: expected 1..86400"));
    else if (a == "--file-cache") file_cache = number_arg(value(), 0, 1 << 20, "--file-cache: expected 0..1048576");
    else if (a == "--fib-pool") fib_pool = number_arg(value(), 1, parkway::kMaxWorkers, "--fib-pool: expected 1..4096");
    else usage_error((std::string("unknown option ") + argv[i]).c_str());
  }
  if (port < 0) usage_error("--port is required");

  // Declared before the runtime, so it outlives every connection.
  std::unique_ptr<httpd::RootDir> root_dir;
  if (root) {
    // A root one may search but not list (mode 711) serves its files, as
    // such a directory under the root does: opened as a path only (files
    // are opened beneath it, never it). One that may not be searched
    // either is refused here, at startup, not with a 403 for every request.
    const int fd = httpd::open_root(root);
    st->config.handler.root_fd = fd;
    if (st->config.handler.root_fd < 0) {
      std::fprintf(stderr, "parkway-httpd: --root %s: %s\n", root, std::strerror(errno));
      return 1;
    }
    // Looked up again once a second (a deploy that switches a symlink).
    root_dir = std::make_unique<httpd::RootDir>(root, fd);
    st->config.handler.root_dir = root_dir.get();
  }
  // The open-file cache holds at most an eighth of the descriptors, so
  // that connections keep the rest (open_file_cache.hpp).
  if (rlimit lim; file_cache > 0 && ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    file_cache = std::min<long>(file_cache, long(lim.rlim_cur / 8 / rlim_t(workers)));
  st->config.handler.file_cache = unsigned(file_cache);
  auto addr = io::Address::parse(bind_addr, std::uint16_t(port));
  if (!addr) usage_error("--bind: not an IP address");

  // A client or log reader that is gone is an error value, not the end of
  // the process (sockets send with MSG_NOSIGNAL; the access log's writes
  // to a closed pipe would raise SIGPIPE).
  ::signal(SIGPIPE, SIG_IGN);
  // Blocked before the workers start, so every thread inherits the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGQUIT);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  // A blocking signalfd: its read goes through the ring, which waits for
  // a signal by polling (a non-blocking one could fail with EAGAIN there).
  int sigfd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (sigfd < 0) {
    std::perror("parkway-httpd: signalfd");
    return 1;
  }

  // After the mask: the log's thread must not take the signals either.
  if (st->config.access_log) {
    if (const int e = st->log.start(log_file); e != 0) {
      std::fprintf(stderr, "parkway-httpd: --access-log-file %s: %s\n", log_file, std::strerror(e));
      return 1;
    }
  }

  auto listener = io::Listener::bind(*addr);
  if (!listener) {
    std::fprintf(stderr, "parkway-httpd: listen on %s: %s\n", addr->to_string().c_str(),
                 listener.error().message().c_str());
    return 1;
  }
  try {
    // Declared first, so it outlives every connection of the server's runtime.
    std::optional<parkway::Runtime> pool;
    if (fib_pool > 0) pool.emplace(parkway::Options{.workers = unsigned(fib_pool), .name = "fibpool"});
    parkway::Runtime rt(parkway::Options{.workers = unsigned(workers), .name = "httpd"});
    st->config.handler.abort = &st->abort;
    if (pool) {
      st->config.handler.fib_pool = &*pool;
      st->config.handler.server = &rt;
    }
    // A kernel or container may refuse io_uring (kernel.io_uring_disabled,
    // a seccomp profile): said here, before the startup line, rather than
    // by every operation of the server's.
    if (auto ring = parkway::sync_wait(rt, first_ring()); !ring) {
      std::fprintf(stderr,
                   "parkway-httpd: io_uring: %s (kernel.io_uring_disabled or a seccomp filter may refuse it)\n",
                   ring.error().message().c_str());
      return 1;
    }
    std::printf("parkway-httpd: listening on %s (%ld workers%s)\n", listener->local_address().to_string().c_str(),
                workers, pool ? ", /fib on a separate pool" : "");
    std::fflush(stdout);
    parkway::sync_wait(rt, run_server(*listener, *st, sigfd));
    listener->close();
  } catch (const std::exception& e) {  // a runtime that could not start its threads
    std::fprintf(stderr, "parkway-httpd: %s\n", e.what());
    return 1;
  }
  st->log.stop();  // the runtime, and every connection with it, has ended
  ::close(sigfd);
  // The root's descriptors are root_dir's, closed with it.
  return 0;
}
