// test_io_contract.cpp -- what parkway/io.hpp promises of its calls and
// their arguments: socket sends never raise SIGPIPE, whatever flags they
// are given.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;

namespace {

// A connected pair of TCP sockets over loopback: `out` (a parkway Socket,
// non-blocking) and the raw peer `in`, each with 64 KiB of buffer, so
// that a send of a few MiB waits for the reader many times.
struct TcpPair {
  io::Socket out;
  int in = -1;
  explicit TcpPair(parkway::Runtime& rt) {
    auto l = io::Listener::bind(io::Address::loopback(0));
    if (!l) std::abort();
    auto c = parkway::sync_wait(rt, io::Socket::connect(l->local_address()));
    if (!c) std::abort();
    out = std::move(*c);
    in = ::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (in < 0) std::abort();
    const int b = 64 * 1024;
    ::setsockopt(out.fd(), SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    ::setsockopt(in, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
  ~TcpPair() {
    if (in >= 0) ::close(in);
  }
};

// ---- No SIGPIPE, whatever the flags -------------------------------------------

std::atomic<int> g_sigpipes{0};
void count_sigpipe(int) { g_sigpipes.fetch_add(1); }

// SIGPIPE counted rather than fatal while it lives.
struct CountSigpipe {
  struct sigaction old {};
  CountSigpipe() {
    struct sigaction sa {};
    sa.sa_handler = count_sigpipe;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGPIPE, &sa, &old);
  }
  ~CountSigpipe() { ::sigaction(SIGPIPE, &old, nullptr); }
};

// On a socket shut for writing every send fails with EPIPE, which raises
// SIGPIPE unless the send says MSG_NOSIGNAL. Flags given (MSG_MORE, or 0
// said outright) must not drop it, at the co_await or on the ring.
TEST(IoContract, SocketSendsNeverRaiseSigpipeWhateverTheirFlags) {
  pwtest::Watchdog wd("IoContract.SocketSendsNeverRaiseSigpipeWhateverTheirFlags", 60);
  CountSigpipe counting;
  for (bool first : {true, false}) {
    SCOPED_TRACE(first ? "sends at the co_await" : "every send on the ring");
    g_sigpipes = 0;
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = first});
    TcpPair p(rt);
    ASSERT_EQ(::shutdown(p.out.fd(), SHUT_WR), 0);
    auto t = [](io::Socket* s) -> Task<std::string> {
      std::string out;
      auto note = [&out](const char* what, io::Result<std::size_t> r) {
        out += std::string(what) + ": " + (r ? "ok" : r.error().message()) + "\n";
      };
      std::byte b[4] = {};
      iovec v{b, sizeof b};
      msghdr m{};
      m.msg_iov = &v;
      m.msg_iovlen = 1;
      note("Socket::send_all MSG_MORE", co_await s->send_all(b, {}, MSG_MORE));
      note("Socket::send 0", co_await s->send(b, {}, 0));
      note("Socket::sendmsg MSG_MORE", co_await s->sendmsg(m, {}, MSG_MORE));
      note("Socket::writev", co_await s->writev({&v, 1}));
      note("io::send_all MSG_MORE", co_await io::send_all(s->fd(), b, {}, MSG_MORE));
      note("io::send MSG_MORE", co_await io::send(s->fd(), b, {}, MSG_MORE));
      note("io::sendmsg 0", co_await io::sendmsg(s->fd(), m, {}, 0));
      co_return out;
    };
    EXPECT_EQ(parkway::sync_wait(rt, t(&p.out)),
              "Socket::send_all MSG_MORE: send: Broken pipe\n"
              "Socket::send 0: send: Broken pipe\n"
              "Socket::sendmsg MSG_MORE: sendmsg: Broken pipe\n"
              "Socket::writev: writev: Broken pipe\n"
              "io::send_all MSG_MORE: send: Broken pipe\n"
              "io::send MSG_MORE: send: Broken pipe\n"
              "io::sendmsg 0: sendmsg: Broken pipe\n");
    EXPECT_EQ(g_sigpipes.load(), 0) << "a send raised SIGPIPE (its default action ends the process)";
  }
}

}  // namespace
