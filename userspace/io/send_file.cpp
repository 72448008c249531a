// send_file.cpp -- a file's bytes to a socket: sendfile(2) at the co_await
// when the pages are cached, the ring otherwise (docs/design/io.md,
// "Sending a file").
//
// sendfile(2) blocks on two things: a socket with no room, and file pages
// that are not in memory. The first cannot happen on a non-blocking
// socket (the call sends what fits, or fails with EAGAIN, and the
// operation then waits for room with a poll on the ring). The second is
// ruled out per range, up to a read already in flight, by asking
// cachestat(2) (Linux 6.5) whether every page of it is cached; a range
// that is not, a kernel without cachestat, a blocking socket or a file
// sendfile refuses are read on the ring into a buffer and sent from
// there, as a caller without send_file would.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/op_state.hpp"
#include "parkway/io.hpp"
#include "parkway/task_group.hpp"
#include "worker.hpp"

namespace parkway::io {

namespace detail {
// ops.cpp: send_all's loop.
Task<Result<std::size_t>> send_all_steps(int fd, ScopeRef owner, std::span<const std::byte> buf, OpOptions o,
                                         ScopeRef cancel, int flags);
}  // namespace detail

namespace {

constexpr std::size_t kSendfileChunk = std::size_t(1) << 20;  // per sendfile(2) call and per cachestat(2) question
constexpr std::size_t kCopyChunk = 64 * 1024;                 // the copy path's buffer

// cachestat(2): the kernel ABI (include/uapi/linux/mman.h), absent from
// bookworm's 6.1 headers. The syscall number is the same on every
// architecture (the generic table).
constexpr long kSysCachestat = 451;
struct CachestatRange {
  std::uint64_t off, len;
};
struct Cachestat {
  std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
std::atomic<bool> g_cachestat_missing{false};

// Whether cachestat(2) answers this process for a file of its own (a
// memfd, open for writing): asked once, after a first EPERM.
bool cachestat_answers_own_file() noexcept {
  static const bool answers = [] {
    const int fd = ::memfd_create("parkway-cachestat", MFD_CLOEXEC);
    if (fd < 0) return false;
    CachestatRange r{0, 1};
    Cachestat c{};
    const bool ok = ::syscall(kSysCachestat, fd, &r, &c, 0) == 0;
    ::close(fd);
    return ok;
  }();
  return answers;
}

// Whether every page of [off, off + len) of fd is in the page cache (so
// that sendfile reads no device). False when it cannot tell.
bool all_cached(int fd, std::uint64_t off, std::size_t len) noexcept {
  if (g_cachestat_missing.load(std::memory_order_relaxed)) return false;
  CachestatRange r{off, len};
  Cachestat c{};
  if (::syscall(kSysCachestat, fd, &r, &c, 0) != 0) {
    // No such call, or a seccomp filter refusing it: never ask again.
    // EPERM is also the kernel's answer for a file the caller may
    // neither write nor own (a server's static files, read-only): that
    // file's alone, so the others are still asked, unless a file of our
    // own is refused too.
    const int err = errno;
    if (err == ENOSYS || (err == EPERM && !cachestat_answers_own_file()))
      g_cachestat_missing.store(true, std::memory_order_relaxed);
    return false;
  }
  static const std::uint64_t page = std::uint64_t(::sysconf(_SC_PAGESIZE));
  const std::uint64_t pages = (off + len + page - 1) / page - off / page;
  return c.nr_cache >= pages;
}

// sendfile(2) has no MSG_NOSIGNAL: a peer that is gone raises SIGPIPE at
// the sending thread. Every sendfile call is preceded, on its own thread
// and with no co_await between, by block_sigpipe(): the coroutine may
// resume on another worker after any co_await, so a block made when the
// call began proves nothing about the thread that sends later. Out of
// line, so that the thread-local's address is never kept across a
// suspension. The signal an EPIPE leaves pending is taken back at once.
thread_local bool t_sigpipe_blocked = false;

[[gnu::noinline]] void block_sigpipe() noexcept {
  if (t_sigpipe_blocked) return;
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  t_sigpipe_blocked = true;
}

void consume_sigpipe() noexcept {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPIPE);
  const timespec zero{0, 0};
  while (sigtimedwait(&s, nullptr, &zero) == SIGPIPE) {
  }
}

// One sendfile(2) call on this thread, SIGPIPE blocked, counted in this
// worker's stats: the count sent, or -errno. Out of line, like
// block_sigpipe: errno and the current worker are thread-locals, read
// here rather than in the coroutine, where their addresses could be
// kept across a suspension.
[[gnu::noinline]] ssize_t sendfile_here(int sock, int file_fd, std::uint64_t at, std::size_t n) noexcept {
  // Steps done here, one after another, never suspend the coroutine: past
  // the worker's streak (Worker::io_now_allowed) the step reports no room,
  // and the wait for room goes through the ring, where the coroutine
  // suspends and the worker reaps its other completions and deadlines.
  ::parkway::detail::Worker* const w = ::parkway::detail::Worker::current();
  if (w != nullptr && !w->io_now_allowed(1 + unsigned(n / (64 * 1024)))) return -EAGAIN;
  block_sigpipe();
  off_t pos = off_t(at);
  const ssize_t r = ::sendfile(sock, file_fd, &pos, n);
  if (r > 0 && w != nullptr) w->count_io_sendfile();
  if (r >= 0) return r;
  const int err = errno;
  if (err == EPIPE) consume_sigpipe();
  return -err;
}

// Whether a sendfile step begun now is cancelled already: shutdown has
// cancelled every operation on this worker's ring
// (IoRing::cancel_everything), or the TaskGroup of the coroutine running
// the call was cancelled, as for an operation's send at its co_await
// (OpBase::await_suspend, cancelled_before_start); the ring's steps fail
// so by themselves. Out of line, like sendfile_here: the current worker
// and the running coroutine's group are thread-locals.
[[gnu::noinline]] bool step_cancelled_here() noexcept {
  const ::parkway::detail::Worker* w = ::parkway::detail::Worker::current();
  const ::parkway::TaskGroup* g = ::parkway::detail::tls_group;
  return (w != nullptr && w->io_cancelling_everything()) || (g != nullptr && g->is_cancelled());
}

bool is_nonblocking(int fd) noexcept {
  const int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK) != 0;
}

// What the loop needs of the socket and the file: their numbers, and for
// a Socket and a File their scopes, held from the call to the end (a
// step on either is in its own descriptor's scope, so that a close
// leaves the number open until the step has left; StepCancel makes a
// close of either end the step and, between steps, the call, with
// ECANCELED instead of a use of a closed number). A raw descriptor's
// scopes are none.
struct Descriptors {
  int sock;
  int file;
  detail::ScopeRef sock_scope, file_scope;
  detail::PollOp wait_for_room(const OpOptions& o) const {
    return detail::PollOp(detail::poll_args(sock, POLLOUT), o, sock_scope.get());
  }
  detail::SizeOp read(std::span<std::byte> b, std::uint64_t at, const OpOptions& o) const {
    return detail::SizeOp(detail::read_args(file, b, std::int64_t(at)), o, file_scope.get());
  }
  Task<Result<std::size_t>> send_all(std::span<const std::byte> b, const OpOptions& o) const {
    return detail::send_all_steps(sock, detail::ScopeRef(sock_scope.get()), b, o,
                                  detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr), 0);
  }
};

