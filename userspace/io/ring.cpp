// ring.cpp -- one worker's io_uring ring (see ring.hpp, docs/design/io.md).
#include "io/ring.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>

#include "clock.hpp"
#include "env_choice.hpp"
#include "parker.hpp"
#include "probes.hpp"
#include "runtime_impl.hpp"
#include "tsan.hpp"
#include "worker.hpp"

namespace parkway::io::detail {

std::atomic<int> g_inject_kernel_eagain{0};

using ::parkway::detail::ParkWord;
using ::parkway::detail::Worker;

namespace {

// A timed ring park sleeps at most this long.
constexpr std::int64_t kMaxWaitNs = 1000000;

// Deadlines are signed (a time left may go below zero).
std::int64_t now_ns() noexcept { return std::int64_t(::parkway::detail::monotonic_ns()); }

// This process's time namespace's CLOCK_MONOTONIC minus the host's
// (/proc/self/timens_offsets, Linux 5.6; 0 without one). io_uring takes an
// IORING_TIMEOUT_ABS deadline on the host's clock, untranslated (unlike
// clock_nanosleep and timerfd): in a namespace 3 s ahead, sleep_for(100ms)
// slept 3.1 s, 2 s behind it ended at once. A process's namespace never
// changes (setns and unshare of one apply to children), but a child
// forked into another one inherits the parent's copy: read once per fork
// generation. Workers may read it at once: each stores the same values,
// the offset before the generation that vouches for it.
std::atomic<unsigned> g_timens_read_in{~0u};
std::atomic<std::int64_t> g_timens_offset{0};
std::int64_t timens_monotonic_offset_ns() noexcept {
  const unsigned gen = ::parkway::detail::fork_generation();
  if (g_timens_read_in.load(std::memory_order_acquire) == gen)
    return g_timens_offset.load(std::memory_order_relaxed);
  std::int64_t r = 0;
  if (std::FILE* f = std::fopen("/proc/self/timens_offsets", "re")) {
    char clock[32];
    long long sec = 0, nsec = 0;
    while (std::fscanf(f, "%31s %lld %lld", clock, &sec, &nsec) == 3)
      if (std::strcmp(clock, "monotonic") == 0) r = std::int64_t(sec) * 1000000000 + nsec;
    std::fclose(f);
  }
  g_timens_offset.store(r, std::memory_order_relaxed);
  g_timens_read_in.store(gen, std::memory_order_release);
  return r;
}

// IORING_OP_FUTEX_WAIT (Linux 6.7). Neither liburing 2.3 nor the 6.1
// kernel headers know it, so the SQE is filled in by hand.
constexpr std::uint8_t kOpFutexWait = 51;
constexpr std::uint32_t kFutex2SizeU32 = 0x02;
constexpr std::uint32_t kFutex2Private = 128;
constexpr std::uint64_t kFutexMatchAny = 0xffffffffu;

// IORING_ENTER_NO_IOWAIT (Linux 6.15, announced by kFeatNoIowait); the
// bookworm headers lack it.
constexpr unsigned kEnterNoIowait = 1u << 7;

CancelRequest* const kMailboxClosed = reinterpret_cast<CancelRequest*>(std::uintptr_t(1));

// setup flags, best first: the ring is only ever entered by its worker.
constexpr unsigned kSetupTries[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
    0,
};

void prep_futex_wait(io_uring_sqe* sqe, std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  io_uring_prep_rw(kOpFutexWait, sqe, int(kFutex2SizeU32 | kFutex2Private), word, 0, expected);
  sqe->addr3 = kFutexMatchAny;
}

// An operation whose effect another party waits for: it should reach the
// kernel within a few tasks, not at the end of the batch (between_tasks).
bool peer_waits_for(std::uint8_t opcode) noexcept {
  switch (opcode) {
    case IORING_OP_SEND:
    case IORING_OP_SENDMSG:
    case IORING_OP_WRITE:
    case IORING_OP_WRITEV:
    case IORING_OP_CONNECT:
    case IORING_OP_SHUTDOWN:
    case IORING_OP_CLOSE:
      return true;
    default:
      return false;
  }
}

}  // namespace

// PARKWAY_IO_IOWAIT=1: ring sleeps count as I/O wait, as before Linux 6.15
// (for comparison; see io.md, "A ring sleep is not I/O wait").
static bool env_says_iowait() noexcept {
  static const bool on = [] {
    return ::parkway::detail::env_choice("PARKWAY_IO_IOWAIT", {"0", "1"}, "a ring sleep counts as idle where the kernel can") == 1;
  }();
  return on;
}

WakeMode process_wake_mode(io_uring* probe_ring) noexcept {
  static WakeMode mode = [probe_ring] {
    const int env = ::parkway::detail::env_choice("PARKWAY_IO_WAKE", {"eventfd", "futex"}, "the futex op where the kernel has it");
    if (env == 0) return WakeMode::kEventfd;
    io_uring_probe* p = io_uring_get_probe_ring(probe_ring);
    bool futex = p && io_uring_opcode_supported(p, kOpFutexWait);
    if (p) io_uring_free_probe(p);
    if (env == 1 && !futex)
      std::fprintf(stderr, "parkway: PARKWAY_IO_WAKE=futex, but this kernel has no IORING_OP_FUTEX_WAIT; using eventfd\n");
    return futex ? WakeMode::kFutexOp : WakeMode::kEventfd;
  }();
  return mode;
}

// PARKWAY_IO_SETUP=coop: skip SINGLE_ISSUER | DEFER_TASKRUN, as a kernel
// before 6.1 must (the COOP_TASKRUN ring is then tested on this one).
static std::size_t first_setup_try() noexcept {
  static const std::size_t first = [] {
    const int e = ::parkway::detail::env_choice("PARKWAY_IO_SETUP", {"coop"}, "SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them");
    return e == 0 ? std::size_t(1) : std::size_t(0);
  }();
  return first;
}

// A ring's mappings. liburing maps a ring's SQ, CQ and SQEs with raw
// system calls, and unmaps them so, unseen by ThreadSanitizer, which keeps
// the shadow of a ring that is gone. A worker that took its park word
// before a detached worker of another runtime left (the registry's lock,
// its only ordering with that worker, came too early) may then map its
// ring where the old one was; TSAN took its first CQ-head store for a
// race with the old worker's last read. The kernel orders the munmap
// before the mmap that reuses the address. So, under TSAN only
// (tsan.hpp), an owner releases each page of its ring's mappings after
// its last access, and a new ring acquires each page of its own: an
// ordering between two rings that shared a page, and no other. Checked by
// IoShutdown.ARingMappedWhereADetachedWorkersRingWasRacesWithNothing.
namespace {
template <void (*Sync)(void*) noexcept>
void each_mapped_page([[maybe_unused]] io_uring& ring) noexcept {
#if defined(PARKWAY_TSAN)
  auto pages = [](void* p, std::size_t bytes) {
    auto* b = static_cast<char*>(p);
    for (std::size_t off = 0; off < bytes; off += 4096) Sync(b + off);
  };
  pages(ring.sq.ring_ptr, ring.sq.ring_sz);
  if (ring.cq.ring_ptr != ring.sq.ring_ptr) pages(ring.cq.ring_ptr, ring.cq.ring_sz);
  const std::size_t sqe_bytes = (ring.flags & IORING_SETUP_SQE128) ? 2 * sizeof(io_uring_sqe) : sizeof(io_uring_sqe);
  pages(ring.sq.sqes, ring.sq.ring_entries * sqe_bytes);
#endif
}
void exit_ring(io_uring* ring) noexcept {
  each_mapped_page<::parkway::detail::tsan_release>(*ring);
  io_uring_queue_exit(ring);
}
}  // namespace

IoRing::IoRing(Worker& w, int* err) noexcept : w_(w), stop_(w.runtime().stop), ready_(w.io_ready()) {
  *err = 0;
  const Options& o = w.runtime().opts;
  int rc = -EINVAL;
  for (std::size_t t = first_setup_try(); t < std::size(kSetupTries); ++t) {
    const unsigned flags = kSetupTries[t];
    io_uring_params p{};
    p.flags = flags | IORING_SETUP_CQSIZE;
    p.cq_entries = o.io_cq_entries ? o.io_cq_entries : std::min(4 * o.io_sq_entries, 65536u);
    rc = io_uring_queue_init_params(o.io_sq_entries, &ring_, &p);
    if (rc == 0) {
      each_mapped_page<::parkway::detail::tsan_acquire>(ring_);
      defer_taskrun_ = (flags & IORING_SETUP_DEFER_TASKRUN) != 0;
      // IORING_RECVSEND_POLL_FIRST came with COOP_TASKRUN (Linux 5.19):
      // a ring set up without either refuses it.
      recv_poll_first_ = o.io_recv_poll_first && flags != 0;
      wait_no_iowait_ = (p.features & kFeatNoIowait) != 0 && (p.features & IORING_FEAT_EXT_ARG) != 0 &&
                        !env_says_iowait();
      break;
    }
    if (rc != -EINVAL) break;  // not a missing feature: ENOMEM, EPERM, ENOSYS ...
  }
  if (rc < 0) {
    *err = rc;
    return;
  }
  mode_ = process_wake_mode(&ring_);
  if (mode_ == WakeMode::kEventfd) {
    // [D1] The eventfd that wakes this worker when it sleeps in the ring,
    // made with the ring, on this thread, so before any of its ring parks'
    // [P0] (seq_cst) announces kParkedRing: a waker whose RMW reads that
    // finds it. No descriptor for it is the ring's error, the result of
    // the operation that needed the ring, not an abort at the first park.
    ParkWord& pw = ::parkway::detail::park_word(w.park_id());
    if (pw.doorbell.load(std::memory_order_relaxed) < 0) {
      const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (fd < 0) {
        *err = -errno;
        exit_ring(&ring_);
        return;
      }
      pw.doorbell.store(fd, std::memory_order_release);
    }
  }
  made_ = true;
}

namespace {
// Releases a list of cancel requests that will not be submitted.
void release_requests(CancelRequest* r) noexcept {
  while (r) {
    CancelRequest* next = r->next;
    r->release(r);
    r = next;
  }
}
}  // namespace

IoRing::~IoRing() {
  if (!made_) return;  // its constructor failed: no ring, and nobody saw it
  // No new cancel requests from here on; release those still posted.
  CancelRequest* r = mailbox_.exchange(kMailboxClosed, std::memory_order_acq_rel);
  if (r != kMailboxClosed) release_requests(r);
  if (w_.runtime().forked()) {
    // A child forked by a task on this worker: the SQ, the CQ and the
    // registered buffers are mappings shared with the parent, whose
    // worker goes on using them. The child submits nothing, reaps
    // nothing and unregisters nothing: it unmaps its copies and closes
    // its descriptor (io.md, "Fork"). Its operations' states leak with
    // the child's copy of everything else the parent's tasks held.
    pool_.forget();
    exit_ring(&ring_);
    return;
  }
  // The ring's own wait must be over before the ring goes: cancel it and
  // reap until its CQE came (PLATFORM: an armed FUTEX_WAIT still counts
  // toward FUTEX_WAKE's count); cancels still in the kernel hold
  // references that their CQEs release.
  if (armed_ || cancels_ != 0) {
    io_uring_sqe* sqe = armed_ ? get_sqe() : nullptr;
    if (sqe) {
      io_uring_prep_cancel64(sqe, kTagRingWait, 0);
      io_uring_sqe_set_data64(sqe, kTagIgnore);
    }
    for (int i = 0; (armed_ || cancels_ != 0) && i < 1000; ++i) {
      enter(true, kMaxWaitNs);
      reap();
    }
  }
  if (ops_ != 0)
    std::fprintf(stderr, "parkway: worker %u closes its io_uring ring with %u operations in flight\n", w_.index(), ops_);
  pool_.destroy(&ring_);
  exit_ring(&ring_);
}

std::uint32_t IoRing::parked_value() const noexcept {
  return mode_ == WakeMode::kEventfd ? ::parkway::detail::kParkedRing : ::parkway::detail::kParked;
}

io_uring_sqe* IoRing::get_sqe(unsigned need) noexcept {
  // A full SQ is flushed to the kernel and the SQE taken again; with a
  // CQ overflow backlog the kernel refuses new submissions (EBUSY) until
  // we reap, which poll() does.
  for (int tries = 0; tries < 64; ++tries) {
    if (io_uring_sq_space_left(&ring_) >= need) return io_uring_get_sqe(&ring_);
    int rc = io_uring_submit(&ring_);
    if (rc == -EBUSY || rc == -EAGAIN || rc == -EINTR) reap();
  }
  return nullptr;
}

io_uring_sqe* IoRing::get_sqe_without_reap() noexcept {
  if (io_uring_sq_space_left(&ring_) == 0) (void)io_uring_submit(&ring_);
  return io_uring_sq_space_left(&ring_) != 0 ? io_uring_get_sqe(&ring_) : nullptr;
}

bool IoRing::refuses_new_ops() noexcept {
  if (ops_at_cancel_ != kNoCancelYet) return true;
  if (!stop_.load(std::memory_order_relaxed)) [[likely]]
    return false;
  cancel_everything();  // those in flight go too, idle or not ([X4])
  return true;
}

int IoRing::submit(OpState* st, const OpArgs& a, const OpOptions& o) noexcept {
  // Shutdown has begun: an operation begun now is cancelled before it
  // reaches the kernel, which would do it at once if it could (a send
  // with room, a receive whose bytes are there) ahead of the next cancel.
  // A close still runs: its descriptor must not stay open.
  if (a.opcode != IORING_OP_CLOSE && refuses_new_ops()) [[unlikely]]
    return -ECANCELED;
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) return -EBUSY;
  io_uring_prep_rw(a.opcode, sqe, a.fd, reinterpret_cast<const void*>(a.addr), a.len, a.off);
  sqe->rw_flags = int(a.op_flags);
  sqe->flags |= a.sqe_flags;
  if (a.addr2) sqe->addr2 = a.addr2;
  if (a.opcode == IORING_OP_TIMEOUT) {  // a sleep: off holds nanoseconds (absolute with IORING_TIMEOUT_ABS)
    std::uint64_t ns = a.off;
    // A relative sleep counts from its co_await (now), not from when its
    // SQE reaches the kernel: a sleep is not urgent and may wait in the SQ
    // behind the tasks this worker runs meanwhile. Made absolute here
    // (CLOCK_MONOTONIC, as steady_clock), saturating.
    if ((a.op_flags & IORING_TIMEOUT_ABS) == 0) {
      const std::uint64_t now = std::uint64_t(now_ns());
      ns = ns > std::uint64_t(INT64_MAX) - now ? std::uint64_t(INT64_MAX) : now + ns;
      sqe->timeout_flags |= IORING_TIMEOUT_ABS;
    }
    // On the host's clock, as the kernel reads it (saturated stays so).
    if (const std::int64_t off = timens_monotonic_offset_ns(); off != 0 && ns != std::uint64_t(INT64_MAX)) {
      const std::int64_t host = std::int64_t(ns) - off;  // |off| is far below 2^62
      ns = host <= 0 ? 1 : host >= INT64_MAX - 1 ? std::uint64_t(INT64_MAX) : std::uint64_t(host);
    }
    st->ts.tv_sec = std::int64_t(ns / 1000000000u);
    st->ts.tv_nsec = std::int64_t(ns % 1000000000u);
    sqe->addr = reinterpret_cast<std::uint64_t>(&st->ts);
    sqe->len = 1;
    sqe->off = 0;
  }
  if (a.owned) {
    st->owned_fd = a.fd;
    st->owned_len = a.len;
    st->owned_flags = a.op_flags;
    if (const int rc = prep_owned_recv(sqe, st); rc < 0) {  // the SQE is filled: make it a no-op
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, kTagIgnore);
      return rc;
    }
  }
  st->recv_polls_first = recv_poll_first_ && a.socket && (a.opcode == IORING_OP_RECV || a.opcode == IORING_OP_RECVMSG) &&
                         (a.op_flags & (MSG_DONTWAIT | MSG_OOB)) == 0;
  if (st->recv_polls_first) queue_behind(sqe);
  // A sleep's timespec shares its bytes with again_args: not read for one.
  const bool again = (a.opcode != IORING_OP_TIMEOUT && st->again_args != nullptr) ||
                     (a.owned && (a.op_flags & MSG_DONTWAIT) == 0);
  if (again && g_inject_kernel_eagain.load(std::memory_order_relaxed) > 0) [[unlikely]] {
    g_inject_kernel_eagain.fetch_sub(1, std::memory_order_relaxed);
    io_uring_prep_nop(sqe);  // (and no POLL_FIRST)
    sqe->rw_flags = int(kNopInjectResult);  // the no-op's flags share the field
    sqe->len = static_cast<unsigned>(-EAGAIN);
  }
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(st) | kTagOp);
  urgent_ |= peer_waits_for(a.opcode);
  st->ring = this;
  if (o.timeout.count() != 0 || o.deadline.time_since_epoch().count() != 0) {
    // steady_clock is CLOCK_MONOTONIC, which expire_deadlines reads. A
    // negative timeout has passed already; a huge one saturates.
    const std::int64_t now = now_ns();
    std::int64_t at;
    if (o.timeout.count() < 0) at = now;
    else if (o.timeout.count() > 0) at = __builtin_add_overflow(now, o.timeout.count(), &at) ? INT64_MAX : at;
    else at = std::chrono::duration_cast<std::chrono::nanoseconds>(o.deadline.time_since_epoch()).count();
    try {
      deadlines_.push(st, at);
    } catch (const std::bad_alloc&) {  // the SQE is filled: make it a no-op that fails
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, kTagIgnore);
      return -ENOMEM;
    }
  }
  st->result_is_fd = a.opcode == IORING_OP_ACCEPT || a.opcode == IORING_OP_OPENAT;
  if (a.opcode == IORING_OP_CLOSE) {
    st->closes = true;
    st->owned_fd = a.fd;
  }
  ::parkway::detail::trace::on_io_submit(a.opcode);
  ++ops_;
  ++submitted_;
  w_.count_io_op();
  return 0;
}

