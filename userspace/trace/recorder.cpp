// trace/recorder.cpp -- PARKWAY_TRACE=FILE: per-thread event buffers and
// the writer thread that moves them to FILE (docs/design/tracing.md).
//
// Algorithm outline:
//   - Each thread that records gets a Stream: kSlots chunk buffers used
//     in turn. The thread appends to the chunk it fills (no lock, no
//     system call); when the chunk is full it marks it kFull, pokes the
//     writer (one FUTEX_WAKE, which never blocks) and moves to the next
//     slot if that one is kFree. If it is not, the writer is behind:
//     the thread drops its events, counting them, until a slot is free
//     again; the count travels in the next chunk's header.
//   - The writer thread writes each stream's kFull slots in slot order
//     (so a stream's chunks stay in time order) and marks them kFree.
//   - A thread that ends hands over its partial chunk (kFull), or, while
//     dropping, leaves its drop count for the writer to write in an empty
//     chunk; its Stream is reused once the writer has done both. It does
//     so from a pthread key destructor, which runs after the thread's C++
//     thread_local destructors: those may still record (a wait on a
//     Future, a submission).
//   - At exit the level drops to 0, the writer stops, and the exiting
//     thread writes what is left, partial chunks and the drop counts of
//     threads still dropping included, then kEnd (its drop count is the
//     sum of the chunks').
// Memory: kSlots * chunk_events * 16 bytes per thread that ever recorded
// at once (threads that end give their Stream to the next).
#include "trace/recorder.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <type_traits>

#include "asymmetric_fence.hpp"
#include "clock.hpp"
#include "futex.hpp"
#include "parkway/task.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"

namespace parkway::detail::trace {

using namespace trace_format;

std::atomic<std::uint8_t> g_level{0};

namespace {

constexpr unsigned kSlots = 4;
constexpr std::uint32_t kDefaultChunkEvents = 32768;  // 512 KiB per chunk
constexpr std::uint32_t kFree = 0, kFilling = 1, kFull = 2;

struct Slot {
  Event* events = nullptr;
  std::atomic<std::uint32_t> state{kFree};
  std::atomic<Event*> committed{nullptr};  // events[0, committed) are written (release)
  std::uint64_t dropped_before = 0;
};

struct Stream {
  // The owning thread's cursor.
  Event* pos = nullptr;
  Event* end = nullptr;
  std::atomic<Event*>* committed = nullptr;  // the filling slot's
  unsigned cur = 0;                           // the slot filled (or, while dropping, the one awaited)
  bool dropping = false;
  // Events lost since the last chunk this thread started: the owner's
  // count (read by finish while the owner may still run, hence atomic).
  std::atomic<std::uint64_t> dropped{0};

