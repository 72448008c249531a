// echo_client.cpp -- the load client of the echo benchmark (run_echo.py).
//
//   echo_client --port P [--conns C] [--size B] [--seconds D] [--warmup W]
//               [--threads T] [--rate R] [--slice-us U] [--drain S]
//
// Opens C connections to 127.0.0.1:P (default 64), spread round robin over
// T threads (default 1), each thread with its own epoll set (level-
// triggered; one recv per readiness event).
//
// Closed loop (default): every connection sends a B-byte message (default
// 64) and sends the next one as soon as the whole echo is back, so each
// connection has one message in flight.
// Open loop (--rate R): R messages per second in all, each thread sending
// R/T per second on a fixed schedule (due times counted from the start;
// the thread sleeps in epoll_pwait2 until the next, with nanosecond
// timeouts and 1 ns timer slack), one
// connection after another. A message is sent whether or not its
// connection's previous one is back (they queue in the byte stream), and
// its round trip counts from its scheduled time, so the client's own
// lateness is charged too (reported as send_lag_*: how late the send
// system call started; from_send_*: the round trip counted from that
// send instead). In open loop each thread asks for a U us kernel slice
// (default 100; 0 keeps the kernel's default), so that its wake-ups are
// not held behind a busy server's threads (../client_slice.hpp says why).
//
// Load runs for W seconds of warm-up (default 1) and then D measured
// seconds (default 3). Closed loop: the round trips that complete inside
// the measured window count. Open loop: every message scheduled inside
// the window counts; after the window the client waits up to S seconds
// (--drain, default 1) for the echoes still owed, and a message not back
// by then is "unanswered": it ranks above every answered one, so a
// percentile whose rank falls on one is null (not a number) and a server
// that drops messages cannot look faster than one that answers them.
// The round trip of a message is from its send (closed) or
// scheduled send (open) to the arrival of its last echoed byte, in
// CLOCK_MONOTONIC nanoseconds, into a log-linear histogram (128 buckets
// per power of two: under 0.4% error). Every echoed byte is checked
// against what was sent (bad_bytes). Output: one JSON line on stdout,
// with conn_min/conn_max: the fewest and most round trips one connection
// completed in the window (fairness).
// The process bounds itself: connects time out after 5 s and an alarm
// ends it W + D + S + 30 s after the start. Exit status 3 if a connection
// failed or an echoed byte was wrong, 1 if it could not connect.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../client_slice.hpp"
#include "../common.hpp"

namespace {

using bench::now_ns;  // CLOCK_MONOTONIC in ns (../common.hpp)

// Log-linear histogram of nanosecond values: exact below 128, then 128
// sub-buckets per power of two.
class Histogram {
 public:
  static constexpr int kSub = 128;
  static constexpr int kBuckets = kSub + 57 * kSub;
  Histogram() : b_(kBuckets, 0) {}
  void add(std::int64_t v) {
    if (v < 0) v = 0;
    ++b_[index(std::uint64_t(v))];
    ++n_;
    sum_ += double(v);
    max_ = std::max(max_, v);
  }
  void merge(const Histogram& o) {
    for (int i = 0; i < kBuckets; ++i) b_[i] += o.b_[i];
    n_ += o.n_;
    sum_ += o.sum_;
    max_ = std::max(max_, o.max_);
  }
  std::uint64_t count() const { return n_; }
  double mean() const { return n_ ? sum_ / double(n_) : 0; }
  std::int64_t max() const { return max_; }
  // The value at quantile q (the middle of its bucket), in ns, over the
  // samples plus `missing` values larger than all of them (messages never
  // answered): NaN when the rank falls on one of those.
  double quantile(double q, std::uint64_t missing = 0) const {
    if (!n_) return missing ? std::nan("") : 0;
    std::uint64_t want = std::uint64_t(std::ceil(q * double(n_ + missing)));
    if (want < 1) want = 1;
    if (want > n_) return std::nan("");
    std::uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += b_[i];
      if (seen >= want) return middle(i);
    }
    return double(max_);
  }

