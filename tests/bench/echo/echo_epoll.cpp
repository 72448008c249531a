// echo_epoll.cpp -- a hand-written epoll echo server, the floor of the echo
// benchmark (run_echo.py): what a server costs with no runtime at all.
//
//   echo_epoll [--port P] [--workers N] [--seconds S]
//
// N threads, each with its own SO_REUSEPORT listener on 127.0.0.1:P and
// its own epoll instance; the kernel spreads new connections over the
// listeners (by a hash of the 4-tuple), and a connection stays on the
// thread that accepted it, so the threads share nothing.
//
// Level-triggered, on purpose. An echo of small messages gets one message
// per readiness event, and one recv of up to 4 KiB takes all of it; level
// triggering lets us stop there and return to epoll_wait, which reports
// the socket again if bytes are left. Edge triggering would oblige us to
// read until EAGAIN, one more recv system call per message that finds
// nothing. So per message: epoll_wait (shared by every socket ready at
// once), one recv, one send. A send that does not take everything (a full
// socket buffer: not with 64-byte messages) keeps the rest, stops reading
// and waits for EPOLLOUT, so the stream stays in order.
//
// Prints "listening on 127.0.0.1:P" once every listener is bound, serves
// until SIGTERM/SIGINT or S seconds (0: no limit), prints one JSON line.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

std::atomic<long> g_conns{0}, g_accept_errors{0};

struct Conn {
  int fd;
  std::vector<char> pending;  // bytes received but not yet sent back
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "echo_epoll: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

int make_listener(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) die("SO_REUSEPORT");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind");
  if (listen(fd, 1024) != 0) die("listen");
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) die("getsockname");
  return ntohs(a.sin_port);
}

// One worker: its listener, its epoll, its connections. stop_fd (an
// eventfd) becomes readable when the server stops.
void worker(int listen_fd, int stop_fd) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the listener
  epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
  Conn stop_marker{stop_fd, {}};
  ev.data.ptr = &stop_marker;
  epoll_ctl(ep, EPOLL_CTL_ADD, stop_fd, &ev);
  std::unordered_map<int, Conn*> conns;
  char buf[4096];
  epoll_event events[256];
  auto close_conn = [&](Conn* c) {
    ::close(c->fd);  // also leaves the epoll set
    conns.erase(c->fd);
    delete c;
  };
  for (;;) {
    int n = epoll_wait(ep, events, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Conn*>(events[i].data.ptr);
      if (c == &stop_marker) {
        for (auto& [fd, cc] : conns) {
          ::close(fd);
          delete cc;
        }
        ::close(ep);
        return;
      }
      if (!c) {  // the listener: take every waiting connection
        for (;;) {
          int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) g_accept_errors.fetch_add(1, std::memory_order_relaxed);
            break;
          }
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto* nc = new Conn{fd, {}};
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLRDHUP;
          cev.data.ptr = nc;
          if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) != 0) {
            ::close(fd);
            delete nc;
            continue;
          }
          conns.emplace(fd, nc);
          g_conns.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      if (!c->pending.empty()) {  // EPOLLOUT (or an error) while a send was short
        ssize_t w = send(c->fd, c->pending.data(), c->pending.size(), MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN) {
          close_conn(c);
          continue;
        }
        if (w > 0) c->pending.erase(c->pending.begin(), c->pending.begin() + w);
        if (c->pending.empty()) {
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLRDHUP;
          cev.data.ptr = c;
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &cev);
        }
        continue;
      }
      ssize_t r = recv(c->fd, buf, sizeof buf, 0);
      if (r == 0 || (r < 0 && errno != EAGAIN)) {
        close_conn(c);  // EOF or error
        continue;
      }
      if (r < 0) continue;
      ssize_t w = send(c->fd, buf, std::size_t(r), MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN) {
        close_conn(c);
        continue;
      }
      if (w < r) {  // short: keep the rest, wait for room, read nothing meanwhile
        c->pending.assign(buf + (w > 0 ? w : 0), buf + r);
        epoll_event cev{};
        cev.events = EPOLLOUT;
        cev.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &cev);
      }
    }
  }
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "echo_epoll: %s\nusage: echo_epoll [--port P] [--workers N] [--seconds S]\n", why);
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

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // inherited by the workers

  // The first listener picks the port (when P is 0); the others join it.
  std::vector<int> listeners{make_listener(std::uint16_t(port))};
  const std::uint16_t p = local_port(listeners[0]);
  for (long i = 1; i < workers; ++i) listeners.push_back(make_listener(p));
  int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) die("eventfd");
  std::vector<std::thread> threads;
  for (int fd : listeners) threads.emplace_back(worker, fd, stop_fd);
  std::printf("listening on 127.0.0.1:%u\n", unsigned(p));
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
  std::uint64_t one = 1;
  if (write(stop_fd, &one, sizeof one) != sizeof one) die("write eventfd");
  for (auto& t : threads) t.join();
  for (int fd : listeners) ::close(fd);
  std::printf("{\"server\":\"epoll\",\"workers\":%ld,\"connections\":%ld,\"accept_errors\":%ld}\n", workers,
              g_conns.load(), g_accept_errors.load());
  return 0;
}