int IoRing::submit_multishot_accept(int fd, std::uint64_t tagged) noexcept {
  if (refuses_new_ops()) [[unlikely]]
    return -ECANCELED;  // as in submit()
  io_uring_sqe* sqe = get_sqe();
  if (!sqe) return -EBUSY;
  io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  ::parkway::detail::trace::on_io_submit(IORING_OP_ACCEPT);
  io_uring_sqe_set_data64(sqe, tagged);
  ++ops_;
  ++submitted_;
  w_.count_io_op();
  return 0;
}

void IoRing::post_cancel(CancelRequest* req) noexcept {
  CancelRequest* head = mailbox_.load(std::memory_order_relaxed);
  do {
    if (head == kMailboxClosed) {  // the worker left: its operations are over
      req->release(req);
      return;
    }
    req->next = head;
    // [M1] seq_cst: pairs with the owner's [P0]/[R1] (Dekker, io.md)
  } while (!mailbox_.compare_exchange_weak(head, req, std::memory_order_seq_cst, std::memory_order_relaxed));
  if (Worker::current() != &w_) ::parkway::detail::park_word(w_.park_id()).notify();  // [M2]
}

void IoRing::drain_mailbox() noexcept {
  if (mailbox_.load(std::memory_order_relaxed) == nullptr) return;
  CancelRequest* r = mailbox_.exchange(nullptr, std::memory_order_acq_rel);
  while (r) {
    CancelRequest* next = r->next;
    io_uring_sqe* sqe = get_sqe();
    if (sqe) {
      io_uring_prep_cancel64(sqe, r->target, 0);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(r) | kTagCancel);
      ++cancels_;
      urgent_ = true;  // its canceller waits
    } else {
      // No SQE (a kernel refusing submissions while nothing can be
      // reaped): this and the rest go back to the mailbox for the next
      // scheduling point, as expire_deadlines looks again at its next. A
      // request released here would be lost for good: its operation's
      // `posted` flag stays set, so no later cancel of it is sent.
      repost(r);
      return;
    }
    r = next;
  }
}

