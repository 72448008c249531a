// parkway/stats.hpp -- scheduler counters, per worker and in total.
#pragma once

#include <cstdint>
#include <vector>

namespace parkway {

struct WorkerStats {
  std::uint64_t spawned = 0;       // tasks pushed to this worker's deque
  std::uint64_t executed = 0;      // tasks this worker ran
  std::uint64_t steals = 0;        // tasks taken from other workers' deques, and ready I/O
                                   // continuations taken from their ready queues
  std::uint64_t failed_steals = 0; // steal attempts that found nothing or lost a race
  std::uint64_t injected = 0;      // tasks taken from the injection queue
  std::uint64_t parks = 0;         // times this worker went to sleep (on its futex word, or inside
                                   // its ring: those are also counted in ring_parks)
  std::uint64_t wakeups = 0;       // times this worker woke another (unpark of an idle worker)
  std::uint64_t waiter_wakeups = 0;  // times a task this worker finished woke the thread sleeping
                                     // in a wait for it (TaskGroup::wait, Future::get,
                                     // Runtime::run; a worker in a helping wait or an outside
                                     // thread): FUTEX_WAKEs, not tokens left for a waiter still awake
  std::uint64_t steal_fences = 0;  // steal sessions in which this worker, as the thief, called
                                   // membarrier(2): the victim was not fencing its pops
                                   // (docs/design/deque.md, "The steal gate")
  std::uint64_t park_fences = 0;   // times this worker called membarrier(2) before a parking
                                   // recheck (going to sleep, or handing on the search)
                                   // because another worker was busy (docs/design/parking.md)
  std::uint64_t io_ops = 0;        // I/O operations this worker submitted to its ring (parkway/io.hpp)
  std::uint64_t ring_parks = 0;    // times it slept inside its ring (I/O in flight; docs/design/io.md)
  std::uint64_t io_sent_now = 0;   // sends done by a system call at the co_await, not on the ring
                                   // (Options::io_send_first)
  std::uint64_t io_read_now = 0;   // reads done from the page cache at the co_await, not on the ring
                                   // (Options::io_read_first)
  std::uint64_t io_sendfile = 0;   // sendfile(2) calls of io::send_file that sent bytes (the file's
                                   // pages went to the socket without a copy through user memory)
  std::uint64_t io_recv_pool_empty = 0;  // owned receives (io::recv_owned) that found the ring's buffer
                                         // pool empty, held to be submitted again
  std::uint64_t slice_yields = 0;  // times it gave up its CPU at the end of its kernel slice, between
                                   // two tasks (Options::worker_slice_us; docs/design/parking.md)
  std::uint64_t io_kernel_again = 0;  // sends and receives the kernel's worker thread ended with
                                      // EAGAIN on the non-blocking socket, submitted again
                                      // (docs/design/io.md, "EAGAIN from the kernel's worker thread")

  WorkerStats& operator+=(const WorkerStats& o) noexcept {
    spawned += o.spawned; executed += o.executed; steals += o.steals;
    failed_steals += o.failed_steals; injected += o.injected;
    parks += o.parks; wakeups += o.wakeups; waiter_wakeups += o.waiter_wakeups;
    steal_fences += o.steal_fences;
    park_fences += o.park_fences;
    io_ops += o.io_ops;
    ring_parks += o.ring_parks;
    io_sent_now += o.io_sent_now;
    io_read_now += o.io_read_now;
    io_sendfile += o.io_sendfile;
    io_recv_pool_empty += o.io_recv_pool_empty;
    slice_yields += o.slice_yields;
    io_kernel_again += o.io_kernel_again;
    return *this;
  }
};

struct Stats {
  std::vector<WorkerStats> workers;  // index = worker index
  WorkerStats total;                 // sum over workers
  std::uint64_t submitted = 0;       // tasks accepted from outside the pool
  std::uint64_t external_wakeups = 0;  // idle workers woken by non-worker threads (submissions, and
                                       // shutdown's wakes of the workers to leave)
};

// Whether the optional sched_ext co-scheduler (`parkway sched load`,
// docs/design/sched-ext.md) knows this runtime's workers:
// Runtime::sched_ext_status().
struct SchedExtStatus {
  unsigned workers = 0;     // the runtime's workers
  unsigned registered = 0;  // of those, registered with the scheduler now
  const char* reason = "";  // "" when every started worker is registered;
                            // otherwise why not, as a fixed sentence
};

}  // namespace parkway
