// trace/format.hpp -- the parkway trace file, version 4 (docs/design/tracing.md).
//
// Written by the in-process recorder (trace/recorder.cpp) and read by
// `parkway trace` (tools/trace/). All integers little-endian, as the
// x86-64 structs below lay them out.
//
//   file    := FileHeader record* End
//   record  := RecordHeader payload            (payload_bytes bytes)
//     kStream  StreamInfo                      a thread that records events
//     kChunk   ChunkInfo Event*                a run of one stream's events, in time order
//     kClock   ClockSync                       ticks <-> CLOCK_MONOTONIC, taken by the writer
//     kEnd     EndInfo                         the last record of a complete file
//
// A stream is one thread's events: a worker (worker >= 0) or a thread
// outside the pool (worker -1: inject, an outside wake, an outside park).
// A kRuntime event names the runtime the thread's following events are
// about (a worker's: only its injections and outside wakes).
// Chunks of one stream come in order; chunks of different streams
// interleave in the order they were written.
#pragma once

#include <cstdint>

namespace parkway::trace_format {

inline constexpr char kMagic[8] = {'P', 'W', 'T', 'R', 'A', 'C', 'E', '\0'};
// Version 2 added the join and runtime events, version 3 the sched_ext
// scheduler's, version 4 slice_yield; a reader reads the older versions
// too (they hold none).
inline constexpr std::uint32_t kVersion = 4;
inline constexpr std::uint32_t kOldestVersion = 1;
inline constexpr std::uint32_t kRecordMagic = 0x43525750;  // "PWRC"

enum class Clock : std::uint32_t {
  kTsc = 1,        // rdtsc ticks; ClockSync pairs convert them to ns
  kMonotonic = 2,  // CLOCK_MONOTONIC ns
};

enum class Level : std::uint32_t { kSched = 1, kTask = 2 };

struct FileHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;  // sizeof(FileHeader): a reader skips what it does not know
  std::uint32_t clock;         // Clock
  std::uint32_t level;         // Level
  std::uint32_t pid;
  std::uint32_t chunk_events;  // events per chunk buffer
  std::uint64_t start_ticks;
  std::uint64_t start_ns;  // CLOCK_MONOTONIC at start_ticks
};
static_assert(sizeof(FileHeader) == 48);

enum class RecordKind : std::uint16_t { kStream = 1, kChunk = 2, kClock = 3, kEnd = 4 };

struct RecordHeader {
  std::uint32_t magic;  // kRecordMagic
  std::uint16_t kind;   // RecordKind
  std::uint16_t reserved;
  std::uint32_t payload_bytes;
  std::uint32_t stream;  // kStream, kChunk: the stream; else 0
};
static_assert(sizeof(RecordHeader) == 16);

struct StreamInfo {
  std::int32_t worker;  // worker index, or -1: a thread outside the pool
  std::uint32_t tid;
  std::uint64_t runtime;  // tells the runtimes of one process apart (0 outside)
  char name[16];          // the thread's name, NUL-padded
};
static_assert(sizeof(StreamInfo) == 32);

struct ChunkInfo {
  std::uint64_t dropped_before;  // events this stream lost (no free buffer) just before this chunk
};

struct ClockSync {
  std::uint64_t ticks;
  std::uint64_t ns;
};

struct EndInfo {
  std::uint64_t events;   // written, all streams
  std::uint64_t dropped;  // lost, all streams
  std::uint64_t ticks;
  std::uint64_t ns;
};

enum class EventType : std::uint8_t {
  // Scheduling level.
  kStealFence = 1,   // a16 = victim
  kSteal = 2,        // a16 = victim, a32 = tasks moved
  kInjectTake = 3,   // a32 = tasks taken from the injection queue
  kSearchBegin = 4,  //
  kSearchEnd = 5,    // a8 = found (0/1)
  kPark = 6,         // a32 = park id
  kUnpark = 7,       // a8 = handed off (left counted as a searcher), a32 = park id; a16 = 1: a
                     // worker's hand-off found at its recheck before sleeping (no park to end)
  kWake = 8,         // a16 = wakee worker, a32 = waker (int32, -1: outside the pool); its time:
                     // when the waker set out, before it took the wakee off the idle list
  kNotify = 9,       // a8 = woke (the waiter was asleep), a32 = the waiter's park id
  kParkFence = 10,   //
  kInject = 11,      // task (a16:a32 = 48-bit task address)
  kIoSubmit = 12,    // a8 = io_uring opcode
  kIoComplete = 13,  // a32 = result (int32)
  // The kernel's view (`parkway trace record`, from sched_switch).
  kOffCpu = 14,  // the thread left its CPU; a8 = 1: preempted (still runnable), 0: it blocked
  kOnCpu = 15,   // the thread runs again
  // Scheduling level: the runtime this thread's next events are about (a
  // thread outside the pool, before its first inject or wake for a runtime
  // other than its last one). runtime (a16:a32 = 48-bit RuntimeImpl address).
  kRuntime = 16,
  // The sched_ext scheduler's decision about this worker (`parkway trace
  // record` with `parkway sched load`): a8 = kind (bpf/parkway_sched.h,
  // parkway_sched_event_kind: 1 busy_promote, 2 keep_prev, 3
  // yield_to_busy), a16 = the CPU.
  kSchedExt = 17,
  // Scheduling level: a worker gave up its CPU at the end of its kernel
  // slice, between two tasks ([Y1], parking.md).
  kSliceYield = 18,
  // Task level.
  kSpawn = 20,     // task
  kRunBegin = 21,  // task
  kRunEnd = 22,    // task
  kJoin = 23,      // the running task's blocking wait (it helped or slept) returned
};

struct Event {
  std::uint64_t ticks;
  std::uint8_t type;  // EventType
  std::uint8_t a8;
  std::uint16_t a16;
  std::uint32_t a32;
};
static_assert(sizeof(Event) == 16);

// A task's (or kRuntime's runtime's) identity: its address, 48 bits
// (x86-64 user space), split over a16:a32.
inline std::uint64_t event_task(const Event& e) { return (std::uint64_t(e.a16) << 32) | e.a32; }

}  // namespace parkway::trace_format
