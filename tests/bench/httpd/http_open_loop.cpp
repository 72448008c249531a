// http_open_loop.cpp -- the open-loop HTTP client of the httpd benchmark's
// "compute beside I/O" section (run_httpd_bench.py).
//
//   http_open_loop --port P [--path /plaintext] [--rate R] [--seconds D]
//                  [--conns C] [--drain S] [--slice-us U]
//
// Opens C keep-alive connections to 127.0.0.1:P (default 64) and sends
// `GET PATH HTTP/1.1` at R requests per second (default 1000) for D seconds
// (default 4): request i is due at t0 + i/R. A connection carries one
// request at a time, and the connections take turns: a request goes on
// the one that has been idle longest, so all C carry traffic (a server
// sees C live connections, not one reused). A request whose due time finds every connection busy
// waits, in order, for the first one to free (counted in
// waited_for_connection). Its latency runs from its due time to the last
// byte of its response, so the client's own lateness and the wait for a
// connection are charged too (coordinated omission cannot hide a stalled
// server). send_lag_* says how late the send system calls started;
// from_send_* is the latency counted from the send instead. Due times
// come from the start time, so lateness does not add up; the thread sleeps
// in epoll_pwait2 until the next one (1 ns timer slack), so the schedule
// is kept to within the OS's wake-up latency.
// It asks for a U us kernel slice (default 100; 0 keeps the kernel's
// default) so that its wake-ups are not held behind a busy server's
// threads (../client_slice.hpp says why).
//
// Responses are framed by their head and Content-Length. It stops S
// seconds (default 2) after the end of the schedule (D), answers owed or
// not; the process ends itself 30 s after D + S in any case. A connection
// the server closes is not used again: closed while idle it is counted in
// closed_idle, while a request was on it in errors and lost. scheduled =
// completed + unanswered + lost. Output: one JSON line (latencies in ms,
// nearest-rank order statistics of every scheduled request, an unanswered
// or lost one ranking above every answered one: a statistic whose rank
// falls on one is null, so a server that stops answering cannot look
// faster than one that answers). Exit status 1 if it could not connect, 3
// if a request was lost or a response malformed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "../client_slice.hpp"
#include "../common.hpp"

namespace {

using bench::now_ns;  // CLOCK_MONOTONIC in ns (../common.hpp)

struct Config {
  int port = 0;
  std::string path = "/plaintext";
  double rate = 1000;
  double seconds = 4;
  int conns = 64;
  double drain = 2;
  unsigned slice_us = 100;
};

struct Conn {
  int fd = -1;
  bool busy = false;
  bool dead = false;  // closed (by the server, or after an error): never used again
  std::int64_t due = 0, sent = 0;  // of the request in flight
  std::string in;                  // bytes of the response so far
};

// Length of the first complete response in `b`, 0 if it is not all there
// yet, -1 if its head is malformed (no status line, a bad Content-Length).
long response_length(std::string_view b) {
  const auto end = b.find("\r\n\r\n");
  if (end == std::string_view::npos) return b.size() > 65536 ? -1 : 0;
  const std::string_view head = b.substr(0, end);
  if (head.substr(0, 9) != "HTTP/1.1 " && head.substr(0, 9) != "HTTP/1.0 ") return -1;
  long length = 0;
  std::size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    const std::size_t next = head.find("\r\n", pos + 2);
    std::string_view line = head.substr(pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && colon == 14 && strncasecmp(line.data(), "content-length", 14) == 0) {
      std::string v(line.substr(colon + 1));
      char* e = nullptr;
      length = std::strtol(v.c_str(), &e, 10);
      if (e == v.c_str() || length < 0) return -1;
    }
    pos = next;
  }
  const long total = long(end) + 4 + length;
  return long(b.size()) >= total ? total : 0;
}