void IoRing::repost(CancelRequest* first) noexcept {
  CancelRequest* last = first;
  while (last->next) last = last->next;
  CancelRequest* head = mailbox_.load(std::memory_order_relaxed);
  do {
    if (head == kMailboxClosed) {  // cannot be: only this worker closes it, as it leaves
      release_requests(first);
      return;
    }
    last->next = head;
  } while (!mailbox_.compare_exchange_weak(head, first, std::memory_order_seq_cst, std::memory_order_relaxed));
}

void IoRing::cancel_everything() noexcept {
  if (ops_ == 0 || ops_at_cancel_ == submitted_) return;
  // No reap here: a parking worker calls it after its recheck, a submit
  // and a reap's end once stop is set. With no SQE the next park (or
  // refusal) tries again.
  if (io_uring_sqe* sqe = get_sqe_without_reap()) {
    ops_at_cancel_ = submitted_;
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, kTagInternal);
    ++cancels_;
    urgent_ = true;
  }
}

void IoRing::enter(bool wait, std::int64_t wait_ns) noexcept {
  int rc;
  if (!wait) {
    rc = defer_taskrun_ ? io_uring_submit_and_get_events(&ring_) : io_uring_submit(&ring_);
  } else if (wait_no_iowait_) {
    rc = submit_and_wait_no_iowait(wait_ns);
  } else if (wait_ns >= 0) {
    __kernel_timespec ts{wait_ns / 1000000000, wait_ns % 1000000000};
    io_uring_cqe* cqe;
    rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  } else {
    rc = io_uring_submit_and_wait(&ring_, 1);
  }
  (void)rc;  // EINTR, ETIME, EBUSY (overflow backlog): the caller reaps and loops
  sq_ticks_ = 0;
  urgent_ = false;
}

