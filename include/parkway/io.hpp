// parkway/io.hpp -- asynchronous I/O for coroutine tasks, on one io_uring
// ring per worker (docs/design/io.md).
//
//   parkway::Task<void> echo(parkway::io::Socket s) {
//     std::byte buf[4096];
//     for (;;) {
//       auto n = co_await s.recv(buf);                      // Result<std::size_t>
//       if (!n || *n == 0) co_return;                       // error or EOF
//       auto w = co_await s.send_all({buf, *n});  // not in the if: docs/guide.md, "Limits"
//       if (!w) co_return;
//     }
//   }
//   parkway::Task<void> serve(parkway::io::Listener& l) {
//     for (;;) {
//       auto c = co_await l.accept();
//       if (c) parkway::detach(echo(std::move(*c)));
//       else if (c.error() == std::errc::operation_canceled) co_return;  // shutdown
//       else (void)co_await parkway::io::sleep_for(10ms);  // EMFILE, ENFILE, ENOMEM ...: values
//     }
//   }
//
// Every operation is an awaitable to co_await from a coroutine running on
// a parkway worker (Task<T> spawned, detached or sync_wait'ed). It goes to
// the calling worker's ring; the worker that reaps its completion resumes
// the coroutine through its ready queue (beside its deque), from which
// any worker may take it.
//
// Errors, one style throughout:
//   - outcomes of the operation (EOF is a 0-byte read; a reset, a refused
//     connect, a timeout, a cancel, EMFILE on accept, ...) are values:
//     Result<T> holds the value or an Error (errno and the operation's
//     name); Result::value() throws IoError when there is none.
//   - misuse throws at once: an operation on a closed Socket/Listener/File
//     from the call that makes it (s.recv(buf)), one outside a parkway
//     worker from its co_await; both a std::logic_error naming the
//     operation. A worker's ring is made at the first operation that
//     worker runs; one that cannot be made (EMFILE, ENOMEM) fails that
//     operation with its errno, a value like any other.
// Timeouts and cancellation: every operation but close takes OpOptions
// (sleep_for/sleep_until a CancelSource). A timeout or deadline makes it
// fail with ETIMEDOUT (its worker cancels it within 64 task switches past
// the deadline, or at its next reap, search round or ring park; io.md,
// "Timeouts"); a CancelSource that fires (from
// any thread) makes it fail with ECANCELED. Closing a Socket, Listener or
// File cancels the operations in flight on it first. Cancelling the
// TaskGroup a coroutine belongs to (parkway/coro.hpp) cancels its
// operations in flight (ECANCELED) and makes its next co_await throw
// parkway::Cancelled. Shutting the Runtime
// down cancels every operation in flight and every one begun after it
// (ECANCELED); the workers leave once the last has completed, so a loop
// must end on ECANCELED rather than retry. A buffer handed to an
// operation must stay valid until the co_await returns; if the coroutine
// is destroyed while the operation is in flight, its destruction cancels
// the operation and waits for the kernel to be done with the buffer.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "parkway/coro.hpp"
#include "parkway/export.hpp"

namespace parkway::io {

// What went wrong in an operation: its errno and its name ("recv", ...).
class PARKWAY_API Error {
 public:
  constexpr Error() noexcept = default;
  constexpr Error(int errnum, const char* op) noexcept : errno_(errnum), op_(op) {}
  int value() const noexcept { return errno_; }
  std::error_code code() const noexcept { return {errno_, std::generic_category()}; }
  const char* op() const noexcept { return op_; }
  std::string message() const;  // "recv: Connection reset by peer"; Error{}: "no error"
  friend bool operator==(const Error& e, std::errc c) noexcept { return e.errno_ == int(c); }