  Slot slots[kSlots];
  std::atomic<bool> alive{false};  // an owner thread holds it
  // A thread that ended while dropping: its last drops, for the writer to
  // write (an empty chunk) before the stream can be reused.
  std::atomic<std::uint64_t> retired_dropped{0};
  std::atomic<std::uint32_t> id{0};
  StreamInfo info{};
  // The writer's side.
  unsigned next_write = 0;
  std::uint32_t described = 0;  // the stream id whose kStream record was written
  Stream* next_in_list = nullptr;
};

// Trivially destructible: it is used until the last atexit handler, after
// the static destructors registered at load time have run.
struct Recorder {
  int fd = -1;
  char path[4096] = {};
  bool tsc = false;
  std::uint32_t chunk_events = kDefaultChunkEvents;
  FileHeader header{};
  std::atomic<Stream*> streams{nullptr};  // push-only list
  std::atomic<std::uint32_t> next_stream{1};
  std::atomic<std::uint32_t> poke{0};  // the writer's futex word
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> dropped{0};
  std::uint64_t written = 0;  // events (writer / finish only)
  bool write_failed = false;
  pthread_t writer{};
  bool writer_started = false;
  pthread_key_t retire_key{};  // its destructor retires the thread's Stream (retire_at_thread_exit)
};

Recorder g_rec;
static_assert(std::is_trivially_destructible_v<Recorder>);
constinit thread_local Stream* tls_stream __attribute__((tls_model("initial-exec"))) = nullptr;
// The runtime this thread's stream last named in a kRuntime event that was
// written into it (note_runtime); null: none yet in this stream.
constinit thread_local const void* tls_runtime __attribute__((tls_model("initial-exec"))) = nullptr;

[[gnu::always_inline]] inline std::uint64_t now() noexcept {
#if defined(__x86_64__)
  if (g_rec.tsc) return __rdtsc();
#endif
  return monotonic_ns();
}

// The TSC counts at a constant rate, also in deep C-states, on this CPU:
// then it is the cheaper clock (a dozen cycles against a vDSO call).
bool tsc_usable() {
#if !defined(__x86_64__)
  return false;
#endif
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
  }
  return false;
}

// ---- the writer's side ---------------------------------------------------

void fail_write(int err) noexcept {
  if (g_rec.write_failed) return;
  g_rec.write_failed = true;
  g_level.store(0, std::memory_order_relaxed);
  std::fprintf(stderr, "parkway: PARKWAY_TRACE: writing %s failed: %s; tracing stopped, the file is incomplete\n",
               g_rec.path, std::strerror(err));
}

void write_all(const iovec* iov, int n) noexcept {
  if (g_rec.write_failed) return;
  iovec v[4];
  std::memcpy(v, iov, sizeof(iovec) * std::size_t(n));
  iovec* p = v;
  while (n > 0) {
    ssize_t w = ::writev(g_rec.fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_write(errno);
      return;
    }
    std::size_t left = std::size_t(w);
    while (n > 0 && left >= p->iov_len) {
      left -= p->iov_len;
      ++p;
      --n;
    }
    if (n > 0) {
      p->iov_base = static_cast<char*>(p->iov_base) + left;
      p->iov_len -= left;
    }
  }
}

// Writes from a thread of the program: the header (start, before main)
// and the rest at exit (finish). writev to a pipe whose reader has gone
// raises SIGPIPE, and one past RLIMIT_FSIZE SIGXFSZ, whose default action
// ends the process: a trace whose reader went away killed the program at
// its exit (status 141) instead of saying so. The writer thread blocks
// every signal and gets EPIPE or EFBIG (fail_write); here both signals are
// blocked around the writes, and one that they raised is taken back before
// the mask is restored (one pending before is left pending).
class QuietWrites {
 public:
  QuietWrites() noexcept {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    sigaddset(&set_, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    sigset_t pending;
    sigpending(&pending);
    for (int sig : {SIGPIPE, SIGXFSZ})
      if (sigismember(&pending, sig)) sigdelset(&set_, sig);
  }
  ~QuietWrites() {
    sigset_t pending;
    sigpending(&pending);
    for (int sig : {SIGPIPE, SIGXFSZ}) {
      if (!sigismember(&set_, sig) || !sigismember(&pending, sig)) continue;
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      const timespec zero{0, 0};
      while (sigtimedwait(&one, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  QuietWrites(const QuietWrites&) = delete;
  QuietWrites& operator=(const QuietWrites&) = delete;

 private:
  sigset_t set_, old_;
};

void write_record(RecordKind kind, std::uint32_t stream, const void* a, std::size_t alen, const void* b = nullptr,
                  std::size_t blen = 0) noexcept {
  RecordHeader h{kRecordMagic, std::uint16_t(kind), 0, std::uint32_t(alen + blen), stream};
  iovec v[3] = {{&h, sizeof h}, {const_cast<void*>(a), alen}, {const_cast<void*>(b), blen}};
  write_all(v, blen ? 3 : 2);
}

void write_clock() noexcept {
  ClockSync c{now(), monotonic_ns()};
  write_record(RecordKind::kClock, 0, &c, sizeof c);
}

void write_chunk(Stream& s, std::uint64_t dropped_before, const Event* events, std::uint32_t n) noexcept {
  const std::uint32_t id = s.id.load(std::memory_order_acquire);
  if (s.described != id) {
    write_record(RecordKind::kStream, id, &s.info, sizeof s.info);
    s.described = id;
  }
  ChunkInfo ci{dropped_before};
  write_record(RecordKind::kChunk, id, &ci, sizeof ci, events, n * sizeof(Event));
  g_rec.written += n;
}

void write_chunk(Stream& s, Slot& slot, std::uint32_t n) noexcept {
  write_chunk(s, slot.dropped_before, slot.events, n);
}

// Writes every full slot of every stream, in slot order; true if any.
bool drain() noexcept {
  bool any = false;
  for (Stream* s = g_rec.streams.load(std::memory_order_acquire); s; s = s->next_in_list) {
    for (;;) {
      Slot& slot = s->slots[s->next_write];
      if (slot.state.load(std::memory_order_acquire) != kFull) break;
      write_chunk(*s, slot, std::uint32_t(slot.committed.load(std::memory_order_relaxed) - slot.events));
      slot.state.store(kFree, std::memory_order_release);  // pairs with the owner's acquire in next_slot
      s->next_write = (s->next_write + 1) % kSlots;
      any = true;
    }
    // An ended thread's last drops, after its chunks (adopt_stream waits for this).
    if (!s->alive.load(std::memory_order_acquire))
      if (const std::uint64_t d = s->retired_dropped.load(std::memory_order_relaxed)) {
        write_chunk(*s, d, nullptr, 0);
        s->retired_dropped.store(0, std::memory_order_release);  // pairs with adopt_stream's acquire
        any = true;
      }
  }
  return any;
}

void* writer_main(void*) {
  pthread_setname_np(pthread_self(), "parkway-trace");
  std::uint64_t last_clock = 0;
  while (!g_rec.stop.load(std::memory_order_acquire)) {
    const std::uint32_t seen = g_rec.poke.load(std::memory_order_acquire);
    drain();
    const std::uint64_t t = monotonic_ns();
    if (t - last_clock > 50000000u) {  // a clock pair every 50 ms: a cut file still converts
      write_clock();
      last_clock = t;
    }
    timespec ts{0, 100000000};  // a full chunk pokes; the timeout only paces the clock pairs
    futex_wait(&g_rec.poke, seen, &ts);
  }
  return nullptr;
}

void poke_writer() noexcept {
  g_rec.poke.fetch_add(1, std::memory_order_release);
  futex_wake(&g_rec.poke);
}

// ---- the recording thread's side -----------------------------------------

// Start filling slot `i` if the writer has freed it.
bool claim_slot(Stream& s, unsigned i) noexcept {
  Slot& slot = s.slots[i];
  if (slot.state.load(std::memory_order_acquire) != kFree) return false;
  slot.dropped_before = s.dropped.load(std::memory_order_relaxed);
  s.dropped.store(0, std::memory_order_relaxed);
  slot.committed.store(slot.events, std::memory_order_relaxed);
  slot.state.store(kFilling, std::memory_order_relaxed);
  s.cur = i;
  s.dropping = false;
  s.pos = slot.events;
  s.end = slot.events + g_rec.chunk_events;
  s.committed = &slot.committed;
  return true;
}

// Hand the filling slot to the writer (also a partial one, at thread end).
void hand_over(Stream& s) noexcept {
  if (s.dropping) return;
  s.slots[s.cur].state.store(kFull, std::memory_order_release);
  s.pos = s.end = nullptr;
  s.dropping = true;
  s.cur = (s.cur + 1) % kSlots;
  poke_writer();
}

void retire(Stream* s) noexcept {
  if (s->dropping) {  // no chunk of its own to carry them: the writer writes them
    s->retired_dropped.store(s->dropped.load(std::memory_order_relaxed), std::memory_order_relaxed);
    s->dropped.store(0, std::memory_order_relaxed);
  }
  hand_over(*s);
  s->alive.store(false, std::memory_order_release);  // pairs with drain's acquire
}

// The thread-exit hand-over: a pthread key destructor, not a C++
// thread_local object's. glibc runs the key destructors after all of the
// thread's thread_local destructors, and those may still record (a
// thread_local object whose destructor submits a task or waits on a
// Future): after a thread_local Retirer had run, such an event took a new
// Stream that no one retired (its 4 chunks never reused, one more per such
// thread) and whose events lost the runtime the thread had named. A thread
// that records again in a later key destructor takes a stream again and
// sets the key again, and glibc calls this once more
// (PTHREAD_DESTRUCTOR_ITERATIONS). The main thread's exit() runs no key
// destructor: its stream stays alive and finish writes it.
void retire_at_thread_exit(void*) noexcept {
  if (Stream* s = tls_stream) {
    tls_stream = nullptr;
    if (g_rec.writer_started && !g_rec.stop.load(std::memory_order_acquire)) retire(s);
  }
}

void describe(Stream& s) noexcept {
  std::memset(&s.info, 0, sizeof s.info);
  Worker* w = Worker::current();
  s.info.worker = w ? int(w->index()) : -1;
  s.info.runtime = w ? std::uint64_t(reinterpret_cast<std::uintptr_t>(&w->runtime())) : 0;
  s.info.tid = std::uint32_t(gettid());
  pthread_getname_np(pthread_self(), s.info.name, sizeof s.info.name);
}

// The calling thread's stream: a drained one left by an ended thread, or
// a new one. Null if memory ran out.
Stream* adopt_stream() noexcept {
  for (Stream* s = g_rec.streams.load(std::memory_order_acquire); s; s = s->next_in_list) {
    if (s->alive.load(std::memory_order_acquire)) continue;
    bool drained = s->retired_dropped.load(std::memory_order_acquire) == 0;
    for (auto& slot : s->slots) drained = drained && slot.state.load(std::memory_order_acquire) == kFree;
    bool expect = false;
    // Drained, the writer's next slot is the one this stream fills next.
    if (drained && s->alive.compare_exchange_strong(expect, true, std::memory_order_acq_rel)) return s;
  }
  auto* s = new (std::nothrow) Stream;
  if (!s) return nullptr;
  for (auto& slot : s->slots) {
    slot.events = static_cast<Event*>(std::malloc(sizeof(Event) * g_rec.chunk_events));
    if (!slot.events) {
      for (auto& sl : s->slots) std::free(sl.events);
      delete s;
      return nullptr;
    }
  }
  s->alive.store(true, std::memory_order_relaxed);
  Stream* head = g_rec.streams.load(std::memory_order_relaxed);
  do s->next_in_list = head;
  while (!g_rec.streams.compare_exchange_weak(head, s, std::memory_order_release, std::memory_order_relaxed));
  return s;
}

// record()'s slow path: no stream yet, a full chunk, or dropping.
[[gnu::noinline]] Stream* make_room() noexcept {
  Stream* s = tls_stream;
  if (!s) {
    if (g_level.load(std::memory_order_relaxed) == 0) return nullptr;
    s = adopt_stream();
    if (!s) {
      g_rec.dropped.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    describe(*s);
    s->dropping = true;  // a reused stream's last owner's drops are written already (drain)
    // The thread-exit hand-over. Should it fail (no memory for the key's
    // slot), the stream is not reused: its events are still written (finish).
    (void)pthread_setspecific(g_rec.retire_key, s);
    tls_stream = s;
    tls_runtime = nullptr;  // a new stream names no runtime yet (note_runtime)
    s->id.store(g_rec.next_stream.fetch_add(1, std::memory_order_relaxed), std::memory_order_release);
  } else {
    hand_over(*s);  // a no-op while dropping
  }
  if (claim_slot(*s, s->cur)) return s;
  s->dropped.store(s->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  g_rec.dropped.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

// One event: the type and arguments as one 8-byte word after the timestamp.
constexpr std::uint64_t pack(EventType type, std::uint8_t a8, std::uint16_t a16, std::uint32_t a32) noexcept {
  return std::uint64_t(type) | std::uint64_t(a8) << 8 | std::uint64_t(a16) << 16 | std::uint64_t(a32) << 32;
}

void put(Stream* s, std::uint64_t ticks, std::uint64_t word) noexcept {
  Event* e = s->pos;
  e->ticks = ticks;
  std::memcpy(&e->type, &word, sizeof word);
  s->pos = e + 1;
  s->committed->store(e + 1, std::memory_order_release);  // pairs with the writer's acquire (finish)
}

// This thread's stream with room for an event, or nullptr (dropping).
Stream* stream_with_room() noexcept {
  Stream* s = tls_stream;
  return s && s->pos != s->end ? s : make_room();
}

// append() when it needs a call: a new stream, a full chunk, dropping, or
// the CLOCK_MONOTONIC clock. Kept out of append so that its common path
// saves no register.
[[gnu::noinline]] void append_slow(std::uint64_t word) noexcept {
  if (Stream* s = stream_with_room()) put(s, now(), word);
}

// append_slow at a time taken earlier (no event of this thread in between).
[[gnu::noinline]] void append_at(std::uint64_t ticks, std::uint64_t word) noexcept {
  if (Stream* s = stream_with_room()) put(s, ticks, word);
}

[[gnu::always_inline]] inline void append(std::uint64_t word) noexcept {
  Stream* s = tls_stream;
#if defined(__x86_64__)
  if (s && s->pos != s->end && g_rec.tsc) [[likely]] {
    put(s, __rdtsc(), word);
    return;
  }
#endif
  append_slow(word);
}

// ---- start and end -------------------------------------------------------

void finish() noexcept {
  if (!g_rec.writer_started) return;
  QuietWrites quiet;  // this thread writes the rest
  g_level.store(0, std::memory_order_relaxed);
  g_rec.stop.store(true, std::memory_order_release);
  poke_writer();
  pthread_join(g_rec.writer, nullptr);
  drain();
  // What is left: each stream's filling chunk, as far as it is committed
  // (a thread still running at exit may be past this; its later events are
  // not recorded).
  // A thread dropping has no filling chunk: its drops since its last
  // chunk go in an empty one, so that each stream's chunks count all it lost.
  for (Stream* s = g_rec.streams.load(std::memory_order_acquire); s; s = s->next_in_list) {
    for (Slot& slot : s->slots) {  // at most one is filling, the newest
      if (slot.state.load(std::memory_order_acquire) != kFilling) continue;
      const auto n = std::uint32_t(slot.committed.load(std::memory_order_acquire) - slot.events);
      if (n || slot.dropped_before) write_chunk(*s, slot, n);
    }
    if (const std::uint64_t d = s->dropped.load(std::memory_order_relaxed)) write_chunk(*s, d, nullptr, 0);
  }
  write_clock();
  EndInfo end{g_rec.written, g_rec.dropped.load(std::memory_order_relaxed), now(), monotonic_ns()};
  write_record(RecordKind::kEnd, 0, &end, sizeof end);
  ::close(g_rec.fd);
  if (end.dropped)
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: %llu events dropped (the writer fell behind); %s says where\n",
                 static_cast<unsigned long long>(end.dropped), g_rec.path);
}

// A forked child has no writer thread: it records nothing, and its exit
// neither joins the parent's writer nor writes to the parent's file. It
// closes its copy of the file, so that it does not keep the file's lock
// (held by the open file, which it shares) after the parent ends.
void in_forked_child() noexcept {
  g_level.store(0, std::memory_order_relaxed);
  g_rec.writer_started = false;
  ::close(g_rec.fd);
  g_rec.fd = -1;
}

bool parse_env(std::uint8_t* level) {
  const char* path = std::getenv("PARKWAY_TRACE");
  if (!path || !*path) return false;
  const char* lv = std::getenv("PARKWAY_TRACE_LEVEL");
  if (!lv || !*lv || !std::strcmp(lv, "sched")) {
    *level = 1;
  } else if (!std::strcmp(lv, "task")) {
    *level = 2;
  } else {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE_LEVEL must be 'sched' or 'task', got '%s'; tracing is off\n", lv);
    return false;
  }
  const char* clk = std::getenv("PARKWAY_TRACE_CLOCK");
  if (!clk || !*clk) {
    g_rec.tsc = tsc_usable();
  } else if (!std::strcmp(clk, "tsc")) {
#if defined(__x86_64__)
    g_rec.tsc = true;
#else
    std::fprintf(stderr, "parkway: PARKWAY_TRACE_CLOCK=tsc: this build has no TSC; tracing is off\n");
    return false;
#endif
  } else if (!std::strcmp(clk, "monotonic")) {
    g_rec.tsc = false;
  } else {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE_CLOCK must be 'tsc' or 'monotonic', got '%s'; tracing is off\n",
                 clk);
    return false;
  }
  if (const char* ce = std::getenv("PARKWAY_TRACE_CHUNK"); ce && *ce) {
    char* endp;
    unsigned long v = std::strtoul(ce, &endp, 10);
    if (*endp || v < 64 || v > (1u << 24)) {
      std::fprintf(stderr, "parkway: PARKWAY_TRACE_CHUNK must be 64..16777216 events, got '%s'; tracing is off\n",
                   ce);
      return false;
    }
    g_rec.chunk_events = std::uint32_t(v);
  }
  if (std::strlen(path) >= sizeof g_rec.path) {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: the path is longer than %zu bytes; tracing is off\n",
                 sizeof g_rec.path - 1);
    return false;
  }
  std::strcpy(g_rec.path, path);
  return true;
}

void start() noexcept {
  std::uint8_t level = 0;
  const bool on = parse_env(&level);
  // The trace is this process's: a program it runs (system(), exec) does
  // not inherit PARKWAY_TRACE, which would make it write the same file.
  // This runs when the library loads: at a program's start, before main,
  // no other thread reads the environment yet; a program that dlopens the
  // library while other threads use the environment races them here, as
  // with any unsetenv.
  ::unsetenv("PARKWAY_TRACE");
  if (!on) return;
  if (const int err = pthread_key_create(&g_rec.retire_key, &retire_at_thread_exit); err != 0) {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: pthread_key_create: %s; tracing is off\n", std::strerror(err));
    return;
  }
  g_rec.fd = ::open(g_rec.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (g_rec.fd < 0) {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: cannot open %s: %s; tracing is off\n", g_rec.path,
                 std::strerror(errno));
    return;
  }
  // A regular file another live process is writing (given the same
  // PARKWAY_TRACE explicitly) is left alone: the lock is held until this
  // process ends (a forked child lets go of it, in_forked_child). Anything
  // else (/dev/null, a pipe) is neither locked nor truncated: processes may
  // share it.
  struct stat st {};
  if (::fstat(g_rec.fd, &st) != 0 ||
      (S_ISREG(st.st_mode) && (::flock(g_rec.fd, LOCK_EX | LOCK_NB) != 0 || ::ftruncate(g_rec.fd, 0) != 0))) {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: %s: %s; tracing is off\n", g_rec.path,
                 errno == EWOULDBLOCK ? "another process is writing its trace there" : std::strerror(errno));
    ::close(g_rec.fd);
    g_rec.fd = -1;
    return;
  }
  FileHeader& h = g_rec.header;
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kVersion;
  h.header_bytes = sizeof(FileHeader);
  h.clock = std::uint32_t(g_rec.tsc ? Clock::kTsc : Clock::kMonotonic);
  h.level = level;
  h.pid = std::uint32_t(getpid());
  h.chunk_events = g_rec.chunk_events;
  h.start_ticks = now();
  h.start_ns = monotonic_ns();
  iovec v{&h, sizeof h};
  {
    QuietWrites quiet;
    write_all(&v, 1);
  }
  if (g_rec.write_failed) {  // said so (fail_write); the file is not kept open, nor locked
    ::close(g_rec.fd);
    g_rec.fd = -1;
    return;
  }
  // The first thread of the process's own: membarrier's registration
  // goes first, while it is cheap (asymmetric_fence.cpp).
  (void)init_asymmetric_fence();
  // The writer takes no signal: it is made before main() (from a static
  // constructor, with no signal blocked), so a program that blocks
  // SIGTERM in main and reads it from a signalfd would have the signal
  // delivered to this thread, whose default action ends the process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int err = pthread_create(&g_rec.writer, nullptr, &writer_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) {
    std::fprintf(stderr, "parkway: PARKWAY_TRACE: cannot start the writer thread: %s; tracing is off\n",
                 std::strerror(err));
    ::close(g_rec.fd);
    g_rec.fd = -1;
    return;
  }
  g_rec.writer_started = true;
  pthread_atfork(nullptr, nullptr, &in_forked_child);
  std::atexit(&finish);
  g_level.store(level, std::memory_order_relaxed);
}

// When the library loads, before the namespace-scope objects of a
// statically linked program (which may start a runtime), like the fork
// handlers (runtime.cpp).
struct Start {
  Start() noexcept { start(); }
};
__attribute__((init_priority(101))) const Start g_start;

}  // namespace

void record(EventType type, std::uint8_t a8, std::uint16_t a16, std::uint32_t a32) noexcept {
  append(pack(type, a8, a16, a32));
}

void record_task(EventType type, const void* task) noexcept {
  const auto a = std::uint64_t(reinterpret_cast<std::uintptr_t>(task));
  append(pack(type, 0, std::uint16_t(a >> 32), std::uint32_t(a)));
}

namespace {
constinit thread_local std::uint64_t tls_wake_stamp __attribute__((tls_model("initial-exec"))) = 0;
}

void stamp_wake() noexcept { tls_wake_stamp = now(); }

void record_wake(std::uint16_t wakee, std::uint32_t waker) noexcept {
  const std::uint64_t t = tls_wake_stamp;
  tls_wake_stamp = 0;
  append_at(t ? t : now(), pack(EventType::kWake, 0, wakee, waker));
}

void note_runtime(const void* rt) noexcept {
  if (rt == tls_runtime) return;
  // `rt` is the stream's runtime only once its event is in the stream: one
  // dropped (no free chunk) is tried again at the thread's next injection
  // or outside wake. Taken as written, the reader gave those, recorded once
  // chunks were free again, to the runtime named before.
  if (Stream* s = stream_with_room()) {  // may take a new stream: tls_runtime is then null
    const auto a = std::uint64_t(reinterpret_cast<std::uintptr_t>(rt));
    put(s, now(), pack(EventType::kRuntime, 0, std::uint16_t(a >> 32), std::uint32_t(a)));
    tls_runtime = rt;
  }
}

bool run_traced(Task* t) noexcept {
  record_task(EventType::kRunBegin, t);
  t->invoke(t);
  record_task(EventType::kRunEnd, t);
  return true;
}

}  // namespace parkway::detail::trace