// io_uring_submit_and_wait(_timeout) with IORING_ENTER_NO_IOWAIT, which
// liburing 2.3 cannot pass: hand the queued SQEs to the kernel as its
// submit does (liburing keeps them between sqe_head and sqe_tail; the SQ
// array is filled at setup), then one entry that submits and waits for a
// CQE, with the deadline as an extended argument.
int IoRing::submit_and_wait_no_iowait(std::int64_t wait_ns) noexcept {
  io_uring_sq& sq = ring_.sq;
  const unsigned tail = sq.sqe_tail;
  if (sq.sqe_head != tail) {
    sq.sqe_head = tail;
    io_uring_smp_store_release(sq.ktail, tail);
  }
  const unsigned to_submit = tail - io_uring_smp_load_acquire(sq.khead);
  unsigned flags = IORING_ENTER_GETEVENTS | kEnterNoIowait;
  if (wait_ns < 0) return io_uring_enter(unsigned(ring_.ring_fd), to_submit, 1, flags, nullptr);
  __kernel_timespec ts{wait_ns / 1000000000, wait_ns % 1000000000};
  io_uring_getevents_arg arg{};
  arg.ts = reinterpret_cast<std::uint64_t>(&ts);
  flags |= IORING_ENTER_EXT_ARG;
  return io_uring_enter2(unsigned(ring_.ring_fd), to_submit, 1, flags, reinterpret_cast<sigset_t*>(&arg), sizeof(arg));
}

