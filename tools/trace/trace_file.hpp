// trace_file.hpp -- reading a parkway trace file (userspace/trace/format.hpp)
// in two passes, neither holding more than a block of events per stream:
// index_trace checks every record and learns each stream's extent;
// EventReader then gives the events of all streams in time order.
// An error names the byte offset.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/format.hpp"

namespace parkway::tracetool {

// A file that is not a complete, well-formed trace: what() names the byte.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A thread outside the pool: its events about one runtime (kRuntime events
// say which; those before its first have runtime kBeforeRuntime). A
// worker's submissions and outside wakes (waker -1) into another runtime
// than its own: the same, for that runtime.
inline constexpr std::uint64_t kBeforeRuntime = UINT64_MAX;
// The event of a stream of thread `info` is about the runtime its last
// kRuntime event named (else about the stream's own runtime, a worker's).
inline bool follows_runtime_events(const trace_format::StreamInfo& info, const trace_format::Event& e) {
  using trace_format::EventType;
  if (EventType(e.type) == EventType::kRuntime) return false;
  if (info.worker < 0) return true;
  return EventType(e.type) == EventType::kInject || (EventType(e.type) == EventType::kWake && e.a32 == UINT32_MAX);
}
struct AboutRuntime {
  std::uint64_t runtime = 0;
  std::uint64_t first = 0, last = 0;  // ns since the trace start
  std::uint64_t events = 0;
};

struct StreamIndex {
  std::uint32_t id = 0;
  trace_format::StreamInfo info{};
  std::uint64_t record = 0;            // the offset of its stream record
  std::uint64_t last_chunk = 0;        // the offset of its last chunk record (events > 0)
  std::vector<std::uint64_t> chunks;   // the offsets of its chunk records with events, in order
                                       // (8 bytes a chunk: the reader goes to each, not through
                                       // every other stream's records in between)
  std::uint64_t events = 0;
  std::uint64_t first = 0, last = 0;   // its first and last event, ns since the start (events > 0)
  std::uint64_t dropped = 0;           // as the chunk headers say
  std::vector<AboutRuntime> about;     // outside threads; a worker's: other runtimes only
};

struct TraceIndex {
  std::string path;
  trace_format::FileHeader header{};
  std::vector<StreamIndex> streams;  // in the order their stream records came
  std::uint64_t end_ns = 0;          // the trace's end, ns since its start
  std::uint64_t events = 0;
  std::uint64_t dropped = 0;  // all streams (the end record's count, or the chunks' when cut)
  bool complete = false;      // the end record was there
  std::uint64_t bytes = 0;    // of the file
  std::uint64_t data_end = 0; // where the last record read ends
  // ticks -> ns since the start: the line through the first and last clock pairs.
  std::uint64_t origin_ticks = 0;
  double ns_per_tick = 1.0;
  std::uint64_t to_ns(std::uint64_t ticks) const;
};

// What a file may ask the reader to hold: the runtimes, and the threads
// shown (per runtime a track for each worker index up to its highest, one
// for each other thread). A file past them is refused (it names the
// limit): the reader's memory stays proportional to the file.
inline constexpr std::size_t kMaxRuntimes = 256;
inline constexpr std::uint64_t kMaxTracks = 65536;

// Reads and checks every record of `path`. With allow_cut, a file without
// its end record (the process is still running, or did not exit normally)
// is read up to its last whole record: a record the file ends inside (one
// being written) is left out. Without it, that is an error.
TraceIndex index_trace(const std::string& path, bool allow_cut);

// The events of every stream of an indexed file, merged in time order (a
// spawn before other events of the same ns); each stream's times never go
// back (a TSC that did, by a tick, is held at the previous time).
class EventReader {
 public:
  struct Item {
    std::size_t stream;  // TraceIndex::streams
    trace_format::Event event;  // ticks: ns since the trace start
  };
  explicit EventReader(const TraceIndex& ix);
  ~EventReader();
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;
  bool next(Item* out);

 private:
  struct Cursor;
  bool refill(Cursor& c);
  bool later(std::size_t a, std::size_t b) const;
  const TraceIndex& ix_;
  int fd_ = -1;
  std::vector<Cursor> cursors_;
  std::vector<std::size_t> heap_;  // cursors with an event, by their next event's time
};

const char* event_name(std::uint8_t type);

}  // namespace parkway::tracetool
