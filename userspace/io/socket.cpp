// socket.cpp -- addresses and the RAII descriptors: Socket, Listener, File.
// Their operations are the raw ones (ops.cpp) in the descriptor's scope,
// so that closing it cancels them first.
#include <arpa/inet.h>
#include <net/if.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/stat.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

namespace detail {
// ops.cpp: send_all's loop.
Task<Result<std::size_t>> send_all_steps(int fd, ScopeRef owner, std::span<const std::byte> buf, OpOptions o,
                                         ScopeRef cancel, int flags);
}  // namespace detail

// ---- Address ----------------------------------------------------------------

std::optional<Address> Address::parse(const char* ip, std::uint16_t port) noexcept {
  Address a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(a.get());
  if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len_ = sizeof(sockaddr_in);
    return a;
  }
  // IPv6, with a zone after '%' for a link-local address: an interface's
  // name ("fe80::1%eth0") or index ("fe80::1%2").
  auto* v6 = reinterpret_cast<sockaddr_in6*>(a.get());
  const char* zone = std::strchr(ip, '%');
  char addr[INET6_ADDRSTRLEN];
  const std::size_t addr_len = zone ? std::size_t(zone - ip) : std::strlen(ip);
  if (addr_len >= sizeof addr) return std::nullopt;
  std::memcpy(addr, ip, addr_len);
  addr[addr_len] = '\0';
  if (inet_pton(AF_INET6, addr, &v6->sin6_addr) != 1) return std::nullopt;
  if (zone) {
    const char* z = zone + 1;
    unsigned index = 0;
    const std::size_t zlen = std::strlen(z);
    if (zlen == 0) return std::nullopt;
    if (std::strspn(z, "0123456789") == zlen) {
      if (zlen > 9) return std::nullopt;
      index = unsigned(std::strtoul(z, nullptr, 10));
    } else {
      index = if_nametoindex(z);
    }
    if (index == 0) return std::nullopt;
    v6->sin6_scope_id = index;
  }
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  a.len_ = sizeof(sockaddr_in6);
  return a;
}

Address Address::loopback(std::uint16_t port) noexcept { return *parse("127.0.0.1", port); }

std::optional<Address> Address::unix_path(std::string_view path) noexcept {
  Address a;
  auto* un = reinterpret_cast<sockaddr_un*>(a.get());
  if (path.empty() || path.size() >= sizeof un->sun_path || path.find('\0') != std::string_view::npos)
    return std::nullopt;
  un->sun_family = AF_UNIX;
  std::memcpy(un->sun_path, path.data(), path.size());
  a.len_ = socklen_t(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return a;
}

std::uint16_t Address::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(get())->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(get())->sin6_port);
  return 0;
}

std::string Address::to_string() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(get())->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(get());
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    std::string zone;
    if (v6->sin6_scope_id != 0) {
      char name[IF_NAMESIZE];
      zone = "%" + std::string(if_indextoname(v6->sin6_scope_id, name) ? name : std::to_string(v6->sin6_scope_id));
    }
    return "[" + std::string(buf) + zone + "]:" + std::to_string(port());
  }
  if (family() == AF_UNIX) {
    const auto* un = reinterpret_cast<const sockaddr_un*>(get());
    const std::size_t max = len_ > offsetof(sockaddr_un, sun_path) ? len_ - offsetof(sockaddr_un, sun_path) : 0;
    const std::string_view path(un->sun_path, strnlen(un->sun_path, std::min(max, sizeof un->sun_path)));
    return path.empty() ? "unix:(unnamed)" : "unix:" + std::string(path);
  }
  return "(no address)";
}

// ---- Descriptor --------------------------------------------------------------

