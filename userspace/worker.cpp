// worker.cpp -- the scheduling loop of one worker (protocol: parking.hpp).
#include "worker.hpp"

#include <cerrno>
#include <ctime>
#include <new>
#include <string>
#include <system_error>

#include "io/ring.hpp"
#include "parker.hpp"
#include "probes.hpp"
#include "runtime_impl.hpp"

namespace parkway::detail {

namespace {
constexpr std::size_t kStealBatch = 32;   // most tasks one steal moves
constexpr std::size_t kInjectBatch = 32;  // most tasks one injection take moves
constexpr std::uint32_t kInjectEvery = 61;  // check outside work every N local tasks

bool never(void*) noexcept { return false; }
}  // namespace

WorkerStats WorkerCounters::snapshot() const noexcept {
  WorkerStats s;
  s.spawned = spawned.load(std::memory_order_relaxed);
  s.executed = executed.load(std::memory_order_relaxed);
  s.steals = steals.load(std::memory_order_relaxed);
  s.failed_steals = failed_steals.load(std::memory_order_relaxed);
  s.injected = injected.load(std::memory_order_relaxed);
  s.parks = parks.load(std::memory_order_relaxed);
  s.wakeups = wakeups.load(std::memory_order_relaxed);
  s.waiter_wakeups = waiter_wakeups.load(std::memory_order_relaxed);
  s.steal_fences = steal_fences.load(std::memory_order_relaxed);
  s.park_fences = park_fences.load(std::memory_order_relaxed);
  s.io_ops = io_ops.load(std::memory_order_relaxed);
  s.ring_parks = ring_parks.load(std::memory_order_relaxed);
  s.io_sent_now = io_sent_now.load(std::memory_order_relaxed);
  s.io_read_now = io_read_now.load(std::memory_order_relaxed);
  s.io_sendfile = io_sendfile.load(std::memory_order_relaxed);
  s.io_recv_pool_empty = io_recv_pool_empty.load(std::memory_order_relaxed);
  s.slice_yields = slice_yields.load(std::memory_order_relaxed);
  s.io_kernel_again = io_kernel_again.load(std::memory_order_relaxed);
  return s;
}

Worker::Worker(RuntimeImpl& rt, unsigned index)
    : rt_(rt),
      parking_(rt.parking),
      index_(index),
      victims_(rt.n, 0x9E3779B97F4A7C15ull * (index + 1)) {}

Worker::~Worker() = default;

io::detail::IoRing* Worker::io_ring(int* err) noexcept {
  if (!io_) [[unlikely]] {
    auto* r = new (std::nothrow) io::detail::IoRing(*this, err);
    if (!r) {
      *err = -ENOMEM;
      return nullptr;
    }
    if (*err < 0) {
      delete r;
      return nullptr;
    }
    io_.reset(r);
    slow_run_ = true;
  }
  return io_.get();
}

io::detail::IoRing& Worker::io_ring() {
  int err = 0;
  io::detail::IoRing* r = io_ring(&err);
  if (!r) throw std::system_error(-err, std::generic_category(), "parkway::io: the ring of worker " + std::to_string(index_));
  return *r;
}

bool Worker::poll_io() noexcept { return io_ && io_->poll() != 0; }

// A ring cancels everything only once stop is set, so stop alone says it.
bool Worker::io_cancelling_everything() const noexcept { return rt_.stop.load(std::memory_order_relaxed); }

void Worker::cancel_io_if_stopping() noexcept {
  if (io_ && rt_.stop.load(std::memory_order_relaxed)) [[unlikely]]
    io_->cancel_everything();
}

void Worker::between_tasks() noexcept {
  io_now_streak_ = 0;
  io_->between_tasks();
  // [Y1] Not while counted as a searcher (park() can hand off to us, and
  // the reap before a ready batch comes before its found_work()): producers
  // that see a searcher wake nobody, and the count must not sleep in the
  // run queue.
  if (slice_.due() && !searching_) [[unlikely]] {
    WorkerCounters::bump(counters_.slice_yields);
    PW_PROBE1(slice_yield, int(index_));
    slice_.yield_now();
  }
}

bool Worker::run_own_slow() noexcept {
  if (io_) {
    between_tasks();
    // The ready continuations and the own deque's newest task take turns,
    // so neither a stream of completions nor a wait's own tasks starve the
    // other.
    if (!ready_ran_last_ && run_ready_batch() != 0) {
      ready_ran_last_ = true;
      return true;
    }
    ready_ran_last_ = false;
  }
  std::int64_t top, bottom;
  if (Task* t = deque_.pop_unless_last(&top, &bottom)) [[likely]]  // [Q4]
    return execute(t);
  return run_own_last(top, bottom);
}

bool Worker::io_point() noexcept {
  if (!io_) [[likely]]
    return false;
  between_tasks();
  return run_ready_batch() != 0;
}

unsigned Worker::run_ready_batch() noexcept {
  unsigned ran = 0;
  for (std::uint32_t n = io_ready_.size(); n != 0; --n) {
    // A continuation that forked returns here in the child too: the rest
    // of the batch is the parent's (loop() ends the thread), and so is
    // the ring, whose completion queue between_tasks would reap.
    if (ran != 0 && rt_.forked()) [[unlikely]]
      break;
    Task* c = io_ready_.take();
    if (!c) break;  // thieves took the rest
    // A worker handed off from its park is counted as a searcher: a
    // continuation is work found, as in loop() for next_local ([S2], the
    // baton [S3]). Left counted, it kept producers from waking anyone
    // while the batch ran (Io.AHandedOffWorkerStopsSearchingBeforeItRunsAContinuation).
    publish_busy();  // back from a ring park, Searching was published
    if (searching_) [[unlikely]]
      found_work();  // may fence and wake: the work in hand, so as Busy
    if (ran != 0) between_tasks();  // between two continuations: urgent SQEs go within a few
    execute(c);
    ++ran;
  }
  return ran;
}


void Worker::main_loop() {
  tls_current = this;
  if (trace::tasks_on()) {  // every spawn and run recorded: no fast path skips it
    deque_.force_slow_pushes();
    slow_run_ = true;
  }
  park_id_ = this_thread_park_id();
  rt_.parking.set_park_id(index_, park_id_);
  rt_.sched_ext.register_worker(index_);
  slice_.start(in_fair_class() ? rt_.opts.worker_slice_us : 0);  // [Y1]
  publish(WorkerState::Busy);
  loop(&never, nullptr, /*main=*/true, /*timed=*/false);
  io_.reset();  // on this thread: the ring's owner (its operations are over: [E1])
  // Not in a forked child: the sched_ext registration is the thread's in
  // the parent, where this worker's twin still runs.
  if (!rt_.forked()) rt_.sched_ext.unregister_worker(index_);
  tls_current = nullptr;
}

void Worker::run_until(DoneFn done, void* ctx, bool timed) {
  loop(done, ctx, /*main=*/false, timed);
  // Back to the task that waited; not in a forked child, whose thread is
  // not the one registered with sched_ext (fork.md).
  if (!rt_.forked()) [[likely]]
    publish(WorkerState::Busy);
}

void Worker::publish(WorkerState s) noexcept {
  published_ = s;
  rt_.sched_ext.publish(index_, s);
}

void Worker::loop(DoneFn done, void* ctx, bool main, bool timed) {
  for (;;) {
    // In a child forked from inside a task, once that task returns here:
    // the queues are copies of the parent's, whose tasks run there; running
    // them again here would repeat their effects. The thread ends instead
    // (the process with it, if it was its only thread); a helping wait it
    // was in sleeps in block_until (runtime.cpp, "fork").
    if (rt_.forked()) [[unlikely]]
      return;
    if (done(ctx)) {
      if (searching_) found_work();
      return;
    }
    io_point();  // completions reaped here run before the next local task
    if (Task* t = next_local()) {
      // park() can return with this worker counted as a searcher (a waker
      // handed off to it); if the periodic injection check then gave it a
      // task, it found work like a search would have ([S2], [S3]). Left
      // counted, it kept producers from waking anyone while it ran.
      publish_busy();
      if (searching_) [[unlikely]] found_work();
      execute(t);
      continue;
    }
    if (io_) {
      // Ready continuations: io_point runs them, and reaps only once they
      // are taken (polling here after each one cost a system call each).
      if (io_ready_.maybe_nonempty()) continue;
      if (poll_io()) continue;  // completions became ready continuations
    }
    if (Task* t = search(done, ctx)) {
      execute(t);
      continue;
    }
    if (done(ctx)) continue;  // the search stopped because done: return, not park
    if (main && rt_.stop.load(std::memory_order_acquire)) {  // [E1]
      // Shutting down: leave only when nothing is left anywhere we can see
      // and no other worker runs a task (it might spawn more: leaving
      // beside it stranded a child its parent blocked on, and serialised
      // a fan-out in flight). Otherwise park like any idle worker: the
      // last one to go quiet comes back here (parking.md, "Shutdown").
      if (searching_) found_work();
      const std::uint64_t seen = rt_.parking.snapshot();  // [E2]
      Task* t = take_injected();
      if (!t) t = steal_round();
      if (t) {
        publish_busy();
        execute(t);
        continue;
      }
      if (any_work_visible()) {
        cpu_relax();
        continue;
      }
      // I/O in flight is work that has not finished: cancel it (its
      // awaiters resume with ECANCELED) and park in the ring until the
      // last completion is reaped; only then may this worker leave.
      if (io_ && io_->ops() != 0) {
        io_->cancel_everything();
      } else if (rt_.parking.try_leave(seen)) {  // [E3]
        wake_one();  // hand the exit on to a quiet worker
        return;
      }
    }
    park(done, ctx, main, timed);
  }
}

void Worker::wake_one() noexcept {
  trace::on_wake_begin(nullptr);
  int w = rt_.parking.wake_one();
  if (w >= 0) {
    WorkerCounters::bump(counters_.wakeups);
    PW_PROBE2(wake, int(index_), w);
  }
}

Task* Worker::next_local() noexcept {
  if (++tick_ == kInjectEvery) {  // fairness: outside work is not starved by a busy deque
    tick_ = 0;
    if (Task* t = take_injected()) return t;
  }
  return deque_.pop();  // [Q4]
}

Task* Worker::take_injected() noexcept {
  if (!rt_.injection.maybe_nonempty()) return nullptr;
  std::size_t want = rt_.injection.size_hint() / rt_.n + 1;
  if (want > kInjectBatch) want = kInjectBatch;
  std::size_t n = 0;
  Task* first = rt_.injection.pop_batch(want, &n);  // [Q3]
  if (!first) return nullptr;
  PW_CHAOS();  // a batch taken but not yet in the deque: invisible to a recheck
  for (Task* t = first->next; t;) {
    Task* next = t->next;
    deque_.push(t);
    t = next;
  }
  if (n > 1) after_batch_push();
  WorkerCounters::bump(counters_.injected, n);
  PW_PROBE2(inject_take, int(index_), n);
  return first;
}

Task* Worker::steal_round() noexcept {
  const unsigned n = rt_.n;
  unsigned v = victims_.begin();
  for (unsigned k = 0; k < n; ++k, v = victims_.next()) {
    if (v == index_) continue;
    std::size_t taken;
    bool lost, paid_fence;
    Task* t = deque_.steal_batch(rt_.workers[v]->deque(), kStealBatch, &taken, &lost, &paid_fence);  // [Q5]
    if (paid_fence) [[unlikely]] {
      WorkerCounters::bump(counters_.steal_fences);
      PW_PROBE2(steal_fence, int(index_), int(v));
    }
    if (t) {
      if (taken > 1) after_batch_push();  // the rest of the batch went into our deque
      WorkerCounters::bump(counters_.steals, taken);
      PW_PROBE3(steal, int(index_), int(v), taken);
      return t;
    }
    // Then the victim's oldest ready I/O continuation (one CAS, no steal
    // session): it may wait behind a long task there. Not first: a thief
    // woken for a spawn then took the continuation the victim was about
    // to run and left it the spawned task, and a stream of compute tasks
    // moved between the workers (io.md, "Ready continuations").
    if (Task* c = rt_.workers[v]->io_ready_.take()) {
      WorkerCounters::bump(counters_.steals);
      PW_PROBE3(steal, int(index_), int(v), PW_PROBE_CONST(decltype(taken){1}));
      return c;
    }
    WorkerCounters::bump(counters_.failed_steals);
  }
  return nullptr;
}

Task* Worker::search(DoneFn done, void* ctx) noexcept {
  if (!searching_) searching_ = rt_.parking.start_searching();  // [S1]
  if (!searching_) {  // over the searcher cap: only the injection queue, then park
    // A thief to the sched_ext scheduler all the same: finding nothing, it
    // publishes Searching, not its last task's Busy, before it parks (a
    // worker published Busy is promoted when preempted and counted as a
    // busy sibling the searchers yield to).
    Task* t = take_injected();
    publish(t ? WorkerState::Busy : WorkerState::Searching);
    return t;
  }
  PW_PROBE1(search_begin, int(index_));
  publish(WorkerState::Searching);
  const unsigned rounds = rt_.opts.search_rounds;
  for (unsigned r = 0; r < rounds; ++r) {
    Task* t = nullptr;
    if (io_) {  // a completion while searching
      io_->poll();
      t = io_ready_.take();
    }
    if (!t) t = take_injected();
    if (!t) t = steal_round();
    if (t) {
      // Busy first: found_work() may pay a membarrier and wake a sleeper
      // (a futex call, the idle list's lock), with the task in hand.
      publish(WorkerState::Busy);
      found_work();
      PW_PROBE2(search_end, int(index_), PW_PROBE_CONST(1));
      return t;
    }
    if (done(ctx) || rt_.stop.load(std::memory_order_relaxed)) break;
    // A worker waiting for its I/O when nobody runs a task (every worker
    // idle or searching, this one included) stops here: no worker can
    // push work to steal, its ring park wakes it for a completion as fast
    // as a search round would find it, and a submit wakes a parked worker
    // anyway. Searching on only burned the CPU (io.md, "Searching with
    // I/O in flight").
    if (io_ && io_->ops() != 0 && rt_.parking.nobody_running(unsigned(rt_.workers.size()))) break;
    for (unsigned i = 0, spins = 1u << (r < 3 ? r : 3); i < spins; ++i) cpu_relax();
  }
  PW_PROBE2(search_end, int(index_), PW_PROBE_CONST(0));
  return nullptr;  // still counted as a searcher; park() stops that
}

// The last searcher that finds work wakes the next one, if there is more
// work to find ([S2], then the recheck [S3]; parking.md "baton").
void Worker::found_work() noexcept {
  searching_ = false;
  Parking::Baton b = rt_.parking.stop_searching();  // [S2]
  PW_CHAOS();
  if (b == Parking::Baton::kNone) return;
  // The heavy side of [N1], unless every other worker is idle (then none
  // can push behind a light fence); if it fails, the recheck proves
  // nothing: wake.
  if ((b == Parking::Baton::kFenced && !others_push_fenced() && !paid_park_fence()) || any_work_visible())
    wake_one();  // [S3] baton recheck, then [W1..W5]
}

bool Worker::paid_park_fence() noexcept {
  if (asymmetric_fence_on()) {  // else heavy_fence() makes no system call
    WorkerCounters::bump(counters_.park_fences);
    PW_PROBE1(park_fence, int(index_));
  }
  return heavy_fence();
}

bool Worker::others_push_fenced() const noexcept {
  for (const auto& w : rt_.workers)
    if (w.get() != this && !w->deque_.pushes_fenced()) return false;
  return true;
}

bool Worker::any_work_visible() const noexcept {
  if (rt_.injection.maybe_nonempty()) return true;
  for (const auto& w : rt_.workers)
    if (w->deque_.maybe_nonempty() || w->io_ready_.maybe_nonempty()) return true;
  return false;
}

void Worker::park(DoneFn done, void* ctx, bool main, bool timed) noexcept {
  ParkWord& pw = park_word(park_id_);
  // With I/O in flight (or the ring's own wait armed) the worker sleeps
  // inside its ring, where a completion wakes it too (io.md). Only this
  // thread changes that state, so it holds until the sleep.
  io::detail::IoRing* ring = io_ && io_->must_park_in_ring() ? io_.get() : nullptr;
  PW_CHAOS();
  if (pw.announce(ring ? ring->parked_value() : kParked) != kAwake) return;  // [P0] a token was waiting: look again
  // Our own pushes count as fenced from here (others_push_fenced): a worker
  // back from parking pays one full fence at its first push, which turns
  // the fence off again if everyone is busy ([D2]).
  if (!deque_.fenced()) deque_.fence_on();  // [D1]
  PW_CHAOS();
  bool all_quiet = false;
  const bool all_idle = rt_.parking.announce_idle(index_, searching_, main, &all_quiet);  // [P1]
  searching_ = false;
  PW_CHAOS();
  // The heavy side of [N1], unless every worker is idle now (none can
  // push behind a light fence). Should it fail, a producer's push may be
  // invisible to the recheck: sleep timed, so it is found within 1 ms.
  if (!all_idle && !others_push_fenced() && !paid_park_fence()) [[unlikely]] timed = true;
  // [P2] recheck, ordered after [P1]'s seq_cst RMW. stop counts only for
  // the main loop, and only once every worker is quiet ([P1] made Q == N):
  // then this worker goes back to leave ([E1]). Until then it sleeps; a
  // producer's wake or the next quiet worker's exit wakes it. A helping
  // wait (run_until) cannot leave, so it sleeps until its completer wakes
  // it. (Looking again on stop made such a waiter spin through search and
  // park, a membarrier each time, for as long as its task ran after
  // shutdown began.)
  // [R1]: and, parking in the ring, its completions and cancel requests.
  // Shutdown does not send a worker with I/O in flight back to leave: it
  // sleeps in the ring until its cancelled operations complete. One whose
  // ring holds only its own armed wait goes to leave like any other (the
  // last quiet worker slept there for ever when this tested the ring).
  if (done(ctx) || (main && all_quiet && !(ring && ring->ops() != 0) && rt_.stop.load(std::memory_order_seq_cst)) ||
      any_work_visible() ||
      (ring && ring->events_waiting())) {
    searching_ = rt_.parking.withdraw(index_);  // [P3a, P3b]
    if (searching_) PW_PROBE2(withdrawn, int(index_), park_id_);
    pw.cancel();                                // [P3c]
    return;
  }
  WorkerCounters::bump(counters_.parks);
  PW_PROBE2(park, int(index_), park_id_);
  publish(WorkerState::Parked);
  PW_CHAOS();
  std::uint32_t token;
  if (ring) {
    // Shutting down: I/O nobody will complete must not keep this worker
    // (or, in a helping wait, the task it serves) asleep for ever.
    if (rt_.stop.load(std::memory_order_relaxed)) [[unlikely]]
      ring->cancel_everything();
    ring->park(pw, timed);  // [R2] arm, [R3] sleep in the ring, [R4] reap
    token = pw.cancel();    // [P5a]
  } else if (timed) {
    timespec ts{0, 1000000};
    token = pw.sleep_for(ts);
  } else {
    token = pw.sleep();  // [P4], [P5a]
  }
  (void)token;  // only the idle list says whether we were handed off: a
                // kHandedOff token may be stale, from a hand-off that a
                // different wake-up already accounted for
  PW_CHAOS();
  searching_ = rt_.parking.withdraw(index_);  // [P5b, P5c]
  slice_.slept();                             // [Y1] a new slice from here
  publish(WorkerState::Searching);
  PW_PROBE3(unpark, int(index_), int(searching_), park_id_);
}



}  // namespace parkway::detail