// The CancelSource of a call's steps: it follows the caller's
// CancelSource and the socket's and the file's scopes, so that the
// caller's cancel or a close of either descriptor ends the step in
// flight, whichever descriptor it waits on (a wait for room in the
// socket when the file is closed, a read of the file when the socket
// is). A leader cancelled already cancels it at once. The leaders live
// longer: the frame holds their references.
class StepCancel {
 public:
  StepCancel(std::initializer_list<detail::OpScope*> leaders) noexcept {
    int i = 0;
    for (detail::OpScope* l : leaders) {
      links_[i].second.follower = source_.scope();
      if (l && detail::follow_scope(l, links_[i].second))
        links_[i].first = l;
      else if (l)
        source_.cancel();
      ++i;
    }
  }
  ~StepCancel() {
    for (auto& [leader, link] : links_)
      if (leader) detail::unfollow_scope(leader, link);
  }
  StepCancel(const StepCancel&) = delete;
  StepCancel& operator=(const StepCancel&) = delete;
  CancelSource* source() noexcept { return &source_; }

 private:
  CancelSource source_;
  std::pair<detail::OpScope*, detail::ScopeFollower> links_[3]{};
};

// `cancel`: o.cancel's scope, taken at the call (io.hpp: the source may
// be destroyed before the call ends), held in the frame; the loop's
// steps go with StepCancel's source, which follows it.
Task<Result<std::size_t>> send_file_loop(Descriptors d, std::uint64_t offset, std::size_t count, OpOptions o,
                                         detail::ScopeRef cancel) {
  using ::parkway::detail::Worker;
  if (Worker::current() == nullptr)
    throw std::logic_error(
        "parkway::io::send_file: not on a parkway worker (co_await it in a coroutine that runs on a Runtime: "
        "spawn, detach or sync_wait it)");
  detail::check_options(o, "send_file");
  // Past 2^63 - 1 is no file offset: the kernel would take an offset
  // there for -1, the file position. A count past it ends there (no
  // file is longer), as at the end of the file.
  if (offset > std::uint64_t(INT64_MAX)) co_return Error(EINVAL, "send_file");
  count = std::size_t(std::min<std::uint64_t>(count, std::uint64_t(INT64_MAX) - offset));
  // o.cancel is not read: the caller's source may be gone; `cancel`
  // holds its scope for the whole call.
  if (cancel && detail::scope_cancelled(cancel.get())) co_return Error(ECANCELED, "send_file");  // came first
  if (detail::time_passed(o)) co_return Error(ETIMEDOUT, "send_file");  // passed already
  StepCancel steps{cancel.get(), d.sock_scope.get(), d.file_scope.get()};
  o.cancel = steps.source();  // each step's
  bool direct = count > 0 && is_nonblocking(d.sock);
  std::unique_ptr<std::byte[]> copy;  // the copy path's buffer, made when first needed
  std::size_t done = 0;
  while (done < count) {
    // A cancel, or a close of the Socket or File, since the last step.
    if (o.cancel->cancelled()) co_return Error(ECANCELED, "send_file");
    // Time that has passed ends the call before its next step, as it does
    // each step of a send_all (a sendfile step waits on nothing).
    if (detail::time_passed(o)) co_return Error(ETIMEDOUT, "send_file");
    const std::uint64_t at = offset + done;
    // The next MiB if it is all cached, else the next 64 KiB if that is
    // (a cold file's earlier copy read brought pages in ahead of it).
    // Both numbers stay open meanwhile (a close on another thread waits
    // for the pins' end to close them); one closed already ends the call.
    std::size_t want = std::min(count - done, kSendfileChunk);
    ssize_t n = -EAGAIN;
    bool cached = false;
    if (direct) {
      if (step_cancelled_here()) co_return Error(ECANCELED, "send_file");
      const detail::DescriptorPin sock_pin(d.sock_scope.get()), file_pin(d.file_scope.get());
      if (!sock_pin.ok() || !file_pin.ok()) co_return Error(ECANCELED, "send_file");
      cached = all_cached(d.file, at, want);
      if (!cached) {
        // Pages past the end are never cached: a count past the end of
        // the file asks again about what the file holds. A size of 0 may
        // be no size at all (/proc, some FUSE files): the copy path reads
        // what there is.
        struct stat sb;
        if (::fstat(d.file, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 &&
            std::uint64_t(sb.st_size) < at + want) {
          if (std::uint64_t(sb.st_size) <= at) break;  // the file ends here
          want = std::size_t(std::uint64_t(sb.st_size) - at);
          cached = all_cached(d.file, at, want);
        }
      }
      if (!cached && want > kCopyChunk) {
        want = kCopyChunk;
        cached = all_cached(d.file, at, want);
      }
      if (cached) n = sendfile_here(d.sock, d.file, at, want);
    }
    if (cached) {
      if (n > 0) {
        done += std::size_t(n);
        continue;
      }
      if (n == 0) break;  // the file ends here
      const int err = int(-n);
      if (err == EAGAIN) {  // no room in the socket: wait for some on the ring
        Result<unsigned> ready = co_await d.wait_for_room(o);
        if (!ready) co_return ready.error();
        continue;
      }
      if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) co_return Error(err, "send_file");
      direct = false;  // a file sendfile does not take: copy from here on
    }
    if (!copy) copy = std::make_unique_for_overwrite<std::byte[]>(kCopyChunk);
    Result<std::size_t> got = co_await d.read({copy.get(), std::min(count - done, kCopyChunk)}, at, o);
    if (!got) co_return got.error();
    if (*got == 0) break;  // the file ends here
    Result<std::size_t> sent = co_await d.send_all({copy.get(), *got}, o);
    if (!sent) co_return sent.error();
    done += *got;
  }
  co_return done;
}

}  // namespace

Task<Result<std::size_t>> send_file(int sock_fd, int file_fd, std::uint64_t offset, std::size_t count,
                                    OpOptions o) {
  return send_file_loop(Descriptors{sock_fd, file_fd, {}, {}}, offset, count, o,
                        detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr));
}

Task<Result<std::size_t>> Socket::send_file(const File& f, std::uint64_t offset, std::size_t count, OpOptions o) {
  const int sock = checked("send_file");
  if (!f.is_open()) throw std::logic_error("parkway::io::send_file: the file is closed");
  return send_file_loop(Descriptors{sock, f.fd(), detail::ScopeRef(scope()), detail::ScopeRef(scope_of(f))}, offset,
                        count, o, detail::ScopeRef(o.cancel ? o.cancel->scope() : nullptr));
}

}  // namespace parkway::io
