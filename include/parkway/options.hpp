// parkway/options.hpp -- construction options of a parkway::Runtime.
#pragma once

#include <cstddef>

#include "parkway/export.hpp"

namespace parkway {

// Number of CPUs this process may run on (sched_getaffinity), at least 1.
PARKWAY_API unsigned online_cpus() noexcept;

struct Options {
  // Worker threads. Valid: 1..4096. Default: the CPUs this process may use.
  unsigned workers = online_cpus();

  // Rounds of stealing a worker tries before it parks (each round visits
  // every other worker once and the injection queue). Valid: 1..1000000.
  unsigned search_rounds = 32;

  // Guard the shared injection queue's multi-CAS operations with
  // priority-tag transactions, which make them starvation-free (every
  // submission's retries stay bounded under contention). The queue is
  // lock-free and correct either way; false is for ablation experiments
  // (docs/design/priority-tags.md).
  bool priority_tags = true;

  // Worker thread names are "<name>-w<index>" (Linux limits the whole name
  // to 15 characters). Valid: 1..8 bytes (UTF-8 counts bytes), no '/'. The runtime keeps
  // its own copy (Runtime::options().name points at it).
  const char* name = "parkway";

  // Stack size of each worker thread, in bytes: at least this much (glibc
  // may hand a thread a cached stack up to a few times larger). 0: the
  // system's default for new threads (from RLIMIT_STACK, usually 8 MiB).
  // Deep recursion inside tasks, or waits that run other tasks on top of
  // their own frames, may need more. Valid: 0, or 64 KiB..1 GiB (rounded
  // up to whole pages).
  std::size_t stack_size = 0;

  // Each worker's io_uring ring (parkway/io.hpp), made on the worker's
  // first I/O operation: submission queue entries (valid: 1..32768) and
  // completion queue entries (0: four times io_sq_entries, at most
  // 65536; else io_sq_entries..65536). A full SQ is flushed and retried; a CQ that
  // overflows is drained by the kernel's backlog, so these bound batching,
  // not how many operations may be in flight.
  unsigned io_sq_entries = 256;
  unsigned io_cq_entries = 0;
  // A send or sendmsg first tries a non-blocking system call at its
  // co_await; only if the socket has no room (EAGAIN), or the worker has
  // done 64 operations at their co_await since its last scheduling point
  // (docs/design/io.md), does it go to the ring. Done, the coroutine goes
  // on without a trip through the ring's completion queue
  // (docs/design/io.md, "Sends go out at the co_await").
  // false: every send goes through the ring, which costs fewer kernel
  // entries (pure I/O runs faster) but lets a reply wait a few tasks on
  // a worker that also computes.
  bool io_send_first = true;
  // A read at an offset (File::read_at, io::read, io::readv with an
  // offset of 0 or more) first tries preadv2(RWF_NOWAIT) at its co_await:
  // data in the page cache is copied there and then, without a trip
  // through the ring (docs/design/io.md, "Reads from the page cache").
  // Only if that cannot finish without waiting for a device (EAGAIN), or
  // fails, does the read go to the ring. false: every read on the ring.
  bool io_read_first = true;
  // A receive on an io::Socket (recv, recv_owned) whose bytes have
  // already arrived completes behind the completions already waiting for
  // its worker, not ahead of them: its SQE asks the kernel to poll first
  // (IORING_RECVSEND_POLL_FIRST). So connections are served in the order
  // their bytes arrived, and a server's busiest connections do not keep
  // the others waiting (docs/design/io.md, "Receives wait their turn").
  // Not for receives with MSG_DONTWAIT or MSG_OOB, nor on raw descriptors. false:
  // the kernel tries such a receive at once, while submitting.
  bool io_recv_poll_first = true;
  // The pool each worker's ring keeps for io::recv_owned (receives that
  // hold no memory while they wait; the kernel picks a buffer when bytes
  // arrive and the worker copies them out when it reaps): how many
  // buffers (0: no pool, every owned receive allocates its block before
  // it waits; else a power of two up to 32768) of how many bytes
  // (64..1 MiB; an owned receive gets at most that many at once). Made
  // on the first owned receive; its pages are touched as the kernel
  // fills them.
  unsigned io_recv_pool_buffers = 128;
  unsigned io_recv_pool_buffer_bytes = 4096;

  // The time slice, in microseconds, each worker thread asks the kernel's
  // fair scheduler for (sched_setattr's sched_runtime; EEVDF honours it
  // from Linux 6.12, older kernels ignore it). Shorter than the kernel's
  // default (about 0.7 ms times 1 + log2(CPUs)), it lets a worker that a
  // wake or a completion makes runnable on a busy CPU take it at once,
  // instead of waiting for the thread there to sleep or use up its slice.
  // A worker with a ring also ends its slice itself: after this long
  // without sleeping it yields the CPU between two tasks, so a thread
  // waiting for that CPU is not kept waiting until the kernel's timer tick
  // (docs/design/parking.md, "The kernel's time slice", "Ending the slice
  // at a task boundary"). 0: the kernel's default, and no yields. Valid:
  // 0, or 100..100000. The environment variable PARKWAY_WORKER_SLICE_US
  // overrides it (decimal digits only: any other value, or one out of
  // range, makes the Runtime constructor throw std::invalid_argument).
  unsigned worker_slice_us = 300;
};

// Bounds of Options::stack_size (other than 0).
inline constexpr std::size_t kMinStackSize = std::size_t(64) << 10;
inline constexpr std::size_t kMaxStackSize = std::size_t(1) << 30;

// Upper bound on Options::workers.
inline constexpr unsigned kMaxWorkers = 4096;

}  // namespace parkway