namespace detail {

Descriptor::Descriptor(int fd) : fd_(fd), scope_(fd >= 0 ? new_scope() : nullptr) {}

Descriptor& Descriptor::operator=(Descriptor&& o) noexcept {
  if (this != &o) {
    close();
    fd_.store(o.fd_.exchange(-1, std::memory_order_relaxed), std::memory_order_relaxed);
    // The scope last, released: a close() that takes it finds the number.
    scope_.store(o.scope_.exchange(nullptr, std::memory_order_acq_rel), std::memory_order_release);
  }
  return *this;
}

void Descriptor::close() noexcept {
  // Whoever takes the scope closes, the number with it: a close() racing
  // on another thread (a watchdog's and the owner's destructor) finds no
  // scope and returns, and never closes the number past close_scope
  // (which keeps it open while an operation may still be submitted under
  // it). Both fields are taken before close_scope, and *this is not
  // touched after it: its cancel ends the owner's operation with
  // ECANCELED, and the owner may then destroy this object, or make a new
  // one in its memory, while this call is still running.
  // A descriptor with a number always has a scope (new_scope throws).
  OpScope* s = scope_.exchange(nullptr, std::memory_order_acquire);
  if (!s) return;  // closed, released, or being closed by another thread
  const int fd = fd_.exchange(-1, std::memory_order_relaxed);
  // io_uring operations hold their own reference to the file: close(2)
  // alone would leave them waiting. Cancel them first; they complete
  // with ECANCELED on their rings. The number is closed once none of
  // them can still be submitted under it (close_scope).
  close_scope(s, fd);
  release_scope(s);
}

int Descriptor::release() noexcept {
  release_scope(scope_.exchange(nullptr, std::memory_order_relaxed));
  return fd_.exchange(-1, std::memory_order_relaxed);
}

int Descriptor::checked(const char* op) const {
  const int fd = fd_.load(std::memory_order_relaxed);
  if (fd < 0) throw std::logic_error(std::string("parkway::io::") + op + ": the descriptor is closed");
  return fd;
}

}  // namespace detail

// ---- Socket -------------------------------------------------------------------

namespace {
// Socket::connect's body, which runs at its co_await: o's CancelSource
// replaced by one on `cancel`, the scope taken at the call (io.hpp: the
// source may be gone by the co_await).
Task<Result<Socket>> connect_from_scope(Address a, OpOptions o, detail::ScopeRef cancel) {
  std::optional<CancelSource> held;
  hold_source(o, held, std::move(cancel));
  // A non-blocking Unix connect fails with EAGAIN while the listener's
  // backlog is full, where TCP's waits: a Unix socket connects blocking,
  // in the kernel's worker thread (IOSQE_ASYNC), which waits for room
  // until the timeout's or cancel's interruption; it is made
  // non-blocking, as the others are, after.
  const bool unix_socket = a.family() == AF_UNIX;
  int fd = ::socket(a.family(), SOCK_STREAM | (unix_socket ? 0 : SOCK_NONBLOCK) | SOCK_CLOEXEC, 0);
  if (fd < 0) co_return Error(errno, "socket");
  Socket s(fd);
  detail::OpArgs args = detail::connect_args(fd, a);
  if (unix_socket) args.sqe_flags = IOSQE_ASYNC;
  Result<void> r = co_await detail::VoidOp(args, o, scope_of(s));  // scope_of found by ADL (a friend of Descriptor)
  if (!r) co_return r.error();
  if (unix_socket && ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) co_return Error(errno, "fcntl");
  co_return std::move(s);
}
}  // namespace

Task<Result<Socket>> Socket::connect(Address a, OpOptions o) {
  return connect_from_scope(a, o, detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr));
}

SizeOp Socket::recv(std::span<std::byte> buf, OpOptions o, int flags) {
  OpArgs a = detail::recv_args(checked("recv"), buf, flags);
  a.socket = true;
  return SizeOp(a, o, scope());
}

detail::PollOp Socket::poll(unsigned events, OpOptions o) {
  return detail::PollOp(detail::poll_args(checked("poll"), events), o, scope());
}

OwnedRecvOp Socket::recv_owned(std::size_t max, OpOptions o, int flags) {
  OpArgs a = detail::recv_owned_args(checked("recv"), max, flags);
  a.socket = true;
  return OwnedRecvOp(a, o, scope());
}

SizeOp Socket::send(std::span<const std::byte> buf, OpOptions o, int flags) {
  return SizeOp(detail::send_args(checked("send"), buf, flags), o, scope());
}

// Not a coroutine: the closed check is at the call, and the loop holds
// the socket's scope and the CancelSource's from here (ops.cpp).
Task<Result<std::size_t>> Socket::send_all(std::span<const std::byte> buf, OpOptions o, int flags) {
  const int fd = checked("send");
  return detail::send_all_steps(fd, detail::ScopeRef(scope()), buf, o,
                                detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr), flags);
}

// writev(2) on a socket has no MSG_NOSIGNAL: a sendmsg of the same iovecs.
detail::VectorSendOp::VectorSendOp(int fd, std::span<const iovec> iov, const OpOptions& o, OpScope* scope) noexcept
    : SizeOp(sendmsg_args(fd, msg_, 0), o, scope) {
  msg_.msg_iov = const_cast<iovec*>(iov.data());
  msg_.msg_iovlen = iov.size();
  args_.name = "writev";
}

