// ops.cpp -- the operations on raw descriptors: what each puts in its SQE.
#include <liburing.h>

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "io/op_state.hpp"
#include "parkway/io.hpp"

namespace parkway::io {

using detail::OpArgs;
using detail::OwnedRecvOp;
using detail::SizeOp;
using detail::VoidOp;

namespace {
std::uint64_t ptr(const void* p) noexcept { return reinterpret_cast<std::uint64_t>(p); }
std::uint32_t clamp_len(std::size_t n) noexcept { return n > 0x7ffff000u ? 0x7ffff000u : std::uint32_t(n); }
// Puts a read's or write's offset in `a` as the kernel wants it (-1, the
// current position: all ones), or fails `a` with EINVAL (OpArgs::fail)
// for an offset below -1 or a range of `len` bytes that would pass byte
// 2^63 - 1: the kernel takes all ones for the file position whatever
// the caller meant, and refuses the other negative offsets only for some
// files.
OpArgs& at_offset(OpArgs& a, std::int64_t off, std::uint64_t len) noexcept {
  if (off == -1) {
    a.off = ~std::uint64_t(0);
  } else if (off < 0 || len > std::uint64_t(INT64_MAX) - std::uint64_t(off)) {
    a.fail = EINVAL;
  } else {
    a.off = std::uint64_t(off);
  }
  return a;
}
// The bytes an iovec array asks for, saturated at UINT64_MAX.
std::uint64_t iov_bytes(std::span<const iovec> iov) noexcept {
  std::uint64_t n = 0;
  for (const iovec& v : iov)
    if (__builtin_add_overflow(n, std::uint64_t(v.iov_len), &n)) return UINT64_MAX;
  return n;
}
}  // namespace

namespace detail {

OpArgs recv_args(int fd, std::span<std::byte> buf, int flags) {
  return OpArgs{.name = "recv", .opcode = IORING_OP_RECV, .fd = fd, .addr = ptr(buf.data()),
                       .len = clamp_len(buf.size()), .op_flags = std::uint32_t(flags)};
}

OpArgs recv_owned_args(int fd, std::size_t max, int flags) {
  if (max == 0) throw std::invalid_argument("parkway::io::recv_owned: max must be at least 1 byte, got 0");
  // With MSG_TRUNC the kernel reports a datagram's whole length (and on
  // TCP drops the bytes it counts): more than the block holds.
  if ((flags & MSG_TRUNC) != 0)
    throw std::invalid_argument(
        "parkway::io::recv_owned: MSG_TRUNC is not supported (the result holds at most max bytes; "
        "use recv into a buffer of your own)");
  return OpArgs{.name = "recv", .opcode = IORING_OP_RECV, .fd = fd, .len = clamp_len(max),
                .op_flags = std::uint32_t(flags), .owned = true};
}

// MSG_NOSIGNAL always (io.hpp): without it a peer that is gone raises
// SIGPIPE, whose default ends the process. The flag reaches the send at
// the co_await (try_send_now) and the ring's alike.
OpArgs send_args(int fd, std::span<const std::byte> buf, int flags) {
  return OpArgs{.name = "send", .opcode = IORING_OP_SEND, .fd = fd, .addr = ptr(buf.data()),
                       .len = clamp_len(buf.size()), .op_flags = std::uint32_t(flags | MSG_NOSIGNAL)};
}

OpArgs read_args(int fd, std::span<std::byte> buf, std::int64_t offset) {
  OpArgs a{.name = "read", .opcode = IORING_OP_READ, .fd = fd, .addr = ptr(buf.data()), .len = clamp_len(buf.size())};
  return at_offset(a, offset, a.len);
}

OpArgs write_args(int fd, std::span<const std::byte> buf, std::int64_t offset) {
  OpArgs a{.name = "write", .opcode = IORING_OP_WRITE, .fd = fd, .addr = ptr(buf.data()), .len = clamp_len(buf.size())};
  return at_offset(a, offset, a.len);
}

OpArgs readv_args(int fd, std::span<const iovec> iov, std::int64_t offset) {
  OpArgs a{.name = "readv", .opcode = IORING_OP_READV, .fd = fd, .addr = ptr(iov.data()),
           .len = std::uint32_t(iov.size())};
  return at_offset(a, offset, iov_bytes(iov));
}

OpArgs writev_args(int fd, std::span<const iovec> iov, std::int64_t offset) {
  OpArgs a{.name = "writev", .opcode = IORING_OP_WRITEV, .fd = fd, .addr = ptr(iov.data()),
           .len = std::uint32_t(iov.size())};
  return at_offset(a, offset, iov_bytes(iov));
}

OpArgs sendmsg_args(int fd, const msghdr& msg, int flags) {
  return OpArgs{.name = "sendmsg", .opcode = IORING_OP_SENDMSG, .fd = fd, .addr = ptr(&msg), .len = 1,
                       .op_flags = std::uint32_t(flags | MSG_NOSIGNAL)};
}

OpArgs recvmsg_args(int fd, msghdr& msg, int flags) {
  return OpArgs{.name = "recvmsg", .opcode = IORING_OP_RECVMSG, .fd = fd, .addr = ptr(&msg), .len = 1,
                       .op_flags = std::uint32_t(flags)};
}

OpArgs shutdown_args(int fd, int how) {
  return OpArgs{.name = "shutdown", .opcode = IORING_OP_SHUTDOWN, .fd = fd, .len = std::uint32_t(how)};
}

OpArgs accept_args(int listen_fd) {
  return OpArgs{.name = "accept", .opcode = IORING_OP_ACCEPT, .fd = listen_fd,
                         .op_flags = SOCK_NONBLOCK | SOCK_CLOEXEC};
}

// One-shot: the events land in the SQE's poll32_events (rw_flags' union).
OpArgs poll_args(int fd, unsigned events) {
  return OpArgs{.name = "poll", .opcode = IORING_OP_POLL_ADD, .fd = fd, .op_flags = events};
}

// The SQE points at `a` and may wait in the SQ until the next flush: `a`
// must live until the co_await ends.
OpArgs connect_args(int fd, const Address& a) {
  return OpArgs{.name = "connect", .opcode = IORING_OP_CONNECT, .fd = fd, .addr = ptr(a.get()), .off = a.size()};
}

int try_send_now(const OpArgs& a) noexcept {
  ssize_t n;
  if (a.opcode == IORING_OP_SEND)
    n = ::send(a.fd, reinterpret_cast<const void*>(a.addr), a.len, int(a.op_flags) | MSG_DONTWAIT);
  else if (a.opcode == IORING_OP_SENDMSG)
    n = ::sendmsg(a.fd, reinterpret_cast<const msghdr*>(a.addr), int(a.op_flags) | MSG_DONTWAIT);
  else
    return -EAGAIN;
  if (n >= 0) return int(n);  // len is clamped below INT_MAX
  return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

// RWF_NOWAIT copies what is cached up to the first page that is not and
// stops there, short, where the ring's read would wait for the device
// and return the full count. A short count is the answer only at the end
// of the file: a one-byte probe where it stopped (RWF_NOWAIT too) that
// reads nothing says so; one that reads a byte or finds the page
// uncached sends the whole read to the ring (the bytes copied are read
// again). A small file read into a large buffer, the common short read,
// costs the probe's system call, not a trip through the ring.
int try_read_now(const OpArgs& a) noexcept {
  if (a.off == ~std::uint64_t(0)) return -EAGAIN;  // the file position: not a positional read
  ssize_t n;
  std::uint64_t want;
  if (a.opcode == IORING_OP_READ) {
    iovec v{reinterpret_cast<void*>(a.addr), a.len};
    want = a.len;
    n = ::preadv2(a.fd, &v, 1, off_t(a.off), RWF_NOWAIT);
  } else if (a.opcode == IORING_OP_READV) {
    const auto* iov = reinterpret_cast<const iovec*>(a.addr);
    want = iov_bytes({iov, a.len});
    n = ::preadv2(a.fd, iov, int(a.len), off_t(a.off), RWF_NOWAIT);
  } else {
    return -EAGAIN;
  }
  if (n < 0) return -EAGAIN;
  if (n > 0 && std::uint64_t(n) < want) {
    char probe;
    iovec v{&probe, 1};
    if (::preadv2(a.fd, &v, 1, off_t(a.off + std::uint64_t(n)), RWF_NOWAIT) != 0) return -EAGAIN;
  }
  return int(n);  // len is clamped below INT_MAX
}

}  // namespace detail

// std::generic_category's message: strerror's text without its shared
// buffer (message() may run on any thread).
std::string Error::message() const {
  std::string what = errno_ == 0 ? std::string("no error") : std::generic_category().message(errno_);
  return *op_ ? std::string(op_) + ": " + what : what;
}

IoError::IoError(const Error& e) : std::system_error(e.code(), e.op()), error_(e) {}

SizeOp recv(int fd, std::span<std::byte> buf, OpOptions o, int flags) { return SizeOp(detail::recv_args(fd, buf, flags), o, nullptr); }

OwnedRecvOp recv_owned(int fd, std::size_t max, OpOptions o, int flags) {
  return OwnedRecvOp(detail::recv_owned_args(fd, max, flags), o, nullptr);
}

SizeOp send(int fd, std::span<const std::byte> buf, OpOptions o, int flags) { return SizeOp(detail::send_args(fd, buf, flags), o, nullptr); }

SizeOp read(int fd, std::span<std::byte> buf, std::int64_t offset, OpOptions o) { return SizeOp(detail::read_args(fd, buf, offset), o, nullptr); }

SizeOp write(int fd, std::span<const std::byte> buf, std::int64_t offset, OpOptions o) { return SizeOp(detail::write_args(fd, buf, offset), o, nullptr); }

SizeOp readv(int fd, std::span<const iovec> iov, std::int64_t offset, OpOptions o) { return SizeOp(detail::readv_args(fd, iov, offset), o, nullptr); }

SizeOp writev(int fd, std::span<const iovec> iov, std::int64_t offset, OpOptions o) { return SizeOp(detail::writev_args(fd, iov, offset), o, nullptr); }

SizeOp sendmsg(int fd, const msghdr& msg, OpOptions o, int flags) { return SizeOp(detail::sendmsg_args(fd, msg, flags), o, nullptr); }

SizeOp recvmsg(int fd, msghdr& msg, OpOptions o, int flags) { return SizeOp(detail::recvmsg_args(fd, msg, flags), o, nullptr); }

VoidOp shutdown(int fd, int how, OpOptions o) { return VoidOp(detail::shutdown_args(fd, how), o, nullptr); }

detail::CloseOp close(int fd) {
  return detail::CloseOp(OpArgs{.name = "close", .opcode = IORING_OP_CLOSE, .fd = fd}, {}, nullptr);
}

detail::PollOp poll(int fd, unsigned events, OpOptions o) { return detail::PollOp(detail::poll_args(fd, events), o, nullptr); }

VoidOp connect(int fd, const Address& a, OpOptions o) { return VoidOp(detail::connect_args(fd, a), o, nullptr); }

AcceptOp accept(int listen_fd, OpOptions o) { return AcceptOp(detail::accept_args(listen_fd), o, nullptr); }

namespace detail {

// send_all's steps on fd, which is in the scope `owner` holds (a
// Socket's; none for a raw descriptor), with o's CancelSource replaced by
// the one `cancel` makes here: both references are taken at the call
// (io.hpp: the source may go and the Socket close while it runs). A
// close between two steps is a cancel, as one during a step is (that
// step's ECANCELED); the number, closed by then, is not used again.
// Declared again where it is used (socket.cpp, send_file.cpp).
Task<Result<std::size_t>> send_all_steps(int fd, ScopeRef owner, std::span<const std::byte> buf, OpOptions o,
                                         ScopeRef cancel, int flags) {
  std::optional<CancelSource> held;  // in this frame: each step's OpOptions points at it
  hold_source(o, held, std::move(cancel));
  check_options(o, "send_all");
  std::size_t done = 0;
  while (done < buf.size()) {
    if (owner && scope_cancelled(owner.get())) co_return Error(ECANCELED, "send");
    Result<std::size_t> n = co_await SizeOp(send_args(fd, buf.subspan(done), flags), o, owner.get());
    if (!n) co_return n.error();
    done += *n;
  }
  co_return done;
}

}  // namespace detail

Task<Result<std::size_t>> send_all(int fd, std::span<const std::byte> buf, OpOptions o, int flags) {
  return detail::send_all_steps(fd, {}, buf, o, detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr), flags);
}

SleepOp sleep_for(std::chrono::nanoseconds d, CancelSource* cancel) {
  std::int64_t ns = d.count() > 0 ? d.count() : 0;
  return SleepOp(OpArgs{.name = "sleep", .opcode = IORING_OP_TIMEOUT, .off = std::uint64_t(ns)},
                 OpOptions{.cancel = cancel}, nullptr);
}

SleepOp sleep_until(std::chrono::steady_clock::time_point t, CancelSource* cancel) {
  std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  if (ns <= 0) ns = 1;
  return SleepOp(OpArgs{.name = "sleep", .opcode = IORING_OP_TIMEOUT, .off = std::uint64_t(ns),
                        .op_flags = IORING_TIMEOUT_ABS},
                 OpOptions{.cancel = cancel}, nullptr);
}

}  // namespace parkway::io