void IoRing::expire_deadlines() noexcept {
  deadline_ticks_ = 0;
  const std::int64_t now = now_ns();
  while (!deadlines_.empty() && deadlines_.earliest() <= now) {
    // The SQE first: get_sqe may reap, and an operation that completes
    // there leaves the heap (complete) and may be freed; one popped
    // before it would be cancelled, or pushed back, after that.
    io_uring_sqe* sqe = get_sqe();
    if (!sqe) return;  // cannot happen short of a broken ring: look again at the next point
    OpState* st = deadlines_.pop_expired(now);
    if (!st) {  // the expired ones completed in get_sqe's reap
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, kTagIgnore);
      return;
    }
    // The operation's CQE says how it ended: -ECANCELED if this cancel
    // reached it (then ETIMEDOUT, in complete), its own result if it
    // finished first (the cancel then finds nothing).
    st->timed_out = true;
    // The cancel names st by its address: it holds a reference until its
    // own CQE (kTagCancel releases it), so that a cancel left in the SQ
    // past st's end (a submission refused while the CQ overflows) finds
    // no other operation made at that address.
    st->cancel.retain(&st->cancel);
    io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(st) | kTagOp, 0);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(&st->cancel) | kTagCancel);
    ++cancels_;
    urgent_ = true;  // its awaiter waits
  }
}