detail::VectorSendOp Socket::writev(std::span<const iovec> iov, OpOptions o) {
  return detail::VectorSendOp(checked("writev"), iov, o, scope());
}

SizeOp Socket::sendmsg(const msghdr& msg, OpOptions o, int flags) {
  return SizeOp(detail::sendmsg_args(checked("sendmsg"), msg, flags), o, scope());
}

VoidOp Socket::shutdown(int how, OpOptions o) {
  return VoidOp(detail::shutdown_args(checked("shutdown"), how), o, scope());
}

Result<void> Socket::set_nodelay(bool on) noexcept {
  int v = on ? 1 : 0;
  const int fd = this->fd();
  if (fd < 0) return Error(EBADF, "setsockopt");
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) != 0) return Error(errno, "setsockopt");
  return {};
}

Address Socket::peer_address() const {
  Address a;
  *a.size_ptr() = sizeof(sockaddr_storage);
  if (::getpeername(checked("peer_address"), a.get(), a.size_ptr()) != 0) *a.size_ptr() = 0;
  return a;
}

// ---- Listener -----------------------------------------------------------------

Result<Listener> Listener::bind(const Address& a, ListenOptions lo) {
  int fd = ::socket(a.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(errno, "socket");
  Listener l(fd);
  int one = 1;
  if (lo.reuse_address && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
    return Error(errno, "setsockopt(SO_REUSEADDR)");
  if (lo.reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    return Error(errno, "setsockopt(SO_REUSEPORT)");
  if (::bind(fd, a.get(), a.size()) != 0) return Error(errno, "bind");
  if (::listen(fd, lo.backlog) != 0) return Error(errno, "listen");
  return l;
}

AcceptOp Listener::accept(OpOptions o) { return AcceptOp(detail::accept_args(checked("accept")), o, scope()); }

Address Listener::local_address() const {
  Address a;
  *a.size_ptr() = sizeof(sockaddr_storage);
  if (::getsockname(checked("local_address"), a.get(), a.size_ptr()) != 0) *a.size_ptr() = 0;
  return a;
}

// ---- File ---------------------------------------------------------------------

OpenOp File::open(const char* path, int flags, mode_t mode, int dir_fd, OpOptions o) {
  return OpenOp(OpArgs{.name = "open", .opcode = IORING_OP_OPENAT, .fd = dir_fd,
                       .addr = reinterpret_cast<std::uint64_t>(path), .len = mode,
                       .op_flags = std::uint32_t(flags | O_CLOEXEC)},
                o, nullptr);
}

namespace {
// An unsigned offset as read_args/write_args take it: one past
// INT64_MAX becomes one they refuse (EINVAL), not -1, the file position.
std::int64_t signed_offset(std::uint64_t off) noexcept { return off > std::uint64_t(INT64_MAX) ? INT64_MIN : std::int64_t(off); }
}  // namespace

SizeOp File::read_at(std::span<std::byte> buf, std::uint64_t offset, OpOptions o) {
  return SizeOp(detail::read_args(checked("read_at"), buf, signed_offset(offset)), o, scope());
}

SizeOp File::write_at(std::span<const std::byte> buf, std::uint64_t offset, OpOptions o) {
  return SizeOp(detail::write_args(checked("write_at"), buf, signed_offset(offset)), o, scope());
}

StatOp File::stat(OpOptions o) { return StatOp(checked("stat"), o, scope()); }

static_assert(sizeof(struct statx) == 256, "StatOp's buffer is a struct statx");

StatOp::StatOp(int fd, OpOptions o, detail::OpScope* scope)
    : OpBase(OpArgs{.name = "stat", .opcode = IORING_OP_STATX, .fd = fd, .addr = reinterpret_cast<std::uint64_t>(""),
                    .len = STATX_SIZE | STATX_MTIME | STATX_MODE,
                    .off = reinterpret_cast<std::uint64_t>(statx_),
                    .op_flags = AT_EMPTY_PATH},
             o, scope) {}

Result<FileInfo> StatOp::await_resume() noexcept {
  collect();
  if (res() < 0) return error();
  struct statx sx;
  std::memcpy(&sx, statx_, sizeof sx);
  return FileInfo{.size = sx.stx_size, .mtime_sec = sx.stx_mtime.tv_sec, .mode = sx.stx_mode};
}

}  // namespace parkway::io