 private:
  static int index(std::uint64_t v) {
    if (v < kSub) return int(v);
    int e = 63 - __builtin_clzll(v);  // >= 7
    int shift = e - 7;
    return kSub + shift * kSub + int((v >> shift) - kSub);
  }
  static double middle(int i) {
    if (i < kSub) return i;
    int shift = (i - kSub) / kSub;
    std::uint64_t m = std::uint64_t(kSub + (i - kSub) % kSub);
    return (double(m) + 0.5) * double(std::uint64_t(1) << shift);
  }
  std::vector<std::uint64_t> b_;
  std::uint64_t n_ = 0;
  double sum_ = 0;
  std::int64_t max_ = 0;
};

struct Config {
  int port = 0;
  int conns = 64;
  int size = 64;
  double seconds = 3;
  double warmup = 1;
  int threads = 1;
  double rate = 0;  // 0: closed loop
  unsigned slice_us = 100;  // open loop: the kernel slice each thread asks for (0: the default)
  double drain = 1;  // open loop: how long to wait after the window for the echoes still owed
};

// The byte at stream position pos of connection id (both directions).
inline char pattern(std::uint32_t id, std::uint64_t pos) {
  return char((pos * 0x9E3779B1u + id * 0x85EBCA6Bu) >> 13);
}

struct Conn {
  int fd = -1;
  std::uint32_t id = 0;
  std::uint64_t sent_bytes = 0;   // stream position of the next byte to send
  std::uint64_t queued_bytes = 0; // stream position after the last message queued
  std::uint64_t recv_bytes = 0;   // stream position of the next byte to receive
  // Send (or scheduled) time of message number stamp_base + i (message m
  // is the stream bytes [m * size, (m + 1) * size)); those before
  // recv_bytes / size are back.
  std::vector<std::int64_t> stamps;
  std::vector<std::int64_t> sent_at;  // when its first byte went out (0: not yet)
  std::uint64_t stamp_base = 0;
  std::uint64_t completed = 0;  // round trips that ended in the measured window
  bool want_out = false;
  bool dead = false;
};

struct ThreadResult {
  Histogram rtt, lag, from_send;
  std::uint64_t completed = 0, sent = 0, errors = 0, bad_bytes = 0;
  std::uint64_t scheduled = 0;  // open loop: messages scheduled inside the measured window
  bool sliced = false;  // the thread got its kernel slice (open loop)
};

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(std::uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 5000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      errno = err ? err : ETIMEDOUT;
      return -1;
    }
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

class Worker {
 public:
  Worker(const Config& cfg, std::vector<Conn>& conns, std::int64_t start, ThreadResult& out)
      : cfg_(cfg), conns_(conns), start_(start), out_(out) {}