unsigned IoRing::poll() noexcept {
  drain_mailbox();
  if (!deadlines_.empty()) expire_deadlines();
  // SQEs nobody waits for alone are no reason to enter: between_tasks
  // sends them within a few tasks, and the ring park with its own entry.
  const unsigned kflags = IO_URING_READ_ONCE(*ring_.sq.kflags);
  if ((urgent_ && io_uring_sq_ready(&ring_) != 0) || (kflags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0) {
    enter(false);
    if ((kflags & IORING_SQ_TASKRUN) != 0) settle_taskrun_hint();
  }
  return reap();
}

// [F1] The kernel sets IORING_SQ_TASKRUN after it queues deferred work
// onto an empty list, in a separate step, and clears it only when it runs
// that list. If our entry ran the list between the two steps, the flag
// is set with nothing behind it, and stays so: entries with GETEVENTS do
// not clear it when the list is empty. Every scheduling point would then
// see "work waiting", enter, find none, and a ring-parked worker would
// never park (io.md, "A stale TASKRUN flag"). So once an entry that was
// owed the flag's work leaves it set and posts no CQE, the owner clears
// the flag itself and enters once more: that entry runs whatever was
// queued before the clear, and the first work queued after it finds the
// list empty and sets the flag again, so no work hides behind the clear.
void IoRing::settle_taskrun_hint() noexcept {
  if ((IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) == 0 || io_uring_cq_ready(&ring_) != 0) return;
  __atomic_fetch_and(ring_.sq.kflags, ~unsigned(IORING_SQ_TASKRUN), __ATOMIC_SEQ_CST);
  enter(false);
  ++stale_taskrun_hints_;
}

void IoRing::push(::parkway::detail::Task* t) noexcept {
  w_.push_ready(t);
  ++pushed_;
}

unsigned IoRing::reap() noexcept {
  unsigned head, seen = 0;
  io_uring_cqe* cqe;
  // A CQE queues at most one continuation: stop while the ready queue can
  // take it, so none spills onto the LIFO deque (but for held receives
  // that end below, cancelled or refused: rare).
  unsigned room = ready_.room();
  io_uring_for_each_cqe(&ring_, head, cqe) {
    if (pushed_ == room) break;
    ++seen;
    on_cqe(cqe);
  }
  if (seen) io_uring_cq_advance(&ring_, seen);
  // Receives held for want of a pool buffer go in again once every CQE is
  // reaped (each gave its buffer back): sooner, they would find the
  // buffers still held by CQEs waiting here and fail again. A CQ left
  // non-empty (the ready queue full) keeps events_waiting() true, so the
  // worker reaps again before it sleeps. Those a cancel, their deadline
  // or the shutdown reached end at every reap, CQ empty or not: on a
  // worker whose CQ never empties they would wait for the load to end.
  if (held_) submit_receives_held(io_uring_cq_ready(&ring_) == 0);
  // [X4] Shutdown cancels what is in flight here at the first reap that
  // finds completions after stop, not only once this worker is idle: a
  // worker whose continuations keep coming (two coroutines of this
  // runtime talking to each other) never idles, and the shutdown waited
  // on them for ever (Io.ShutdownEndsIoThatKeepsItsWorkerBusy).
  if (seen != 0) (void)refuses_new_ops();
  const unsigned pushed = pushed_;
  pushed_ = 0;
  if (pushed) w_.ready_pushed(pushed);
  return pushed;
}

void IoRing::on_cqe(const io_uring_cqe* cqe) noexcept {
  const std::uint64_t ud = cqe->user_data;
  const std::uint64_t tag = ud & kTagMask;
  switch (tag) {
    case kTagOp: {
      auto* st = reinterpret_cast<OpState*>(ud & ~kTagMask);
      int res = cqe->res;
      // A close the kernel put in its worker thread (a file with a flush
      // method: a POSIX message queue, overlayfs, NFS, FUSE) that a cancel
      // found there before it ran: the shutdown's cancel-everything, whose
      // ASYNC_CANCEL_ANY takes closes too. The descriptor is still open
      // and still ours (a cancel cannot stop a close that has begun, and
      // one that ran reports its own result, never -ECANCELED): close it
      // here, as a close still runs after that cancel (io.md).
      if (st->closes && res == -ECANCELED) [[unlikely]]
        res = ::close(st->owned_fd) == 0 ? 0 : -errno;
      // A send or receive on an O_NONBLOCK socket that the kernel handed
      // to its worker thread (a second EAGAIN after its poll fired: a
      // wake-up with no room, or bytes another reader took) is issued
      // there without MSG_DONTWAIT, and the socket's O_NONBLOCK makes it
      // fail with -EAGAIN, which it posts. Nothing moved: it is held like
      // an owned receive that found the pool empty and goes in again
      // (submit_owned_recv_again), unless a cancel, its deadline or the
      // shutdown reached it meanwhile.
      if (res == -EAGAIN && st->again_args != nullptr) [[unlikely]] {
        w_.count_io_kernel_again();
        st->again_next = held_;
        held_ = st;
        return;
      }
      if (st->owned_len != 0) [[unlikely]] {
        res = settle_owned_recv(st, res, cqe->flags);
        if (res == kNotYet) return;
      }
      st->res = res;
      st->cqe_flags = cqe->flags;
      complete(st);
      return;
    }
    case kTagCancel: {
      auto* r = reinterpret_cast<CancelRequest*>(ud & ~kTagMask);
      --cancels_;
      r->release(r);
      return;
    }
    case kTagAccept:
      // The multishot accept's last CQE ends the operation its submit
      // traced (submit_multishot_accept).
      if ((cqe->flags & IORING_CQE_F_MORE) == 0) ::parkway::detail::trace::on_io_complete(cqe->res);
      accept_cqe(reinterpret_cast<void*>(ud & kAcceptAddressMask & ~kTagMask), cqe->res, cqe->flags, *this);
      return;
    case kTagRingWait:
      armed_ = false;  // [R4] woken (or EAGAIN: the word had changed); re-armed at the next ring park
      return;
    case kTagInternal:
      --cancels_;
      return;
    default:
      return;  // kTagIgnore
  }
}

void IoRing::complete(OpState* st) noexcept {
  --ops_;
  deadlines_.erase(st);
  // An operation the kernel ran in its worker thread (an open or a Unix
  // connect that blocked) and a cancel interrupted ends with one of the
  // kernel's restart codes (ERESTARTSYS 512 .. ERESTART_RESTARTBLOCK
  // 516), which are not errnos, or with the EINTR io_uring makes of one
  // (a connect's): it was cancelled.
  if (st->res <= -512 && st->res >= -516 && st->res != -515) [[unlikely]]  // 515: ENOIOCTLCMD, no restart code
    st->res = -ECANCELED;
  if (st->res == -EINTR && (st->timed_out || st->cancel.posted.load(std::memory_order_acquire) ||
                            ops_at_cancel_ != kNoCancelYet)) [[unlikely]]
    st->res = -ECANCELED;
  // Cancelled because its deadline passed: say so.
  if (st->res == -ECANCELED && st->timed_out) st->res = -ETIMEDOUT;
  ::parkway::detail::trace::on_io_complete(st->res);
  scope_remove(st, 0);
  scope_remove(st, 1);
  group_scope_remove(st);
  const std::uintptr_t was = st->phase.exchange(kFired, std::memory_order_acq_rel);
  if (was == kWaiting) {
    push(&st->cont);
  } else if (was == kOrphaned) [[unlikely]] {
    // [O2] Its awaiter may still be posting a cancel to this ring: this
    // worker must not leave (and free the ring) before that post is done.
    // A yield after a few spins: the poster may have lost its CPU.
    for (unsigned spins = 0; st->orphan_posting.load(std::memory_order_acquire); ++spins)
      if (spins < 64) ::parkway::detail::cpu_relax();
      else sched_yield();
  }
  st->kernel_done.done();  // an orphaning awaiter waits for this
  unref(st);               // the kernel's reference
}

// A receive on a socket waits its turn behind the completions already
// waiting for this worker (io.md, "Receives wait their turn"). Without
// the flag, a receive whose bytes have already arrived completes while
// its SQE is submitted, and its CQE goes ahead of the deferred
// completions of receives that were waiting before it; with it, the
// kernel arms the poll first, finds the bytes there and queues the
// completion behind theirs. submit() decides (OpState::recv_polls_first):
// not with io_recv_poll_first = false, not with MSG_DONTWAIT (the kernel
// would fail it with EAGAIN before looking at the socket), not with
// MSG_OOB (the poll waits for ordinary bytes: with no urgent byte the
// receive would wait for them instead of failing with EINVAL), not on a
// descriptor not known to be a socket.
void IoRing::queue_behind(io_uring_sqe* sqe) noexcept { sqe->ioprio |= IORING_RECVSEND_POLL_FIRST; }

// st's owned receive, into whichever pool buffer the kernel picks.
void IoRing::prep_pool_recv(io_uring_sqe* sqe, const OpState* st) noexcept {
  io_uring_prep_recv(sqe, st->owned_fd, nullptr, st->owned_len, int(st->owned_flags));
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = RecvPool::kGroup;
}

int IoRing::prep_owned_recv(io_uring_sqe* sqe, OpState* st) noexcept {
  const Options& o = w_.runtime().opts;
  if (o.io_recv_pool_buffers != 0 && pool_.ensure(&ring_, o.io_recv_pool_buffers, o.io_recv_pool_buffer_bytes)) {
    prep_pool_recv(sqe, st);
    return 0;
  }
  // No pool: the receive takes its block before it waits.
  st->received = new (std::nothrow) std::byte[st->owned_len];
  if (!st->received) return -ENOMEM;
  io_uring_prep_recv(sqe, st->owned_fd, st->received, st->owned_len, int(st->owned_flags));
  return 0;
}

int IoRing::settle_owned_recv(OpState* st, int res, std::uint32_t flags) noexcept {
  // The kernel clamps the count to the buffer's: res <= owned_len
  // (recv_owned refuses MSG_TRUNC, which reports more). Clamped here too,
  // so that no count can make a copy or the result pass its block.
  res = std::min(res, int(st->owned_len));
  if ((flags & IORING_CQE_F_BUFFER) != 0) {
    const unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
    if (res > 0) {
      res = std::min(res, int(pool_.buffer_bytes()));
      st->received = new (std::nothrow) std::byte[st->owned_len];
      if (st->received)
        std::memcpy(st->received, pool_.buffer(bid), std::size_t(res));
      else
        res = -ENOMEM;  // the bytes are gone from the stream: the caller must close it
    }
    pool_.give_back(bid);
    return res;
  }
  // held until the CQ is drained (submit_receives_held); -EAGAIN: a
  // receive the kernel's worker thread tried on the O_NONBLOCK socket
  // (on_cqe), with or without the pool
  if ((res == -ENOBUFS && !st->received) || (res == -EAGAIN && (st->owned_flags & MSG_DONTWAIT) == 0)) {
    if (res == -EAGAIN) w_.count_io_kernel_again();
    else w_.count_io_recv_pool_empty();
    st->again_next = held_;
    held_ = st;
    return kNotYet;
  }
  if (res <= 0 && st->received) {  // a block taken up front that holds nothing
    delete[] st->received;
    st->received = nullptr;
  }
  return res;
}

bool IoRing::held_recv_cancelled(const OpState* st) const noexcept {
  return st->timed_out || st->cancel.posted.load(std::memory_order_acquire) || ops_at_cancel_ != kNoCancelYet;
}

void IoRing::submit_receives_held(bool cq_drained) noexcept {
  OpState* st = std::exchange(held_, nullptr);
  OpState** still = &held_;  // those still held, in their order
  while (st) {
    OpState* next = std::exchange(st->again_next, nullptr);
    const int rc = cq_drained              ? submit_owned_recv_again(st)
                   : held_recv_cancelled(st) ? -ECANCELED  // complete() makes it ETIMEDOUT if its deadline passed
                                             : -EBUSY;     // not yet: the CQ still holds buffers
    if (rc == -EBUSY) {  // no room in the SQ, or the CQ not drained: held for the next drained reap
      *still = st;
      still = &st->again_next;
    } else if (rc != kNotYet) {
      st->res = rc;
      st->cqe_flags = 0;
      complete(st);
    }
    st = next;
  }
}

// The pool was empty when the kernel tried the receive (it takes a
// buffer as it tries the socket: at once, or when bytes arrive for a
// receive that polls first): completions not yet reaped hold the
// buffers. Once the reaps have drained the CQ, each of which gave its
// buffer back, the receive goes in again (submit_receives_held), under
// the same user_data, still counted in flight and in the deadline heap. Its
// descriptor is still open: a Socket's close waits for the
// operations in its scope (close_scope), and a raw descriptor must stay
// open until its co_await returns. A cancel already on its way would
// look for the receive in the kernel while it is not there: a posted
// cancel request, a deadline that passed (its cancel went in with
// expire_deadlines) or the shutdown's cancel-everything end it here
// instead (io.md, "Receives that take memory when bytes arrive").
int IoRing::submit_owned_recv_again(OpState* st) noexcept {
  if (held_recv_cancelled(st)) return -ECANCELED;  // complete() makes it ETIMEDOUT if its deadline passed
  // No reap from inside this one. A kernel that takes no submissions
  // while its CQ overflows leaves the SQ full: EBUSY, and the receive
  // stays held for the next reap that drains the CQ (a full SQ is no
  // outcome of the receive's: its caller never sees it).
  io_uring_sqe* sqe = get_sqe_without_reap();
  if (!sqe) return -EBUSY;
  if (const OpArgs* a = st->again_args) {  // a send or receive that ended with -EAGAIN (on_cqe)
    io_uring_prep_rw(a->opcode, sqe, a->fd, reinterpret_cast<const void*>(a->addr), a->len, a->off);
    sqe->rw_flags = int(a->op_flags);
    sqe->flags |= a->sqe_flags;  // as submit() made it
    if (a->addr2) sqe->addr2 = a->addr2;
  } else if (st->received) {  // an owned receive without the pool that ended with -EAGAIN
    io_uring_prep_recv(sqe, st->owned_fd, st->received, st->owned_len, int(st->owned_flags));
  } else {
    prep_pool_recv(sqe, st);
  }
  if (st->recv_polls_first) queue_behind(sqe);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(st) | kTagOp);
  ++submitted_;
  return kNotYet;
}