 private:
  int errno_ = 0;
  const char* op_ = "";
};

// Thrown by Result::value() on a failed result.
class PARKWAY_API IoError : public std::system_error {
 public:
  explicit IoError(const Error& e);
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}
  Result(Error e) noexcept : e_(e) {}
  bool ok() const noexcept { return v_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return check(), *v_; }
  const T& value() const& { return check(), *v_; }
  T&& value() && { return check(), std::move(*v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Error error() const noexcept { return e_; }

 private:
  void check() const {
    if (!v_) throw IoError(e_);
  }
  std::optional<T> v_;
  Error e_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() noexcept = default;
  Result(Error e) noexcept : e_(e) {}
  bool ok() const noexcept { return e_.value() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  void value() const {
    if (!ok()) throw IoError(e_);
  }
  Error error() const noexcept { return e_; }

 private:
  Error e_;
};

namespace detail {
struct OpState;
struct OpScope;
PARKWAY_API OpScope* new_scope();
PARKWAY_API void retain_scope(OpScope* s) noexcept;
PARKWAY_API void release_scope(OpScope* s) noexcept;
PARKWAY_API void cancel_scope(OpScope* s) noexcept;
PARKWAY_API bool scope_cancelled(const OpScope* s) noexcept;

// A counted reference on a scope (or none), movable: what a call of many
// steps (send_all, send_file) holds from the call to its end, so that the
// CancelSource or Socket it was given may go or close meanwhile.
class ScopeRef {
 public:
  ScopeRef() noexcept = default;
  explicit ScopeRef(OpScope* s) noexcept : s_(s) {
    if (s_) retain_scope(s_);
  }
  ScopeRef(ScopeRef&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  ScopeRef& operator=(ScopeRef&&) = delete;
  ~ScopeRef() { release_scope(s_); }
  OpScope* get() const noexcept { return s_; }
  OpScope* release() noexcept { return std::exchange(s_, nullptr); }
  explicit operator bool() const noexcept { return s_ != nullptr; }

 private:
  OpScope* s_ = nullptr;
};
}  // namespace detail

// Fires cancellation of every operation started with it (OpOptions::cancel)
// that is still in flight, and of every later one (they fail at once).
// cancel() may be called from any thread, any number of times. Operations
// may outlive the source: one in flight when it is destroyed, each later
// step of a send_all or send_file it was given, and an awaitable made
// with it but not yet awaited (`auto op = s.recv(buf, {.cancel = &cs});`)
// stay cancellable by it until then (a cancel() before it went, too) and
// run on uncancelled after. None of them reads the CancelSource's address
// after the call that made it.
class PARKWAY_API CancelSource {
 public:
  CancelSource() : s_(detail::new_scope()) {}
  // Another handle on the scope `r` refers to (taken over): cancel()
  // through either fires the same operations. For the library's calls of
  // many steps, which keep one for the whole call.
  explicit CancelSource(detail::ScopeRef&& r) noexcept : s_(r.release()) {}
  ~CancelSource() { detail::release_scope(s_); }
  CancelSource(const CancelSource&) = delete;
  CancelSource& operator=(const CancelSource&) = delete;
  void cancel() noexcept { detail::cancel_scope(s_); }
  bool cancelled() const noexcept { return detail::scope_cancelled(s_); }
  detail::OpScope* scope() const noexcept { return s_; }

 private:
  detail::OpScope* s_;
};

// Per-call options: at most one of timeout and deadline (both: the
// co_await throws std::invalid_argument, as AcceptStream::next's call does).
struct OpOptions {
  std::chrono::nanoseconds timeout{0};                 // 0: none; below 0: passed already
  std::chrono::steady_clock::time_point deadline{};    // epoch: none
  CancelSource* cancel = nullptr;
};

namespace detail {

// One io_uring submission, filled in by the operation's maker; the ring
// copies it into an SQE (docs/design/io.md, "An operation's life").
struct OpArgs {
  const char* name;
  std::uint8_t opcode;
  int fd = -1;
  std::uint64_t addr = 0;
  std::uint32_t len = 0;
  std::uint64_t off = 0;
  std::uint32_t op_flags = 0;  // msg_flags, accept_flags, open_flags, timeout_flags, ...
  std::uint64_t addr2 = 0;
  // A receive into a buffer the kernel picks from the ring's pool when
  // bytes arrive (recv_owned); len is the caller's max.
  bool owned = false;
  // Not 0: the operation fails with this errno at its co_await, without
  // the ring (arguments no kernel call may be given, such as an offset
  // past 2^63 - 1).
  int fail = 0;
  std::uint8_t sqe_flags = 0;  // IOSQE_ASYNC: straight to the kernel's worker thread
  // The descriptor is an io::Socket's: a receive on it may ask the kernel
  // to poll first (Options::io_recv_poll_first), which on a descriptor
  // that is not a socket would wait for it to become readable before
  // failing with ENOTSOCK.
  bool socket = false;
};

// The awaiter part every operation shares (userspace/io/op.cpp).
class PARKWAY_API OpBase {
 public:
  // Holds a reference on the descriptor's scope, which a close() between
  // the call and its co_await would otherwise free, and one on the
  // CancelSource's, which may be destroyed before that co_await: the
  // source's address is not kept.
  OpBase(const OpArgs& a, const OpOptions& o, OpScope* owner_scope) noexcept
      : args_(a), opts_(o), owner_scope_(owner_scope), cancel_scope_(o.cancel ? o.cancel->scope() : nullptr),
        res_(-a.fail) {
    opts_.cancel = nullptr;
    if (owner_scope_) retain_scope(owner_scope_);
  }
  OpBase(const OpBase&) = delete;
  OpBase& operator=(const OpBase&) = delete;
  ~OpBase() {
    if (st_) finish_or_abandon();
    delete[] received_;
    if (owner_scope_) release_scope(owner_scope_);
  }
  // Never ready at once: await_suspend checks that it runs on a worker
  // first, even for an operation its arguments failed (OpArgs::fail).
  bool await_ready() const noexcept { return false; }
  // Submits to the calling worker's ring; false (resume now) when the
  // operation ended without the ring: failed by its arguments, done at
  // once (a send or cached read at the co_await), cancelled or timed out
  // before it began, or refused by the ring (EBUSY, ENOMEM).
  bool await_suspend(std::coroutine_handle<> h);

 protected:
  // The completion: res is the CQE's result (-errno on failure).
  int res() const noexcept { return res_; }
  std::uint32_t cqe_flags() const noexcept { return cqe_flags_; }
  Error error() const noexcept { return Error(-res_, args_.name); }
  void collect() noexcept;  // after resumption: copy the result out of the shared state
  // After collect(): an owned receive's block (recv_owned), now the caller's.
  std::unique_ptr<std::byte[]> take_received() noexcept { return std::unique_ptr<std::byte[]>(std::exchange(received_, nullptr)); }
  OpArgs args_;

 private:
  void finish_or_abandon() noexcept;
  bool cancelled_before_start() const noexcept;
  OpOptions opts_;  // its timeout and deadline (cancel: cancel_scope_)
  OpScope* owner_scope_;
  ScopeRef cancel_scope_;
  OpState* st_ = nullptr;
  int res_;
  std::uint32_t cqe_flags_ = 0;
  std::byte* received_ = nullptr;
};

// An operation whose result is a byte count (recv, send, read, write, ...).
class SizeOp : public OpBase {
 public:
  using OpBase::OpBase;
  Result<std::size_t> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return std::size_t(res());
  }
};

// An operation with no result but success (connect, close, shutdown).
class VoidOp : public OpBase {
 public:
  using OpBase::OpBase;
  Result<void> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return {};
  }
};

// io::close's: it runs in a coroutine of a cancelled TaskGroup too (no
// Cancelled at its co_await, not in the group's scope), since a close
// that never ran would leave the descriptor open.
class CloseOp : public VoidOp {
 public:
  using VoidOp::VoidOp;
  static constexpr bool kRunsWhenCancelled = true;
};

}  // namespace detail

// Bytes a receive owns: size() of them at data(), in a block of
// capacity() bytes (the receive's max) that the caller may fill further.
class Bytes {
 public:
  Bytes() noexcept = default;
  Bytes(std::unique_ptr<std::byte[]> block, std::size_t size, std::size_t capacity) noexcept
      : block_(std::move(block)), size_(size), capacity_(block_ ? capacity : 0) {}
  // A moved-from Bytes is empty, as after release(): the implicit move
  // left its size and capacity beside a null block (a span() of size()
  // bytes at nullptr, and not empty(), which reads as "the peer closed").
  Bytes(Bytes&& o) noexcept
      : block_(std::move(o.block_)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
  Bytes& operator=(Bytes&& o) noexcept {
    if (this != &o) {
      block_ = std::move(o.block_);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  std::byte* data() const noexcept { return block_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<std::byte> span() const noexcept { return {block_.get(), size_}; }
  // The block, now the caller's (capacity() bytes, from new std::byte[]).
  std::unique_ptr<std::byte[]> release() noexcept {
    size_ = capacity_ = 0;
    return std::move(block_);
  }

 private:
  std::unique_ptr<std::byte[]> block_;
  std::size_t size_ = 0, capacity_ = 0;
};

namespace detail {
// Socket::writev's awaitable, Result<std::size_t>: a sendmsg of the
// iovecs, so that it carries MSG_NOSIGNAL (a writev cannot); the msghdr
// lives in the awaitable. Errors name "writev".
class PARKWAY_API VectorSendOp : public SizeOp {
 public:
  VectorSendOp(int fd, std::span<const iovec> iov, const OpOptions& o, OpScope* scope) noexcept;

 private:
  msghdr msg_{};
};

// recv_owned's awaitable: Result<Bytes> (empty Bytes: the peer closed).
class OwnedRecvOp : public OpBase {
 public:
  using OpBase::OpBase;
  Result<Bytes> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return Bytes(take_received(), std::size_t(res()), args_.len);
  }
};
}  // namespace detail

// ---- operations on raw descriptors ----------------------------------------
// Each returns an awaitable; co_await it on a parkway worker.

PARKWAY_API detail::SizeOp recv(int fd, std::span<std::byte> buf, OpOptions o = {}, int flags = 0);
// Socket sends (send, sendmsg, send_all; Socket's too) always add
// MSG_NOSIGNAL to `flags`: a peer that is gone is the EPIPE error, never
// a SIGPIPE.
PARKWAY_API detail::SizeOp send(int fd, std::span<const std::byte> buf, OpOptions o = {}, int flags = 0);
// A receive that holds no memory while it waits: up to `max` bytes (at
// most Options::io_recv_pool_buffer_bytes), copied, once they arrive,
// into a new block of `max` bytes that the result owns. MSG_TRUNC
// throws std::invalid_argument (it would report more than the block
// holds). (That is with
// the ring's buffer pool; a ring without one, io_recv_pool_buffers = 0 or
// a pool the kernel refused, takes the block of `max` bytes before it
// waits and receives into it.) On a socket of messages (SOCK_SEQPACKET,
// SOCK_DGRAM) a message longer than the pool's buffer is cut there and
// the rest dropped, as by recv(2) into a short buffer, with nothing to
// say so: use recv or recvmsg there. For connections
// that wait long between messages; a busy stream does better with recv
// into a buffer of its own (docs/design/io.md, "Receives that take
// memory when bytes arrive"). Besides recv's errors: ENOMEM (no block
// for bytes already taken from the socket: close it). A receive that
// found the ring's pool empty goes in again once buffers are back, and
// waits on if the kernel cannot take it yet (its SQ full while its CQ
// overflows): the caller sees neither. fd must stay open until the
// co_await returns (a Socket's close takes care of that).
PARKWAY_API detail::OwnedRecvOp recv_owned(int fd, std::size_t max, OpOptions o = {}, int flags = 0);
// Reads/writes at a file offset (-1: the file's current position). An
// offset below -1, or one at which the operation would pass byte 2^63 - 1
// (offset + the bytes asked for), fails with EINVAL, named for the
// operation ("read", "write", "readv", "writev"), without the kernel. A
// read of a regular file returns fewer bytes than asked only at the end
// of the file (0 past it), or when more than 0x7ffff000 bytes (2 GiB
// less 4 KiB) are asked: the kernel reads at most that in one call. A read at an offset of 0 or more whose data is
// in the page cache is done at its co_await, without the ring
// (Options::io_read_first); one that finds only the first part cached and
// the file going on goes to the ring whole.
PARKWAY_API detail::SizeOp read(int fd, std::span<std::byte> buf, std::int64_t offset, OpOptions o = {});
PARKWAY_API detail::SizeOp write(int fd, std::span<const std::byte> buf, std::int64_t offset, OpOptions o = {});
PARKWAY_API detail::SizeOp readv(int fd, std::span<const iovec> iov, std::int64_t offset, OpOptions o = {});
// io::write and io::writev are write(2) and writev(2): on a socket whose
// peer is gone they raise SIGPIPE; write to a socket with send or
// sendmsg (or Socket::writev), which never do.
PARKWAY_API detail::SizeOp writev(int fd, std::span<const iovec> iov, std::int64_t offset, OpOptions o = {});
PARKWAY_API detail::SizeOp sendmsg(int fd, const msghdr& msg, OpOptions o = {}, int flags = 0);
PARKWAY_API detail::SizeOp recvmsg(int fd, msghdr& msg, OpOptions o = {}, int flags = 0);
PARKWAY_API detail::VoidOp shutdown(int fd, int how, OpOptions o = {});
// close(2) on the ring. It runs also in a coroutine whose TaskGroup was
// cancelled (its co_await throws no Cancelled): a close that never ran
// would leave the descriptor open.
PARKWAY_API detail::CloseOp close(int fd);
// Sends all of buf, looping over short writes. The error names "send";
// bytes sent before it are not reported. MSG_MORE in flags: more follows
// (the last piece is held back for it). `o` applies to each step (a
// timeout per step, a deadline for all); its CancelSource is held for
// the whole call, from the call on, so it may be destroyed before the
// call ends (the steps after go on uncancelled).
PARKWAY_API Task<Result<std::size_t>> send_all(int fd, std::span<const std::byte> buf, OpOptions o = {},
                                               int flags = 0);

namespace detail {
// poll's awaitable: Result<unsigned>, the events that are ready.
class PollOp : public OpBase {
 public:
  using OpBase::OpBase;
  Result<unsigned> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return unsigned(res());
  }
};
}  // namespace detail

// Waits until fd is ready for one of `events` (POLLIN, POLLOUT, ...;
// POLLERR and POLLHUP are always reported): the events that are ready.
PARKWAY_API detail::PollOp poll(int fd, unsigned events, OpOptions o = {});

// Sends count bytes of file_fd from `offset` to the stream socket
// sock_fd, looping like send_all; fewer only when the file ends first.
// Bytes in the page cache go by sendfile(2) at the co_await, without a
// copy through user memory, and a full socket is waited for on the ring
// (poll); a range not all in the page cache, a socket that is not
// non-blocking (parkway's sockets are), or a file the process may
// neither write nor own (the kernel will not say what of it is cached)
// is read on the ring and sent instead (docs/design/io.md, "Sending a
// file": sendfile can still wait for a read of the same pages that
// another caller started). `o`
// applies to each wait, as in send_all (its CancelSource held for the
// whole call, likewise); a cancel that came first fails the call before
// any byte is sent. An offset past 2^63 - 1 fails with EINVAL (named
// "send_file"); a count that would pass it ends there, as at the end of
// a file. sendfile(2) takes no MSG_NOSIGNAL:
// a worker that calls it blocks SIGPIPE in its own thread from then on,
// and a peer that is gone is the EPIPE error. Errors name "send_file"
// (or the "read", "send" or "poll" that failed); sock_fd and file_fd
// must stay open until the co_await returns.
PARKWAY_API Task<Result<std::size_t>> send_file(int sock_fd, int file_fd, std::uint64_t offset, std::size_t count,
                                                OpOptions o = {});

// Suspends the coroutine (not the worker) for d, or until t. A cancel
// ends it early with ECANCELED.
class SleepOp : public detail::OpBase {
 public:
  using OpBase::OpBase;
  Result<void> await_resume() noexcept {
    collect();
    if (res() < 0 && res() != -ETIME) return error();  // ETIME: the timer fired
    return {};
  }
};
PARKWAY_API SleepOp sleep_for(std::chrono::nanoseconds d, CancelSource* cancel = nullptr);
PARKWAY_API SleepOp sleep_until(std::chrono::steady_clock::time_point t, CancelSource* cancel = nullptr);

// ---- addresses -------------------------------------------------------------

class PARKWAY_API Address {
 public:
  Address() noexcept = default;
  // "127.0.0.1", "::1", "fe80::1%eth0" (a zone: an interface's name or
  // index), ... and a port; nullopt if ip is not an address, or its zone
  // is a name no interface has or index 0. A numeric index is taken as
  // given, as getaddrinfo(3) takes it (an interface may come later): a
  // bind to one that is not there fails then with ENODEV, a connect with
  // ENETUNREACH.
  static std::optional<Address> parse(const char* ip, std::uint16_t port) noexcept;
  static Address loopback(std::uint16_t port) noexcept;  // 127.0.0.1:port
  // A Unix domain socket's path; nullopt if it is empty, too long
  // (sockaddr_un holds 107 bytes and the NUL) or holds a NUL byte (so an
  // abstract-namespace name, "\0name", is refused).
  static std::optional<Address> unix_path(std::string_view path) noexcept;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&ss_); }
  sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&ss_); }
  socklen_t size() const noexcept { return len_; }
  socklen_t* size_ptr() noexcept { return &len_; }
  int family() const noexcept { return ss_.ss_family; }
  std::uint16_t port() const noexcept;
  std::string to_string() const;  // "127.0.0.1:8080", "[::1]:8080", "[fe80::1%eth0]:80", "unix:/run/x.sock"