  void run() {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // open loop: wake on time, not up to 50 us late
    if (cfg_.rate > 0 && cfg_.slice_us != 0) out_.sliced = bench::request_client_slice(cfg_.slice_us);
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    for (auto& c : conns_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &c;
      epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    }
    const std::int64_t measure_from = start_ + std::int64_t(cfg_.warmup * 1e9);
    const std::int64_t end = measure_from + std::int64_t(cfg_.seconds * 1e9);
    measure_from_ = measure_from;
    end_ = end;
    const bool open = cfg_.rate > 0;
    const std::int64_t interval = open ? std::int64_t(1e9 * cfg_.threads / cfg_.rate) : 0;
    // Open loop: after the window, wait up to cfg_.drain for the echoes of
    // the messages scheduled inside it.
    const std::int64_t stop = open ? end + std::int64_t(cfg_.drain * 1e9) : end;
    std::int64_t next_send = start_;
    std::size_t rr = 0;
    if (!open)
      for (auto& c : conns_) queue_message(c, now_ns());
    std::array<epoll_event, 256> events;
    for (;;) {
      std::int64_t now = now_ns();
      if (now >= end && (!open || now >= stop || out_.completed == out_.scheduled)) break;
      if (open) {
        while (now >= next_send && next_send < end) {
          // One connection after another; a dead one passes its turn on.
          for (std::size_t k = 0; k < conns_.size(); ++k) {
            Conn& c = conns_[rr++ % conns_.size()];
            if (c.dead) continue;
            queue_message(c, next_send);
            break;
          }
          // Counted even when every connection is dead: a message that
          // could not be sent is not answered either.
          if (next_send >= measure_from) ++out_.scheduled;
          next_send += interval;
        }
      }
      std::int64_t wake = !open ? end : next_send < end ? next_send : stop;
      std::int64_t wait = std::max<std::int64_t>(0, wake - now_ns());
      timespec ts{time_t(wait / 1000000000), long(wait % 1000000000)};
      int n = epoll_pwait2(ep_, events.data(), int(events.size()), &ts, nullptr);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::perror("echo_client: epoll_pwait2");
        std::exit(1);
      }
      for (int i = 0; i < n; ++i) {
        Conn& c = *static_cast<Conn*>(events[i].data.ptr);
        if (c.dead) continue;
        if (events[i].events & EPOLLOUT) flush(c);
        if (!c.dead && (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) receive(c, !open);
      }
    }
    ::close(ep_);
  }

 private:
  // Appends one message to c's outgoing stream, stamped `stamp`, and
  // writes what the socket takes now.
  void queue_message(Conn& c, std::int64_t stamp) {
    c.stamps.push_back(stamp);
    c.sent_at.push_back(0);
    c.queued_bytes += std::uint64_t(cfg_.size);
    flush(c);
  }

  void flush(Conn& c) {
    char buf[4096];
    while (c.sent_bytes < c.queued_bytes) {
      std::size_t n = std::min<std::uint64_t>(sizeof buf, c.queued_bytes - c.sent_bytes);
      for (std::size_t i = 0; i < n; ++i) buf[i] = pattern(c.id, c.sent_bytes + i);
      // The send lag of each message whose first byte goes now.
      const std::int64_t t = now_ns();
      ssize_t w = send(c.fd, buf, n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        fail(c);
        return;
      }
      for (std::uint64_t pos = c.sent_bytes; pos < c.sent_bytes + std::uint64_t(w); ++pos) {
        if (pos % std::uint64_t(cfg_.size) == 0) {
          ++out_.sent;
          const std::uint64_t k = pos / std::uint64_t(cfg_.size) - c.stamp_base;
          if (k < c.stamps.size()) {
            c.sent_at[k] = t;
            if (cfg_.rate > 0 && t >= measure_from_ && t < end_) out_.lag.add(t - c.stamps[k]);
          }
        }
      }
      c.sent_bytes += std::uint64_t(w);
    }
    const bool want = c.sent_bytes < c.queued_bytes;
    if (want != c.want_out) {
      epoll_event ev{};
      ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
      ev.data.ptr = &c;
      epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
      c.want_out = want;
    }
  }

