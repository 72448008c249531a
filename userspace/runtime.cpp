// runtime.cpp -- Runtime: options, start, submission, stats, shutdown.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "kernel_slice.hpp"
#include "parker.hpp"
#include "parkway/coro.hpp"
#include "probes.hpp"
#include "runtime_impl.hpp"

namespace parkway {

unsigned online_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return unsigned(n);
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? unsigned(n) : 1u;
}

namespace detail {
namespace {

void validate(const Options& o) {
  if (o.workers < 1 || o.workers > kMaxWorkers)
    throw std::invalid_argument("parkway::Options::workers must be in [1, " + std::to_string(kMaxWorkers) +
                                "], got " + std::to_string(o.workers));
  if (o.search_rounds < 1 || o.search_rounds > 1000000)
    throw std::invalid_argument("parkway::Options::search_rounds must be in [1, 1000000], got " +
                                std::to_string(o.search_rounds));
  if (o.stack_size != 0 && (o.stack_size < kMinStackSize || o.stack_size > kMaxStackSize))
    throw std::invalid_argument("parkway::Options::stack_size must be 0 (the system default) or in [" +
                                std::to_string(kMinStackSize) + ", " + std::to_string(kMaxStackSize) +
                                "] bytes, got " + std::to_string(o.stack_size));
  if (o.io_sq_entries < 1 || o.io_sq_entries > 32768)
    throw std::invalid_argument("parkway::Options::io_sq_entries must be in [1, 32768], got " +
                                std::to_string(o.io_sq_entries));
  if (o.io_cq_entries != 0 && (o.io_cq_entries < o.io_sq_entries || o.io_cq_entries > 65536))
    throw std::invalid_argument("parkway::Options::io_cq_entries must be 0 or in [io_sq_entries, 65536], got " +
                                std::to_string(o.io_cq_entries));
  if (o.io_recv_pool_buffers > 32768 || (o.io_recv_pool_buffers & (o.io_recv_pool_buffers - 1)) != 0)
    throw std::invalid_argument("parkway::Options::io_recv_pool_buffers must be 0 or a power of two up to 32768, got " +
                                std::to_string(o.io_recv_pool_buffers));
  if (o.io_recv_pool_buffer_bytes < 64 || o.io_recv_pool_buffer_bytes > (1u << 20))
    throw std::invalid_argument("parkway::Options::io_recv_pool_buffer_bytes must be in [64, 1048576], got " +
                                std::to_string(o.io_recv_pool_buffer_bytes));
  if (o.worker_slice_us != 0 && (o.worker_slice_us < 100 || o.worker_slice_us > 100000))
    throw std::invalid_argument("parkway::Options::worker_slice_us must be 0 (the kernel's default) or in [100, "
                                "100000] microseconds, got " +
                                std::to_string(o.worker_slice_us));
  if (o.name == nullptr) throw std::invalid_argument("parkway::Options::name must not be null");
  std::size_t len = std::strlen(o.name);
  if (len < 1 || len > 8 || std::strchr(o.name, '/'))
    throw std::invalid_argument(std::string("parkway::Options::name must be 1..8 bytes without '/', got \"") +
                                o.name + "\"");
}

// o, validated, with its name copied into `name` (9 bytes) and pointing there.
Options validated(const Options& o, char* name) {
  Options v = o;
  if (const char* e = std::getenv("PARKWAY_WORKER_SLICE_US"); e && *e) {
    // Decimal digits only: strtoul alone would also take leading blanks
    // and a sign, and negate what follows a '-' ("-18446744073709551316"
    // would be 300).
    char* end = nullptr;
    errno = 0;
    const unsigned long us = *e >= '0' && *e <= '9' ? std::strtoul(e, &end, 10) : 0;
    if (end == nullptr || errno != 0 || *end != '\0' || us > 100000 || (us != 0 && us < 100))
      throw std::invalid_argument(std::string("PARKWAY_WORKER_SLICE_US must be 0 or a number of microseconds in "
                                              "[100, 100000], got \"") +
                                  e + "\"");
    v.worker_slice_us = unsigned(us);
  }
  validate(v);
  std::strcpy(name, v.name);  // 1..8 bytes: checked by validate
  v.name = name;
  return v;
}

}  // namespace

// fork. A child process has only the thread that called fork(), so a
// runtime made before the fork has no workers there: work given to it would
// wait forever, and joining its threads is undefined. In the child, each
// such runtime therefore refuses submissions with RuntimeShutdown (naming
// fork), its shutdown returns at once, and its destructor leaves it
// allocated (its threads cannot be joined, and what else the child
// inherited, a TaskGroup bound to it say, may still point at it).
// default_runtime() makes a new runtime in the child on first use. The
// generation is bumped by the child handler, which runs in the child
// before fork() returns, with only that one thread alive.
// docs/design/fork.md has the invariants and the tests.
std::atomic<unsigned> g_fork_generation{0};
unsigned current_fork_generation() noexcept { return fork_generation(); }

namespace {
std::mutex g_default_mu;  // guards default-runtime creation; held across fork
// Every lock a new runtime or a first blocking wait takes is held across
// fork(), so the child gets them unlocked: the default-runtime mutex, the
// grouped-I/O registry's (every TaskGroup cancel, and so a group's first
// exception, takes it), then the ParkWord registry's (a worker starting or
// ending in another thread takes it; nothing is locked under it).
void before_fork() noexcept {
  g_default_mu.lock();
  lock_group_scopes_for_fork();  // before the registry's: that one is a leaf
  lock_park_registry_for_fork();
}
void after_fork_in_parent() noexcept {
  unlock_park_registry_after_fork();
  unlock_group_scopes_after_fork();
  g_default_mu.unlock();
}
// In the child the forking thread is outside every pool, even if it was a
// worker: its waits sleep instead of helping with copies of the parent's
// queues, and its spawns go to a runtime's injection queue.
void after_fork_in_child() noexcept {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  Worker::tls_current = nullptr;
  unlock_park_registry_after_fork();
  unlock_group_scopes_after_fork();
  g_default_mu.unlock();
}
// Registered when the library loads (not at the first runtime, which a
// fork in another thread could interrupt), so before any handler a
// program registers in main(): child handlers run in registration order,
// and a later one already sees the new generation.
// init_priority 101, the earliest a program may use: before the
// namespace-scope initialisers of a statically linked program, which may
// register handlers of their own (fork.md, "Limits").
struct ForkHandlers {
  int error;
  ForkHandlers() noexcept : error(pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child)) {}
};
__attribute__((init_priority(101))) const ForkHandlers g_fork_handlers;

std::atomic<RuntimeImpl*> g_left_behind{nullptr};  // kept reachable: not a leak
}  // namespace

