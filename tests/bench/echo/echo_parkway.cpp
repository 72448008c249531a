// echo_parkway.cpp -- TCP echo server on parkway's io_uring layer, for the
// echo benchmark (tests/bench/echo/run_echo.py, docs/benchmarks.md "Echo
// over loopback").
//
//   echo_parkway [--port P] [--workers N] [--seconds S] [--compute-us U]
//                [--sends first|ring] [--recvs queued|inline]
//
// One io::Listener on 127.0.0.1:P (0: any free port), one AcceptStream
// (multishot accept) and one detached coroutine per connection: recv into
// a 4 KiB buffer, send_all what came, until EOF or an error. Prints
// "listening on 127.0.0.1:P" once it accepts, then serves until SIGTERM or
// SIGINT, or for S seconds (0: no limit), then shuts the runtime down
// (which cancels the I/O in flight) and prints one JSON line of counters.
//
// --sends ring: every send goes through the ring (Options::io_send_first =
// false); the default tries each send at its co_await first (io.md).
// --recvs inline: a receive whose bytes are there completes as its SQE is
// submitted (Options::io_recv_poll_first = false); the default queues it
// behind the completions already waiting (io.md, "Receives wait their
// turn").
//
// --compute-us U (the "completion latency under compute" case): besides
// the echo, a detached coroutine keeps one worker busy with a stream of
// compute tasks, one at a time: it spawns a task that spins for U
// microseconds of wall time, awaits it, and spawns the next. A completion
// that arrives on that worker's ring waits for the task in progress
// (between_tasks() reaps between two tasks), so the round trip it serves
// should take at most about U more than without the stream.
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "parkway/io.hpp"
#include "parkway/parkway.hpp"

namespace io = parkway::io;
using parkway::Task;

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_conns{0}, g_accept_errors{0}, g_compute_tasks{0};

Task<void> echo_conn(io::Socket s) {
  (void)s.set_nodelay();
  auto buf = std::make_unique<std::byte[]>(4096);
  for (;;) {
    auto n = co_await s.recv({buf.get(), 4096});
    if (!n || *n == 0) co_return;  // error (a reset, the shutdown's cancel) or EOF
    auto w = co_await s.send_all({buf.get(), *n});
    if (!w) co_return;
  }
}

Task<void> serve(io::Listener l) {
  io::AcceptStream st = l.stream();
  while (!g_stop.load(std::memory_order_relaxed)) {
    auto c = co_await st.next();
    if (c) {
      g_conns.fetch_add(1, std::memory_order_relaxed);
      parkway::detach(echo_conn(std::move(*c)));
      continue;
    }
    if (c.error() == std::errc::operation_canceled) co_return;  // shutdown
    g_accept_errors.fetch_add(1, std::memory_order_relaxed);
    if (c.error() == std::errc::too_many_files_open || c.error() == std::errc::too_many_files_open_in_system)
      co_await io::sleep_for(std::chrono::milliseconds(10));
  }
}

Task<void> spin(std::chrono::nanoseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
  g_compute_tasks.fetch_add(1, std::memory_order_relaxed);
  co_return;
}

// One compute task at a time, back to back, until the stop flag.
Task<void> compute_stream(std::chrono::nanoseconds d) {
  while (!g_stop.load(std::memory_order_relaxed)) co_await parkway::spawn(spin(d));
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "echo_parkway: %s\nusage: echo_parkway [--port P] [--workers N] [--seconds S] [--compute-us U] "
               "[--sends first|ring] [--recvs queued|inline]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0, workers = 1, compute_us = 0;
  double seconds = 0;
  bool send_first = true, recv_poll_first = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--port") port = std::strtol(v, nullptr, 10);
    else if (a == "--workers") workers = std::strtol(v, nullptr, 10);
    else if (a == "--seconds") seconds = std::strtod(v, nullptr);
    else if (a == "--compute-us") compute_us = std::strtol(v, nullptr, 10);
    else if (a == "--sends" && (std::strcmp(v, "first") == 0 || std::strcmp(v, "ring") == 0))
      send_first = std::strcmp(v, "first") == 0;
    else if (a == "--sends") usage("--sends takes first or ring");
    else if (a == "--recvs" && (std::strcmp(v, "queued") == 0 || std::strcmp(v, "inline") == 0))
      recv_poll_first = std::strcmp(v, "queued") == 0;
    else if (a == "--recvs") usage("--recvs takes queued or inline");
    else usage(("unknown option " + a).c_str());
  }
  if (port < 0 || port > 65535 || workers < 1 || workers > 64 || seconds < 0 || compute_us < 0)
    usage("an option is out of range");

  // Blocked here, so in every worker thread too: only sigtimedwait below
  // takes them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto l = io::Listener::bind(io::Address::loopback(std::uint16_t(port)), io::ListenOptions{.backlog = 1024});
  if (!l) {
    std::fprintf(stderr, "echo_parkway: %s\n", l.error().message().c_str());
    return 1;
  }
  const std::string where = l->local_address().to_string();
  parkway::Runtime rt(parkway::Options{.workers = unsigned(workers), .name = "echo", .io_send_first = send_first,
                                       .io_recv_poll_first = recv_poll_first});
  parkway::detach(serve(std::move(*l)), rt);
  if (compute_us > 0) parkway::detach(compute_stream(std::chrono::microseconds(compute_us)), rt);
  std::printf("listening on %s\n", where.c_str());
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    timespec ts{1, 0};
    if (seconds > 0) {
      double left = seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (left <= 0) break;
      if (left < 1) ts = {0, long(left * 1e9)};
    }
    if (sigtimedwait(&sigs, nullptr, &ts) > 0) break;
  }
  g_stop.store(true);
  rt.shutdown();  // cancels the accept and every recv/send in flight; the coroutines end
  parkway::Stats st = rt.stats();
  std::printf("{\"server\":\"parkway\",\"workers\":%ld,\"connections\":%ld,\"accept_errors\":%ld,"
              "\"compute_us\":%ld,\"compute_tasks\":%ld,\"io_ops\":%llu,\"parks\":%llu,\"ring_parks\":%llu,"
              "\"wakeups\":%llu,\"steals\":%llu,\"sent_now\":%llu,\"slice_yields\":%llu}\n",
              workers, g_conns.load(), g_accept_errors.load(), compute_us, g_compute_tasks.load(),
              (unsigned long long)st.total.io_ops, (unsigned long long)st.total.parks, (unsigned long long)st.total.ring_parks,
              (unsigned long long)st.total.wakeups,
              (unsigned long long)st.total.steals, (unsigned long long)st.total.io_sent_now,
              (unsigned long long)st.total.slice_yields);
  return 0;
}
