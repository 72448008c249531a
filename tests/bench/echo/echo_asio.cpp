// echo_asio.cpp -- the echo server on standalone Asio (Debian libasio-dev
// 1.22), a peer in the echo benchmark (run_echo.py).
//
//   echo_asio [--port P] [--workers N] [--seconds S]
//
// One io_context run by N threads; an acceptor coroutine co_spawns one
// coroutine per connection (C++20 coroutines: asio::awaitable,
// co_spawn, use_awaitable): async_read_some into a 4 KiB buffer, then
// async_write of what came, until EOF or an error. Built twice (echo.mk):
//   echo_asio_epoll  the default reactor (epoll);
//   echo_asio_uring  -DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL, -luring:
//                    io_uring is then Asio's default backend for sockets
//                    and the scheduler waits in io_uring_wait_cqe.
// Prints "listening on 127.0.0.1:P" once it accepts (and which backend it
// was built with, on stderr), serves until SIGTERM/SIGINT or S seconds
// (0: no limit), then stops the io_context and prints one JSON line.
#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using asio::ip::tcp;

namespace {

#if defined(ASIO_HAS_IO_URING_AS_DEFAULT)
constexpr const char* kBackend = "io_uring";
#else
constexpr const char* kBackend = "epoll";
#endif

std::atomic<long> g_conns{0}, g_accept_errors{0};

asio::awaitable<void> serve_conn(tcp::socket s) {
  asio::error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  char buf[4096];
  for (;;) {
    std::size_t n = co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // EOF, a reset, or the io_context stopping
    co_await asio::async_write(s, asio::buffer(buf, n), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

asio::awaitable<void> listen(tcp::acceptor& acc) {
  asio::error_code ec;
  for (;;) {
    tcp::socket s = co_await acc.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) {
      g_accept_errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    g_conns.fetch_add(1, std::memory_order_relaxed);
    asio::co_spawn(acc.get_executor(), serve_conn(std::move(s)), asio::detached);
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "echo_asio: %s\nusage: echo_asio [--port P] [--workers N] [--seconds S]\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long port = 0, workers = 1;
  double seconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--port") port = std::strtol(v, nullptr, 10);
    else if (a == "--workers") workers = std::strtol(v, nullptr, 10);
    else if (a == "--seconds") seconds = std::strtod(v, nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (port < 0 || port > 65535 || workers < 1 || workers > 64 || seconds < 0) usage("an option is out of range");

  // Concurrency hint = threads: with 1 the scheduler may skip its locking.
  asio::io_context ctx{int(workers)};
  tcp::acceptor acc(ctx);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), std::uint16_t(port));
  try {
    acc.open(ep.protocol());
    acc.set_option(tcp::acceptor::reuse_address(true));
    acc.bind(ep);
    acc.listen(1024);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo_asio: %s\n", e.what());
    return 1;
  }
  asio::co_spawn(ctx, listen(acc), asio::detached);

  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](const asio::error_code&, int) { ctx.stop(); });
  asio::steady_timer limit(ctx);
  if (seconds > 0) {
    limit.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds)));
    limit.async_wait([&](const asio::error_code& ec) {
      if (!ec) ctx.stop();
    });
  }

  std::fprintf(stderr, "echo_asio: backend %s, %ld threads\n", kBackend, workers);
  std::printf("listening on 127.0.0.1:%u\n", unsigned(acc.local_endpoint().port()));
  std::fflush(stdout);

  std::vector<std::thread> threads;
  for (long i = 1; i < workers; ++i) threads.emplace_back([&] { ctx.run(); });
  ctx.run();
  for (auto& t : threads) t.join();
  std::printf("{\"server\":\"asio\",\"backend\":\"%s\",\"workers\":%ld,\"connections\":%ld,\"accept_errors\":%ld}\n",
              kBackend, workers, g_conns.load(), g_accept_errors.load());
  // Connection coroutines still suspended are destroyed with the io_context.
  return 0;
}