void leave_behind(RuntimeImpl* impl) noexcept {
  impl->left_behind_next = g_left_behind.load(std::memory_order_relaxed);
  while (!g_left_behind.compare_exchange_weak(impl->left_behind_next, impl, std::memory_order_release,
                                              std::memory_order_relaxed)) {
  }
}

RuntimeImpl::RuntimeImpl(Runtime& rt, const Options& o)
    : owner(rt),
      opts(validated(o, name)),
      n(o.workers),
      parking(o.workers),
      injection(o.priority_tags),
      sched_ext(o.workers) {
  if (g_fork_handlers.error != 0)
    throw std::system_error(g_fork_handlers.error, std::generic_category(), "parkway: pthread_atfork (fork handlers)");
  workers.reserve(n);
  for (unsigned i = 0; i < n; ++i) workers.push_back(std::make_unique<Worker>(*this, i));
}

namespace {

// A worker thread's start: its name, then the worker loop.
struct ThreadStart {
  RuntimeImpl* rt;
  unsigned i;
};
void* worker_thread(void* p) {
  ThreadStart s = *static_cast<ThreadStart*>(p);
  delete static_cast<ThreadStart*>(p);
  char name[16];
  std::snprintf(name, sizeof name, "%s-w%u", s.rt->opts.name, s.i);
  pthread_setname_np(pthread_self(), name);
  if (s.rt->opts.worker_slice_us != 0) request_kernel_slice(s.rt->opts.worker_slice_us);
  s.rt->workers[s.i]->main_loop();
  return nullptr;
}

// Starts worker i with the stack size of `attr`; throws std::system_error.
pthread_t start_worker_thread(RuntimeImpl* rt, unsigned i, const pthread_attr_t* attr) {
  auto* s = new ThreadStart{rt, i};
  pthread_t th;
  int err = pthread_create(&th, attr, &worker_thread, s);
  if (err != 0) {
    delete s;
    throw std::system_error(err, std::generic_category(), "pthread_create");
  }
  return th;
}

}  // namespace