 private:
  sockaddr_storage ss_{};
  socklen_t len_ = 0;
};

PARKWAY_API detail::VoidOp connect(int fd, const Address& a, OpOptions o = {});

// ---- RAII types ------------------------------------------------------------

namespace detail {
// A descriptor and the scope of the operations in flight on it.
class PARKWAY_API Descriptor {
 public:
  Descriptor() noexcept = default;
  explicit Descriptor(int fd);
  Descriptor(Descriptor&& o) noexcept
      : fd_(o.fd_.exchange(-1, std::memory_order_relaxed)),
        scope_(o.scope_.exchange(nullptr, std::memory_order_relaxed)) {}
  Descriptor& operator=(Descriptor&& o) noexcept;
  ~Descriptor() { close(); }
  int fd() const noexcept { return fd_.load(std::memory_order_relaxed); }
  bool is_open() const noexcept { return fd() >= 0; }
  // Cancels the operations in flight on it, then closes it (close(2)).
  void close() noexcept;
  // Gives up ownership without closing. Operations in flight on it go
  // on, and no close cancels them any more: as with io::close on a raw
  // descriptor, the caller closes the number only once they have ended
  // (an owned receive that found the pool empty may go in again until
  // then).
  int release() noexcept;

 protected:
  int checked(const char* op) const;  // fd_, or throws std::logic_error naming op
  OpScope* scope() const noexcept { return scope_.load(std::memory_order_relaxed); }
  // Another descriptor's scope (Socket::send_file holds its File's).
  friend OpScope* scope_of(const Descriptor& d) noexcept { return d.scope(); }
  // Atomic (relaxed) for close() from another thread while the owner's
  // operations are in flight: the owner read them when it started those,
  // with nothing that orders that read before the close (the guide,
  // "Limits"). A close that races the start of an operation is still the
  // caller's race: the operation may begin on a closed number.
  std::atomic<int> fd_{-1};
  std::atomic<OpScope*> scope_{nullptr};
};
}  // namespace detail