// The nearest-rank order statistic of `sorted` plus `missing` values
// larger than all of them (requests never answered), in ms, as JSON
// ("null" when there is none or its rank falls on a missing one).
std::string pct_ms(const std::vector<std::int64_t>& sorted, double p, long missing = 0) {
  const long n = long(sorted.size()) + missing;
  if (n == 0) return "null";
  long k = long(std::ceil(p / 100.0 * double(n) - 1e-9)) - 1;  // 99.9% of 4000: 3996, not 3997
  k = std::clamp(k, 0L, n - 1);
  if (k >= long(sorted.size())) return "null";
  char out[32];
  std::snprintf(out, sizeof out, "%.4f", double(sorted[std::size_t(k)]) / 1e6);
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: http_open_loop --port P [--path /plaintext] [--rate R] [--seconds D] [--conns C] "
               "[--drain S] [--slice-us U]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (a == "--port") cfg.port = std::atoi(v);
    else if (a == "--path") cfg.path = v;
    else if (a == "--rate") cfg.rate = std::strtod(v, nullptr);
    else if (a == "--seconds" || a == "--duration") cfg.seconds = std::strtod(v, nullptr);
    else if (a == "--conns") cfg.conns = std::atoi(v);
    else if (a == "--drain") cfg.drain = std::strtod(v, nullptr);
    else if (a == "--slice-us") cfg.slice_us = unsigned(std::strtoul(v, nullptr, 10));
    else return usage();
  }
  if (cfg.port <= 0 || cfg.port > 65535 || cfg.rate <= 0 || cfg.rate > 1e6 || cfg.seconds <= 0 ||
      cfg.seconds > 600 || cfg.conns < 1 || cfg.conns > 10000 || cfg.drain < 0 || cfg.drain > 60 ||
      cfg.path.empty() || cfg.path[0] != '/' || (cfg.slice_us != 0 && (cfg.slice_us < 100 || cfg.slice_us > 100000))) {
    std::fprintf(stderr, "http_open_loop: bad arguments (port 1-65535, rate (0, 1e6], seconds (0, 600], "
                         "conns 1-10000, drain [0, 60], path starting with /, slice-us 0 or 100-100000)\n");
    return 2;
  }
  alarm(unsigned(cfg.seconds + cfg.drain) + 30);
  prctl(PR_SET_TIMERSLACK, 1UL);
  const bool sliced = cfg.slice_us != 0 && bench::request_client_slice(cfg.slice_us);
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rlim_t(cfg.conns) + 64) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, rlim_t(cfg.conns) + 64);
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(std::uint16_t(cfg.port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(std::size_t(cfg.conns));
  std::deque<int> free_list;  // idle connections, longest idle first
  for (int i = 0; i < cfg.conns; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      std::fprintf(stderr, "http_open_loop: connect to 127.0.0.1:%d: %s\n", cfg.port, std::strerror(errno));
      return 1;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = std::uint32_t(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    conns[std::size_t(i)].fd = fd;
    free_list.push_back(i);
  }

  const std::string req = "GET " + cfg.path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  const long total = long(std::ceil(cfg.rate * cfg.seconds - 1e-9));  // due at i/R for every i/R < D
  const double interval_ns = 1e9 / cfg.rate;
  const std::int64_t t0 = now_ns() + 50'000'000;
  const std::int64_t end = t0 + std::int64_t((cfg.seconds + cfg.drain) * 1e9);
  auto due_of = [&](long i) { return t0 + std::int64_t(double(i) * interval_ns); };

  std::vector<std::int64_t> lat, lag, from_send;
  lat.reserve(std::size_t(total));
  std::deque<std::int64_t> queued;  // due times of requests waiting for a connection
  long next = 0, errors = 0, lost = 0, closed_idle = 0, late_sends = 0, waited_for_conn = 0, busy = 0;
  char buf[65536];

  // Closes connection ci for good; a request on it is lost.
  auto kill = [&](int ci) {
    Conn& c = conns[std::size_t(ci)];
    epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.dead = true;
    if (c.busy) {
      c.busy = false;
      --busy;
      ++lost;
    }
  };
  // A live idle connection, or -1.
  auto take_free = [&]() {
    while (!free_list.empty()) {
      const int ci = free_list.front();
      free_list.pop_front();
      if (!conns[std::size_t(ci)].dead) return ci;
    }
    return -1;
  };

  auto send_on = [&](int ci, std::int64_t due) {
    Conn& c = conns[std::size_t(ci)];
    const std::int64_t t = now_ns();
    if (t - due > 1'000'000) ++late_sends;
    lag.push_back(t - due);
    c.busy = true;
    c.due = due;
    c.sent = t;
    ++busy;
    const ssize_t w = send(c.fd, req.data(), req.size(), MSG_NOSIGNAL);
    if (w != ssize_t(req.size())) {  // a short write of 40-odd bytes: the connection is broken
      ++errors;
      kill(ci);
    }
  };

  for (;;) {
    std::int64_t now = now_ns();
    while (!queued.empty()) {  // the waiting ones first, in order
      const int ci = take_free();
      if (ci < 0) break;
      send_on(ci, queued.front());
      queued.pop_front();
    }
    while (next < total && due_of(next) <= now) {
      const std::int64_t due = due_of(next++);
      const int ci = queued.empty() ? take_free() : -1;
      if (ci < 0) {
        ++waited_for_conn;
        queued.push_back(due);
        continue;
      }
      send_on(ci, due);
    }
    if (next >= total && queued.empty() && busy == 0) break;
    if (now > end) break;
    const std::int64_t wake = next < total ? due_of(next) : now + 50'000'000;
    const std::int64_t wait = std::clamp<std::int64_t>(wake - now, 0, 50'000'000);
    timespec ts{time_t(wait / 1000000000), long(wait % 1000000000)};
    epoll_event evs[64];
    const int n = epoll_pwait2(ep, evs, 64, &ts, nullptr);
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "http_open_loop: epoll_pwait2: %s\n", std::strerror(errno));
      return 3;
    }
    for (int k = 0; k < n; ++k) {
      const int ci = int(evs[k].data.u32);
      Conn& c = conns[std::size_t(ci)];
      if (c.dead) continue;  // an event already drawn for a connection closed above
      const ssize_t r = recv(c.fd, buf, sizeof buf, 0);
      if (r <= 0 || !c.busy) {  // closed, reset, or bytes nobody asked for
        if (c.busy || r > 0) ++errors;
        else ++closed_idle;  // the server closed a keep-alive connection (a timeout, a limit)
        kill(ci);
        continue;
      }
      c.in.append(buf, std::size_t(r));
      const long len = response_length(c.in);
      if (len < 0) {
        ++errors;
        kill(ci);
        continue;
      }
      if (len == 0) continue;
      const std::int64_t t = now_ns();
      lat.push_back(t - c.due);
      from_send.push_back(t - c.sent);
      c.in.erase(0, std::size_t(len));
      if (!c.in.empty()) ++errors;  // more than one response to one request
      c.in.clear();
      c.busy = false;
      --busy;
      free_list.push_back(ci);
    }
  }
  for (auto& c : conns)
    if (!c.dead) close(c.fd);
  std::sort(lat.begin(), lat.end());
  std::sort(lag.begin(), lag.end());
  std::sort(from_send.begin(), from_send.end());
  const long unanswered = busy + long(queued.size()) + (total - next);
  const long missing = unanswered + lost;  // no latency: they rank above every answered request
  std::printf("{\"scheduled\":%ld,\"completed\":%zu,\"unanswered\":%ld,\"lost\":%ld,\"closed_idle\":%ld,"
              "\"errors\":%ld,\"sends_over_1ms_late\":%ld,"
              "\"waited_for_connection\":%ld,\"p50_ms\":%s,\"p99_ms\":%s,\"p999_ms\":%s,\"max_ms\":%s,"
              "\"send_lag_p50_ms\":%s,\"send_lag_p99_ms\":%s,\"from_send_p50_ms\":%s,\"from_send_p99_ms\":%s,"
              "\"from_send_p999_ms\":%s,\"client_slice_us\":%u}\n",
              total, lat.size(), unanswered, lost, closed_idle, errors, late_sends, waited_for_conn,
              pct_ms(lat, 50, missing).c_str(), pct_ms(lat, 99, missing).c_str(), pct_ms(lat, 99.9, missing).c_str(),
              pct_ms(lat, 100, missing).c_str(), pct_ms(lag, 50).c_str(), pct_ms(lag, 99).c_str(),
              pct_ms(from_send, 50, missing).c_str(), pct_ms(from_send, 99, missing).c_str(),
              pct_ms(from_send, 99.9, missing).c_str(), sliced ? cfg.slice_us : 0);
  return errors || lost ? 3 : 0;
}
