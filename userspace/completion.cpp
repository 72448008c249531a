// completion.cpp -- waiting for a CompletionWord to reach zero.
//
// The waiter names itself in the word's high half (its ParkWord id + 1)
// before it sleeps; the task whose done() brings the count to zero reads
// that id from its own fetch_sub result and leaves a token on the ParkWord.
// Because the registration and the decrements are RMWs of one word, either
// the registration comes first (and the last done() sees it) or it sees a
// zero count (and the waiter does not sleep). Tested by tests/test_taskgroup.cpp.
#include <sched.h>

#include <ctime>

#include "chaos.hpp"
#include "futex.hpp"
#include "parker.hpp"
#include "runtime_impl.hpp"
#include "parkway/task.hpp"
#include "waiting.hpp"
#include "worker.hpp"

namespace parkway::detail {

Reg register_waiter(std::atomic<std::uint64_t>& word, std::uint32_t id) noexcept {
  const std::uint64_t me = std::uint64_t(id) + 1;
  std::uint64_t v = word.load(std::memory_order_acquire);
  for (;;) {
    if ((v & CompletionWord::kCountMask) == 0) return Reg::kDone;
    std::uint64_t who = v >> 32;
    if (who == me) return Reg::kAlready;
    if (who != 0) return Reg::kOccupied;  // a second waiter: it polls
    if (word.compare_exchange_weak(v, v | (me << 32), std::memory_order_acq_rel, std::memory_order_acquire))  // [C1]
      return Reg::kRegistered;
  }
}

bool help_own_deque(Worker* me, DoneFn done, void* ctx) noexcept {
  for (;;) {
    if (me->io_point() && done(ctx)) return true;  // a wait is a scheduling point too (io.md)
    Task* t = me->deque().pop();
    if (!t) break;
    me->execute(t);
    // The task forked and this is the child: the rest of the deque is the
    // parent's to run, and the wait sleeps in block_until (fork.md).
    if (me->runtime().forked()) [[unlikely]]
      return false;
    if (done(ctx)) return true;
  }
  return false;
}

namespace {
// block_until on the thread of a Runtime::shutdown(deadline) that drains
// `d`, in code a task it dropped runs: a joiner it resumed, or a
// coroutine unwinding from a dropped resume_on, whose Spawned handles
// wait for their children as they go. The wait may be for a task still
// in d's queues, which nobody but a drain takes (d's workers are
// blocked). So between looks it drains too; on a worker it also runs
// what of its own runtime it can take (its ready I/O continuations, its
// deque, then the injection queue), as its helping wait would; otherwise
// it sleeps for a millisecond at a time (a completer may not notify).
void block_while_draining(RuntimeImpl* d, Worker* me, std::uint32_t id, DoneFn done, void* ctx) noexcept {
  ParkWord& pw = park_word(id);
  while (!done(ctx)) {
    if (d->drain_dropping() != 0) continue;
    if (me) {
      bool ran = me->io_point() || me->run_own();
      std::size_t k = 0;
      if (!ran) {
        if (Task* t = me->runtime().injection.pop_batch(1, &k)) ran = me->execute(t);
      }
      if (ran) {
        drain_invoking();  // back in the code the drain runs (cancel.cpp, draining_here)
        continue;
      }
      // Its ring may hold a wait armed on this worker's word (io.md): a
      // plain futex wait there would be a second waiter on the word, which
      // a wake may pass by. A millisecond's sleep off the word instead; a
      // token a notifier leaves meanwhile is taken at its next park.
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
      continue;
    }
    if (pw.announce() != kAwake) continue;  // [P0] a token: look again
    if (done(ctx)) {
      pw.cancel();
      break;
    }
    timespec ts{0, 1000000};
    pw.sleep_for(ts);
  }
}
}  // namespace

void block_until(Worker* me, std::uint32_t id, DoneFn done, void* ctx, bool timed) noexcept {
  if (cancellation_active()) [[unlikely]] {
    if (RuntimeImpl* d = draining_here()) {
      block_while_draining(d, me, id, done, ctx);
      return;
    }
  }
  if (me && !me->runtime().forked()) [[likely]] {
    me->run_until(done, ctx, timed);  // helps while it waits
    trace::on_join();  // the waiting task goes on: a join in the task graph (task level)
    // Unless a task it ran forked and this is the child: run_until gave up
    // (its runtime is forked), not because done(ctx) holds.
    if (!me->runtime().forked()) [[likely]]
      return;
  }
  // A thread outside the pool, or a wait that began before a fork(), in
  // the child (fork.md): its completer is in the parent, so it sleeps for
  // good on this thread's ParkWord, but it neither spins nor runs copies
  // of the parent's tasks, nor returns as if its wait were over.
  const int who = me ? int(me->index()) : -1;
  ParkWord& pw = park_word(id);
  while (!done(ctx)) {                      // [C2]
    if (pw.announce() != kAwake) continue;  // [P0] a token: look again
    PW_CHAOS();
    if (done(ctx)) {  // [C2]
      pw.cancel();
      break;
    }
    PW_PROBE2(park, who, id);  // an outside thread (-1): named by its park id only
    if (timed) {
      timespec ts{0, 1000000};
      pw.sleep_for(ts);
    } else {
      pw.sleep();  // [P4]
    }
    PW_PROBE3(unpark, who, PW_PROBE_CONST(0), id);
  }
}

namespace {
bool is_zero_fn(void* p) noexcept { return static_cast<CompletionWord*>(p)->is_zero(); }
}  // namespace

void wake_waiter(std::uint32_t waiter) noexcept {
  const bool woke = park_word(waiter).notify();  // [C4], [G4]
  Worker* me = Worker::current();
  if (woke && me) me->count_waiter_wakeup();
  PW_PROBE3(notify, me ? int(me->index()) : -1, waiter, int(woke));
}

void CompletionWord::wait_slow() noexcept {
  Worker* me = Worker::current();
  // Fast help: run our own newest tasks without registering; only an
  // empty deque leads to the full wait.
  if (me && help_own_deque(me, &is_zero_fn, this)) return;
  const std::uint32_t id = me ? me->park_id() : this_thread_park_id();
  Reg r = register_waiter(word_, id);
  if (r == Reg::kDone) return;
  block_until(me, id, &is_zero_fn, this, /*timed=*/r == Reg::kOccupied);
  // Count is zero and nobody else touches the word until the owner spawns
  // again: drop the registration so the next wait starts clean.
  if (r == Reg::kRegistered) word_.fetch_and(kCountMask, std::memory_order_relaxed);
}

// A dropped Spawned's wait. A Spawned destroyed without a join (most
// often by the unwinding of an exception between its spawn and its
// co_await) waits for its child where it is, on the stack of the
// coroutine being destroyed. A helping wait there (wait_slow) could take
// another worker's task whose end resumes, by symmetric transfer and on
// this stack, a coroutine that had joined it: an ancestor of the one
// unwinding, which may then drop a Spawned of its own whose child waits
// for the frame beneath it. Nothing finishes (coroutines.md, "A dropped
// Spawned"). So this wait steals nothing: it runs its worker's deque,
// newest first (in the fib shape, the dropped child itself if no thief
// took it, and what the frames on this stack spawned, whose joiners are
// on this stack: they have not joined, and nothing is resumed), its
// ring's ready continuations (the dropped child's I/O, when it ran here)
// and the injection queue (the way back of a child that moved to another
// runtime). With none of these, it waits for the child, which a thief is
// running: it spins, then yields, then sleeps 50 to 800 us at a time,
// without parking (a parked worker is one a waker counts on to take new
// work); a shutdown's cancel of its ring's I/O is made here, as a park
// makes it.
// Not an isolation of the child's subtree: other shapes still hang
// (coroutines.md, "Limits"). Checked by
// Coro.ADroppedSpawnedInAThrowingTreeWaitsForItsOwn (tests/test_coro.cpp).
void CompletionWord::wait_isolated_slow() noexcept {
  Worker* me = Worker::current();
  // Off a worker (nothing to help with), in a forked child, or in the
  // code a bounded shutdown's drain runs (which must drain as it waits):
  // the ordinary wait.
  if (!me || me->runtime().forked() || (cancellation_active() && draining_here() != nullptr)) {
    wait_slow();
    return;
  }
  for (unsigned idle = 0; !is_zero();) {
    if (help_own_deque(me, &is_zero_fn, this)) return;
    if (me->runtime().forked()) [[unlikely]] {  // a task it ran forked, and this is the child
      wait_slow();
      return;
    }
    // Shutting down: the ring's operations are cancelled here, as a park
    // would (the child may wait for I/O on this ring that nobody ends).
    me->cancel_io_if_stopping();
    if (me->reap_io_now()) {  // completions: their continuations run in help_own_deque
      idle = 0;
      continue;
    }
    if (is_zero()) return;
    // One task from the injection queue: the way back of a child that
    // moved to another runtime and returns (resume_on), which only a
    // worker of this runtime takes, perhaps none but this one.
    std::size_t k = 0;
    if (Task* t = me->runtime().injection.pop_batch(1, &k)) {
      me->execute(t);
      if (me->runtime().forked()) [[unlikely]] {
        wait_slow();
        return;
      }
      idle = 0;
      continue;
    }
    // Spin, yield, then sleep from 50 us, doubling up to 800 us: a long
    // wait (a dropped child waiting for I/O on another worker) costs a
    // few hundred look-ups a second, not 20,000.
    if (++idle <= 64) {
      cpu_relax();
    } else if (idle <= 128) {
      sched_yield();
    } else {
      const unsigned shift = idle - 129 < 4 ? idle - 129 : 4;
      timespec ts{0, long(50000) << shift};
      nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace parkway::detail