class Socket;
class File;

// A connected stream socket.
class PARKWAY_API Socket : public detail::Descriptor {
 public:
  using Descriptor::Descriptor;
  // Makes a socket of a's family (non-blocking, close-on-exec) and
  // connects it. To a Unix socket whose listener's backlog is full it
  // waits for room, its timeout or its cancel, as TCP's does (a
  // non-blocking Unix connect, io::connect's on such a socket, fails with
  // EAGAIN instead).
  static Task<Result<Socket>> connect(Address a, OpOptions o = {});
  detail::SizeOp recv(std::span<std::byte> buf, OpOptions o = {}, int flags = 0);
  // io::recv_owned on this socket: no memory held while it waits.
  detail::OwnedRecvOp recv_owned(std::size_t max, OpOptions o = {}, int flags = 0);
  detail::SizeOp send(std::span<const std::byte> buf, OpOptions o = {}, int flags = 0);
  // io::send_all on this socket. A socket closed at the call throws
  // std::logic_error here; a close that lands between its steps (from
  // another coroutine) ends it with ECANCELED, named "send", as one
  // during a step does.
  Task<Result<std::size_t>> send_all(std::span<const std::byte> buf, OpOptions o = {}, int flags = 0);
  // io::send_file from f. A closed socket or file throws
  // std::logic_error here; a close of either that lands during the call
  // ends it with ECANCELED, as in send_all (named for the step in flight
  // it cancelled, or "send_file" between steps).
  Task<Result<std::size_t>> send_file(const File& f, std::uint64_t offset, std::size_t count, OpOptions o = {});
  detail::PollOp poll(unsigned events, OpOptions o = {});
  // A gather send: a sendmsg of iov (MSG_NOSIGNAL, as every send here).
  detail::VectorSendOp writev(std::span<const iovec> iov, OpOptions o = {});
  detail::SizeOp sendmsg(const msghdr& msg, OpOptions o = {}, int flags = 0);
  detail::VoidOp shutdown(int how = SHUT_WR, OpOptions o = {});
  // Sets TCP_NODELAY; returns the setsockopt error, if any, and on a
  // closed socket EBADF (named "setsockopt"): it is not a co_await, and
  // does not throw.
  Result<void> set_nodelay(bool on = true) noexcept;
  Address peer_address() const;
};

