// test_io_passed_deadline.cpp -- an operation whose timeout or deadline
// has passed when it is awaited fails with ETIMEDOUT before it begins,
// also where it would have been done at once at its co_await (a send with
// room, a read from the page cache: io.md, "Timeouts").
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <string>

#include <gtest/gtest.h>

#include "parkway/coro.hpp"
#include "parkway/io.hpp"
#include "parkway/runtime.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;

namespace {

Task<io::Result<std::size_t>> send_with(int fd, io::OpOptions o) {
  static const std::byte msg[4] = {std::byte{'p'}, std::byte{'i'}, std::byte{'n'}, std::byte{'g'}};
  co_return co_await io::send(fd, msg, o);
}

Task<io::Result<std::size_t>> read_with(int fd, io::OpOptions o) {
  std::byte buf[16];
  co_return co_await io::read(fd, buf, 0, o);
}

}  // namespace

TEST(IoPassedDeadline, ASendWithRoomFailsAtOnceAndSendsNothing) {
  pwtest::Watchdog wd("IoPassedDeadline.ASendWithRoomFailsAtOnceAndSendsNothing", 60);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const io::OpOptions passed[] = {{.timeout = -1ns},
                                  {.deadline = std::chrono::steady_clock::now() - 1ms}};
  for (const io::OpOptions& o : passed) {
    auto r = parkway::sync_wait(rt, send_with(sv[0], o));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  }
  char got[8];
  EXPECT_EQ(::recv(sv[1], got, sizeof got, MSG_DONTWAIT), -1) << "a send past its deadline went out";
  // The same send with time left goes out.
  auto ok = parkway::sync_wait(rt, send_with(sv[0], {.timeout = 10s}));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(*ok, 4u);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(IoPassedDeadline, ACachedReadFailsAtOnce) {
  pwtest::Watchdog wd("IoPassedDeadline.ACachedReadFailsAtOnce", 60);
  std::string path = "/tmp/parkway-passed-deadline-XXXXXX";
  const int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "cached bytes", 12), 12);  // in the page cache now
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto late = parkway::sync_wait(rt, read_with(fd, {.deadline = std::chrono::steady_clock::now() - 1us}));
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error(), std::errc::timed_out) << late.error().message();
  auto ok = parkway::sync_wait(rt, read_with(fd, {.timeout = 10s}));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(*ok, 12u);
  ::close(fd);
  ::unlink(path.c_str());
}

// send_file of a cached file (sendfile at the co_await, nothing to wait
// for): a timeout or deadline already past fails it before any byte.
TEST(IoPassedDeadline, ASendFileOfACachedFileFailsAtOnce) {
  pwtest::Watchdog wd("IoPassedDeadline.ASendFileOfACachedFileFailsAtOnce", 60);
  std::string path = "/tmp/parkway-passed-deadline-XXXXXX";
  const int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "cached bytes", 12), 12);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto send = [&](io::OpOptions o) {
    return parkway::sync_wait(rt, [](int s, int f, io::OpOptions o) -> Task<io::Result<std::size_t>> {
      co_return co_await io::send_file(s, f, 0, 12, o);
    }(sv[0], fd, o));
  };
  const io::OpOptions passed[] = {{.timeout = -1ns}, {.deadline = std::chrono::steady_clock::now() - 1ms}};
  for (const io::OpOptions& o : passed) {
    auto r = send(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  }
  char got[16];
  EXPECT_EQ(::recv(sv[1], got, sizeof got, MSG_DONTWAIT), -1) << "bytes went out past the deadline";
  auto ok = send({.deadline = std::chrono::steady_clock::now() + 10s});
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(*ok, 12u);
  ::close(sv[0]);
  ::close(sv[1]);
  ::close(fd);
  ::unlink(path.c_str());
}