  void receive(Conn& c, bool closed_loop) {
    char buf[4096];
    ssize_t r = recv(c.fd, buf, sizeof buf, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      fail(c);
      return;
    }
    const std::int64_t t = now_ns();
    const std::uint64_t size = std::uint64_t(cfg_.size);
    for (ssize_t i = 0; i < r; ++i)
      if (buf[i] != pattern(c.id, c.recv_bytes + std::uint64_t(i))) ++out_.bad_bytes;
    const std::uint64_t before = c.recv_bytes / size;
    c.recv_bytes += std::uint64_t(r);
    const std::uint64_t after = c.recv_bytes / size;
    if (c.recv_bytes > c.sent_bytes) {  // more bytes came back than were sent
      ++out_.bad_bytes;
      fail(c);
      return;
    }
    for (std::uint64_t m = before; m < after; ++m) {
      const std::int64_t stamp = c.stamps[m - c.stamp_base];
      // Closed loop: the round trips that end inside the window; open
      // loop: the messages scheduled inside it (Config::drain).
      const std::int64_t at = closed_loop ? t : stamp;
      if (at >= measure_from_ && at < end_) {
        out_.rtt.add(t - stamp);
        if (cfg_.rate > 0) out_.from_send.add(t - c.sent_at[m - c.stamp_base]);
        ++out_.completed;
        ++c.completed;
      }
    }
    if (after - c.stamp_base >= 1024) {  // forget the stamps of messages that are back
      c.stamps.erase(c.stamps.begin(), c.stamps.begin() + std::ptrdiff_t(after - c.stamp_base));
      c.sent_at.erase(c.sent_at.begin(), c.sent_at.begin() + std::ptrdiff_t(after - c.stamp_base));
      c.stamp_base = after;
    }
    if (closed_loop && after > before && t < end_) queue_message(c, now_ns());
  }

  void fail(Conn& c) {
    ++out_.errors;
    c.dead = true;
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
  }