// accept's awaitable: Result<Socket>.
class AcceptOp : public detail::OpBase {
 public:
  using OpBase::OpBase;
  Result<Socket> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return Socket(res());
  }
};
PARKWAY_API AcceptOp accept(int listen_fd, OpOptions o = {});

struct ListenOptions {
  int backlog = 1024;
  bool reuse_address = true;  // SO_REUSEADDR
  bool reuse_port = false;    // SO_REUSEPORT: several listeners on one port
};

class AcceptStream;

// A listening socket.
class PARKWAY_API Listener : public detail::Descriptor {
 public:
  using Descriptor::Descriptor;
  // socket, bind, listen (synchronous: none of them waits on a peer).
  static Result<Listener> bind(const Address& a, ListenOptions lo = {});
  AcceptOp accept(OpOptions o = {});
  // One multishot accept: connections arrive on it until it is destroyed;
  // see AcceptStream.
  AcceptStream stream();
  Address local_address() const;
};

// Connections from a multishot accept (one armed operation delivers many).
// co_await next() yields each; EMFILE/ENFILE and other errors are values,
// and the next call re-arms the accept. While armed it accepts whether or
// not next() is called; past 64 connections queued and untaken it pauses,
// so that later ones wait in the listener's backlog, and the next call
// that finds the queue empty arms it again (a burst the kernel accepts at
// once, a backlog's worth, may pass the 64). One coroutine at a time awaits it
// (a second is refused with std::logic_error while the first waits, is
// about to resume with its connection, or has found one queued and not
// yet returned it from its co_await); one destroyed while it waits is
// forgotten (the connection waits for the next taker). Closing the
// Listener (which may have several streams) or destroying the stream ends
// the wait with ECANCELED, as next()'s OpOptions and the awaiting
// coroutine's TaskGroup may. Destroying it cancels the accept;
// connections delivered but not taken are closed, that of a taker about
// to resume with it included: such a taker, and an awaiter from next()
// awaited after the stream was destroyed, get ECANCELED.
// A stream belongs to the runtime whose worker first awaits it: its accept
// lives on that worker's ring, and a taker resumes on that runtime's
// workers (a coroutine that moved to another runtime with resume_on is
// brought back), and gets ECANCELED when that runtime shuts down. Use a
// stream from one runtime; a Listener can give each runtime its own.
namespace detail {
struct AcceptQueue;
}
class PARKWAY_API AcceptStream {
 public:
  AcceptStream(AcceptStream&& o) noexcept : q_(std::exchange(o.q_, nullptr)) {}
  AcceptStream& operator=(AcceptStream&&) = delete;
  ~AcceptStream();
  // The awaiter holds a reference on the stream's queue, so it may
  // outlive the stream.
  struct Next {
    detail::AcceptQueue* q;
    OpOptions o{};  // its timeout and deadline (cancel: source_scope)
    detail::ScopeRef source_scope;  // o.cancel's scope, taken when it was made
    std::coroutine_handle<> h{};  // the taker, once suspended
    int early = 0;                // -ECANCELED: cancelled before it waited; -ETIMEDOUT: its time had passed
    Next(detail::AcceptQueue* q, OpOptions o) noexcept;
    Next(const Next&) = delete;
    Next& operator=(const Next&) = delete;
    ~Next();
    bool await_ready() noexcept;
    bool await_suspend(std::coroutine_handle<> h);
    Result<Socket> await_resume() noexcept;
  };
  // A timeout, deadline or CancelSource in `o`, or a TaskGroup the
  // awaiting coroutine belongs to, ends the wait with ETIMEDOUT or
  // ECANCELED (a guard operation on the taker's ring); a connection that
  // comes meanwhile waits for the next call.
  Next next(OpOptions o = {});