void IoRing::park(ParkWord& pw, bool timed) noexcept {
  // Nothing is reaped between the worker's recheck [P2] and the sleep: a
  // continuation queued here would wait in the ready queue for the next
  // CQE or wake (a single one wakes no sibling).
  if (!armed_) {  // [R2]
    if (io_uring_sqe* sqe = get_sqe_without_reap()) {
      if (mode_ == WakeMode::kFutexOp)
        prep_futex_wait(sqe, &pw.word, ::parkway::detail::kParked);
      else
        io_uring_prep_read(sqe, pw.doorbell.load(std::memory_order_relaxed), &doorbell_buf_, sizeof doorbell_buf_, 0);
      io_uring_sqe_set_data64(sqe, kTagRingWait);
      armed_ = true;
    } else {
      timed = true;  // no SQE for the wait (the kernel refused the flush): do not sleep past 1 ms
    }
  }
  // A receive still held at a park found no SQE when the CQ was drained
  // (submit_receives_held): no completion may come to retry it.
  if (held_) timed = true;
  w_.count_ring_park();
  // Sleep no later than the earliest deadline: its operation is cancelled
  // at [R4]'s poll.
  std::int64_t wait_ns = timed ? kMaxWaitNs : -1;
  if (!deadlines_.empty()) {
    const std::int64_t until = std::max<std::int64_t>(deadlines_.earliest() - now_ns(), 0);
    if (wait_ns < 0 || until < wait_ns) wait_ns = until;
  }
  enter(true, wait_ns);  // [R3]; the worker reaps [R4] once it is off the idle list
}

}  // namespace parkway::io::detail