  const Config& cfg_;
  std::vector<Conn>& conns_;
  std::int64_t start_, measure_from_ = 0, end_ = 0;
  ThreadResult& out_;
  int ep_ = -1;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "echo_client: %s\nusage: echo_client --port P [--conns C] [--size B] [--seconds D] [--warmup W] "
               "[--threads T] [--rate R] [--slice-us U] [--drain S]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--port") cfg.port = std::atoi(v);
    else if (a == "--conns") cfg.conns = std::atoi(v);
    else if (a == "--size") cfg.size = std::atoi(v);
    else if (a == "--seconds") cfg.seconds = std::strtod(v, nullptr);
    else if (a == "--warmup") cfg.warmup = std::strtod(v, nullptr);
    else if (a == "--threads") cfg.threads = std::atoi(v);
    else if (a == "--rate") cfg.rate = std::strtod(v, nullptr);
    else if (a == "--slice-us") cfg.slice_us = unsigned(std::strtoul(v, nullptr, 10));
    else if (a == "--drain") cfg.drain = std::strtod(v, nullptr);
    else usage(("unknown option " + a).c_str());
  }
  if (cfg.port <= 0 || cfg.port > 65535) usage("--port P is required (1..65535)");
  if (cfg.conns < 1 || cfg.conns > 10000 || cfg.size < 1 || cfg.size > (1 << 20) || cfg.seconds <= 0 ||
      cfg.seconds > 600 || cfg.warmup < 0 || cfg.warmup > 600 || cfg.threads < 1 || cfg.threads > 64 ||
      cfg.rate < 0 || cfg.rate > 1e7 || cfg.drain < 0 || cfg.drain > 60 || (cfg.slice_us != 0 && (cfg.slice_us < 100 || cfg.slice_us > 100000)))
    usage("an option is out of range");
  if (cfg.threads > cfg.conns) cfg.threads = cfg.conns;
  alarm(unsigned(cfg.warmup + cfg.seconds + cfg.drain) + 30);  // a stuck run ends anyway (SIGALRM)

  std::vector<std::vector<Conn>> per_thread(std::size_t(cfg.threads));
  for (int i = 0; i < cfg.conns; ++i) {
    Conn c;
    c.id = std::uint32_t(i);
    c.fd = connect_to(cfg.port);
    if (c.fd < 0) {
      std::fprintf(stderr, "echo_client: connect to 127.0.0.1:%d (connection %d): %s\n", cfg.port, i,
                   std::strerror(errno));
      return 1;
    }
    per_thread[std::size_t(i % cfg.threads)].push_back(std::move(c));
  }

  std::vector<ThreadResult> results(std::size_t(cfg.threads));
  const std::int64_t start = now_ns();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < cfg.threads; ++t)
      threads.emplace_back([&, t] { Worker(cfg, per_thread[std::size_t(t)], start, results[std::size_t(t)]).run(); });
    for (auto& th : threads) th.join();
  }
  // Fairness: the fewest and most round trips one connection completed.
  std::uint64_t conn_min = ~std::uint64_t(0), conn_max = 0;
  for (auto& v : per_thread)
    for (auto& c : v) {
      ::close(c.fd);
      conn_min = std::min(conn_min, c.completed);
      conn_max = std::max(conn_max, c.completed);
    }

  ThreadResult all;
  all.sliced = true;
  for (auto& r : results) {
    all.rtt.merge(r.rtt);
    all.lag.merge(r.lag);
    all.from_send.merge(r.from_send);
    all.completed += r.completed;
    all.scheduled += r.scheduled;
    all.sent += r.sent;
    all.errors += r.errors;
    all.bad_bytes += r.bad_bytes;
    all.sliced = all.sliced && r.sliced;  // every thread got it
  }
  // Open loop: the messages scheduled in the window that never came back.
  const std::uint64_t missing = cfg.rate > 0 ? all.scheduled - all.completed : 0;
  // A number in us, or null (NaN: the rank fell on an unanswered message).
  auto us = [](double ns) {
    char b[32];
    if (std::isnan(ns)) return std::string("null");
    std::snprintf(b, sizeof b, "%.2f", ns * 1e-3);
    return std::string(b);
  };
  std::printf(
      "{\"mode\":\"%s\",\"conns\":%d,\"size\":%d,\"threads\":%d,\"rate\":%.0f,\"warmup_s\":%g,\"seconds\":%g,"
      "\"requests\":%llu,\"rps\":%.1f,\"p50_us\":%s,\"p90_us\":%s,\"p99_us\":%s,\"p999_us\":%s,"
      "\"max_us\":%s,\"mean_us\":%s",
      cfg.rate > 0 ? "open" : "closed", cfg.conns, cfg.size, cfg.threads, cfg.rate, cfg.warmup, cfg.seconds,
      (unsigned long long)all.completed, double(all.completed) / cfg.seconds, us(all.rtt.quantile(0.50, missing)).c_str(),
      us(all.rtt.quantile(0.90, missing)).c_str(), us(all.rtt.quantile(0.99, missing)).c_str(),
      us(all.rtt.quantile(0.999, missing)).c_str(), us(missing ? std::nan("") : double(all.rtt.max())).c_str(),
      us(missing ? std::nan("") : all.rtt.mean()).c_str());
  if (cfg.rate > 0)
    std::printf(",\"scheduled\":%llu,\"unanswered\":%llu,\"drain_s\":%g"
                ",\"send_lag_p50_us\":%s,\"send_lag_p99_us\":%s,\"send_lag_max_us\":%s,"
                "\"from_send_p50_us\":%s,\"from_send_p99_us\":%s,\"client_slice_us\":%u",
                (unsigned long long)all.scheduled, (unsigned long long)missing, cfg.drain,
                us(all.lag.quantile(0.50)).c_str(), us(all.lag.quantile(0.99)).c_str(), us(double(all.lag.max())).c_str(),
                us(all.from_send.quantile(0.50, missing)).c_str(), us(all.from_send.quantile(0.99, missing)).c_str(),
                all.sliced ? cfg.slice_us : 0);
  std::printf(",\"conn_min\":%llu,\"conn_max\":%llu", (unsigned long long)conn_min, (unsigned long long)conn_max);
  std::printf(",\"sent\":%llu,\"errors\":%llu,\"bad_bytes\":%llu}\n", (unsigned long long)all.sent,
              (unsigned long long)all.errors, (unsigned long long)all.bad_bytes);
  // A server that answered nothing is a result (requests 0), not an error.
  return all.errors || all.bad_bytes ? 3 : 0;
}