 private:
  friend class Listener;
  explicit AcceptStream(detail::AcceptQueue* q) noexcept : q_(q) {}
  detail::AcceptQueue* q_;
};

struct FileInfo {
  std::uint64_t size = 0;
  std::int64_t mtime_sec = 0;  // last modification, seconds since the epoch
  std::uint32_t mode = 0;      // st_mode
};

class StatOp;
class OpenOp;

// A file (or any descriptor read and written at offsets).
class PARKWAY_API File : public detail::Descriptor {
 public:
  using Descriptor::Descriptor;
  // openat(dir_fd, path, flags, mode) on the ring (AT_FDCWD: relative to
  // the working directory). O_CLOEXEC is added. An open waiting on a slow
  // file system (NFS) ends at its timeout or cancel like any operation.
  // A FIFO with nobody at the other end: the ring tries the open without
  // blocking first, so one for reading returns at once and one for
  // writing fails with ENXIO; with O_CREAT or O_TRUNC the kernel opens
  // it in a thread of its own, where it waits for the other end, its
  // timeout (ETIMEDOUT) or its cancel (ECANCELED).
  static OpenOp open(const char* path, int flags = O_RDONLY, mode_t mode = 0644, int dir_fd = -100 /* AT_FDCWD */,
                     OpOptions o = {});
  // io::read/io::write at `offset`: one past 2^63 - 1 (or that the bytes
  // asked for would pass) fails with EINVAL, named "read" or "write".
  detail::SizeOp read_at(std::span<std::byte> buf, std::uint64_t offset, OpOptions o = {});
  detail::SizeOp write_at(std::span<const std::byte> buf, std::uint64_t offset, OpOptions o = {});
  StatOp stat(OpOptions o = {});
};

class PARKWAY_API OpenOp : public detail::OpBase {
 public:
  using OpBase::OpBase;
  Result<File> await_resume() noexcept {
    collect();
    if (res() < 0) return error();
    return File(res());
  }
};

// statx of an open file: its size, modification time and mode.
class PARKWAY_API StatOp : public detail::OpBase {
 public:
  StatOp(int fd, OpOptions o, detail::OpScope* scope);
  Result<FileInfo> await_resume() noexcept;

 private:
  alignas(8) unsigned char statx_[256];  // struct statx (kernel ABI, 256 bytes)
};

}  // namespace parkway::io