void RuntimeImpl::start() {
  init_asymmetric_fence();  // decided before the first worker of the process runs
  threads.reserve(n);
  pthread_attr_t attr;
  pthread_attr_t* use_attr = nullptr;  // the system default stack
  if (opts.stack_size != 0) {
    const long page = sysconf(_SC_PAGESIZE);
    const std::size_t pg = page > 0 ? std::size_t(page) : 4096;
    const std::size_t bytes = (opts.stack_size + pg - 1) / pg * pg;
    if (int err = pthread_attr_init(&attr); err != 0)
      throw std::system_error(err, std::generic_category(), "parkway: pthread_attr_init");
    if (int err = pthread_attr_setstacksize(&attr, bytes); err != 0) {
      pthread_attr_destroy(&attr);
      throw std::system_error(err, std::generic_category(),
                              "parkway: Options::stack_size " + std::to_string(opts.stack_size) +
                                  " was refused by pthread_attr_setstacksize");
    }
    use_attr = &attr;
  }
  try {
    for (unsigned i = 0; i < n; ++i) threads.push_back(start_worker_thread(this, i, use_attr));
  } catch (...) {
    if (use_attr) pthread_attr_destroy(use_attr);
    // The workers that never started count as gone, else the started ones
    // would wait for them to go quiet; then stop and join those.
    const std::size_t started = threads.size();
    parking.never_started(n - unsigned(started));
    shutdown();
    try {
      throw;  // as it was; a std::system_error gains the thread's name
    } catch (const std::system_error& e) {
      char what[128];
      std::snprintf(what, sizeof what,
                    "parkway: cannot create worker thread %s-w%zu (%zu of %u workers had started; they were stopped)",
                    opts.name, started, started, n);
      throw std::system_error(e.code(), what);
    }
  }
  if (use_attr) pthread_attr_destroy(use_attr);
}

void RuntimeImpl::inject(Task* t) {
  if (forked()) [[unlikely]]
    throw RuntimeShutdown(
        "parkway: this runtime was made before fork(); its workers exist only in the parent process, so the "
        "child cannot give it work (make a new Runtime in the child); the task was not accepted");
  // [I1] Announce the push before checking `closing`; shutdown sets
  // `closing` and then waits for `injecting` to drain (a Dekker pair), so
  // either we see closing and refuse, or shutdown waits for our push.
  injecting.fetch_add(1, std::memory_order_seq_cst);
  if (closing.load(std::memory_order_seq_cst)) {
    injecting.fetch_sub(1, std::memory_order_release);
    throw RuntimeShutdown("parkway: the runtime is shutting down; the task was not accepted");
  }
  trace::on_outside_runtime(this);
  PW_PROBE1(inject, t);  // before the push: once pushed, t may run (and fire `run`) at once
  injection.push(t);  // [Q1]
  PW_CHAOS();
  submitted.fetch_add(1, std::memory_order_relaxed);
  notify_work(-1);
  injecting.fetch_sub(1, std::memory_order_release);  // last touch of *this
}

void RuntimeImpl::notify_work(int waker) noexcept {
  if (parking.should_wake()) wake_one_from(waker);
}

void RuntimeImpl::wake_one_from(int waker) noexcept {
  trace::on_wake_begin(waker < 0 ? this : nullptr);
  int w = parking.wake_one();
  if (w >= 0) {
    external_wakeups.fetch_add(1, std::memory_order_relaxed);
    PW_PROBE2(wake, waker, w);
  }
}

void RuntimeImpl::shutdown() {
  if (forked()) {  // no workers here to finish or join; shutdown_mu may be held by a parent's thread
    closing.store(true, std::memory_order_seq_cst);
    return;
  }
  std::lock_guard<std::mutex> g(shutdown_mu);
  if (joined || left_running) return;  // left_running: ~Runtime detaches (bounded_shutdown.cpp)
  stop_workers();
  joining.store(true, std::memory_order_seq_cst);  // see abandon_from_own_worker
  for (pthread_t th : threads) pthread_join(th, nullptr);  // [X3]
  joined = true;
  // A shutdown(deadline) that passed its deadline while this one held the
  // lock dropped tasks without it: nobody runs this runtime's tasks now.
  end_dropping();
}

void RuntimeImpl::stop_workers() {
  closing.store(true, std::memory_order_seq_cst);
  while (injecting.load(std::memory_order_seq_cst) != 0) sched_yield();
  stop.store(true, std::memory_order_seq_cst);  // [X1]
  // [X1b] A token on every worker's word: a worker asleep in its ring
  // with I/O in flight (in its main loop, or inside a task's wait) must
  // come round to cancel it, and [X2]'s one wake and the exit chain may
  // never reach it (they pick main-loop parkers, and one that may not
  // leave parks again). To any other worker it is one spurious look.
  for (unsigned i = 0; i < workers.size(); ++i)
    if (const std::uint32_t id = parking.park_id(i); id != Parking::kNoParkId) park_word(id).notify();
  // [X2] Wake one quiet worker (the most recently parked in its main
  // loop), if nobody searches: it comes to [E1] and, once every other
  // worker is quiet, leaves and wakes the next ([E3], the exit chain).
  // Workers that are running or searching come to [E1] by themselves; one
  // parking now either is on the idle list before this wake (so the chain
  // reaches it) or reads stop at [P2] after [X1] (parking.md, "Shutdown").
  wake_one_from(-1);
}

void RuntimeImpl::abandon_from_own_worker() {
  abandoned.store(true, std::memory_order_seq_cst);
  // A shutdown() in another thread may hold shutdown_mu while it joins
  // the workers, this one included (exit() from a task while main shuts
  // the runtime down): then it owns the threads, and waiting for the lock
  // would deadlock. Otherwise take the lock and stop the pool here.
  while (!shutdown_mu.try_lock()) {
    if (joining.load(std::memory_order_seq_cst)) return;
    sched_yield();
  }
  std::lock_guard<std::mutex> g(shutdown_mu, std::adopt_lock);
  if (joined) return;
  stop_workers();
  // No [X3]: nobody joins. Those a shutdown(deadline) that left workers
  // running has joined already (thread_joined) are not detached either:
  // a joined handle is spent, and glibc gives its descriptor to the next
  // thread made on the cached stack, which the detach would detach in
  // its stead (Cancel.ARuntimeDroppedOnItsWorkerAfterADeadlineDetachesNoJoinedThread).
  for (std::size_t i = 0; i < threads.size(); ++i)
    if (i >= thread_joined.size() || !thread_joined[i]) pthread_detach(threads[i]);
  joined = true;
}

}  // namespace detail

Runtime::Runtime(Options opts) : impl_(nullptr) {
  auto* impl = new detail::RuntimeImpl(*this, opts);
  impl_ = impl;
  try {
    impl->start();
  } catch (...) {
    delete impl;
    throw;
  }
}

Runtime::~Runtime() {
  if (current() == this) {
    // On one of its own workers (a task dropped the last owner, or called
    // exit() with this runtime static): it cannot wait for itself. The
    // workers finish the accepted work and leave on their own; in exit()
    // the process ends with them.
    impl_->abandon_from_own_worker();
    detail::leave_behind(impl_);
    return;
  }
  shutdown();
  // Left allocated in a forked child (see "fork" above), or with workers
  // still inside tasks after shutdown(deadline) (they use it until they leave).
  const bool forked = impl_->forked();
  const bool keep = forked || (impl_->left_running && !impl_->release_after_bounded());
  // Other threads' shutdown calls made while this one waited (a bounded
  // one may still be dropping the queues, without the lock) return first,
  // also when the runtime is left allocated: the Runtime object goes, and
  // the caller may free what the dropped tasks' closures still use. Each
  // returns soon: joined or left running, shutdown() returns at once and
  // shutdown(deadline) within its deadline. Not in a forked child: its
  // count is the parent's at the fork, whose callers are not here.
  while (!forked && impl_->shutdown_calls.load(std::memory_order_acquire) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (keep) {
    detail::leave_behind(impl_);
    return;
  }
  // Every worker is joined: a drop state still set (a shutdown(deadline)
  // that passed its deadline while another call held the lock, after that
  // call had ended it) counts in g_cancel_live no longer.
  impl_->end_dropping();
  delete impl_;
}

void Runtime::shutdown() {
  if (current() == this)
    throw std::logic_error("parkway::Runtime::shutdown: called from one of its own workers (it would wait for itself)");
  detail::RuntimeImpl* const impl = impl_;  // the Runtime object may be destroyed meanwhile: read once
  detail::ShutdownCall call(impl);
  impl->shutdown();
}

void Runtime::enqueue(detail::Task* t) {
  detail::Worker* w = detail::Worker::current();
  if (w && &w->runtime() == impl_) {
    w->spawn(t);  // counted as spawned; Stats::submitted counts tasks from outside the pool
    return;
  }
  impl_->inject(t);
}

SchedExtStatus Runtime::sched_ext_status() const noexcept { return impl_->sched_ext.status(); }

Stats Runtime::stats() const {
  Stats s;
  s.workers.reserve(impl_->n);
  for (const auto& w : impl_->workers) {
    s.workers.push_back(w->counters().snapshot());
    s.total += s.workers.back();
  }
  s.submitted = impl_->submitted.load(std::memory_order_relaxed);
  s.external_wakeups = impl_->external_wakeups.load(std::memory_order_relaxed);
  return s;
}

unsigned Runtime::workers() const noexcept { return impl_->n; }
const Options& Runtime::options() const noexcept { return impl_->opts; }

namespace {
// The calling thread's worker, unless its runtime was destroyed on one of
// its own workers (abandon_from_own_worker): those count as outside any pool.
detail::Worker* current_live_worker() noexcept {
  detail::Worker* w = detail::Worker::current();
  return w && !w->runtime().abandoned.load(std::memory_order_relaxed) ? w : nullptr;
}
}  // namespace

Runtime* Runtime::current() noexcept {
  detail::Worker* w = current_live_worker();
  return w ? &w->runtime().owner : nullptr;
}

int Runtime::current_worker_index() noexcept {
  detail::Worker* w = current_live_worker();
  return w ? int(w->index()) : -1;
}

void detail::enqueue_on(Runtime& rt, detail::Task* t) { rt.enqueue(t); }

Runtime* detail::runtime_for_spawn() {
  if (Runtime* rt = Runtime::current()) return rt;
  // A worker of a destroyed runtime (left running by shutdown(deadline),
  // or destroyed from its own worker): its own pool takes the task, as it
  // takes a TaskGroup's. The default runtime took it before, whose
  // workers then outlived the shut-down ones
  // (Coro.SpawnFromATaskOfADestroyedRuntimeStaysInItsPool).
  if (detail::Worker::current() != nullptr) return nullptr;
  return &Runtime::default_runtime();
}

void detail::enqueue_on_calling_pool(detail::Task* t) {
  detail::Worker* w = detail::Worker::current();
  if (!w) throw std::logic_error("parkway: enqueue_on_calling_pool outside a worker");
  w->spawn(t);
}

namespace {

// The default runtime of this process (after a fork, of the child: the
// parent's is left behind, forked()); set under g_default_mu, never freed.
std::atomic<Runtime*> g_default_runtime{nullptr};

// The default runtime's end, registered with atexit when the first one was
// made (so it runs where its static destructor would have): it finishes
// the work it accepted, and later submissions fail with RuntimeShutdown.
// It is never freed: a static built before the default runtime's first
// use is destroyed after this and may still reach it (it then gets that
// error instead of a freed runtime). When exit() is called from one of
// its own tasks it cannot wait for itself; the process ends with it. In a
// forked child that made no runtime of its own it finds the parent's,
// whose shutdown returns at once there.
void shutdown_default_runtime_at_exit() noexcept {
  Runtime* rt = g_default_runtime.load(std::memory_order_acquire);
  if (!rt || Runtime::current() == rt) return;
  try {
    rt->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parkway: shutting down the default runtime at exit failed: %s\n", e.what());
  }
}

}  // namespace

Runtime& Runtime::default_runtime() {
  Runtime* rt = g_default_runtime.load(std::memory_order_acquire);
  if (rt && !rt->impl().forked()) [[likely]]
    return *rt;
  std::lock_guard<std::mutex> g(detail::g_default_mu);
  rt = g_default_runtime.load(std::memory_order_relaxed);
  if (rt && !rt->impl().forked()) return *rt;
  const bool first = rt == nullptr;  // a child's new default: the handler is registered already
  rt = new Runtime(Options{});
  g_default_runtime.store(rt, std::memory_order_release);
  if (first) std::atexit(&shutdown_default_runtime_at_exit);
  return *rt;
}

}  // namespace parkway
