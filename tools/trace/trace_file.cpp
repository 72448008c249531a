// trace_file.cpp -- index_trace: each record read with pread and checked
// in turn (the events of a chunk a block at a time); the first thing wrong
// ends the read with the offset of its byte. EventReader: one cursor per
// stream walking its chunks, a heap choosing the earliest next event.
#include "trace_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

namespace parkway::tracetool {

using namespace trace_format;

const char* event_name(std::uint8_t type) {
  switch (EventType(type)) {
    case EventType::kStealFence: return "steal_fence";
    case EventType::kSteal: return "steal";
    case EventType::kInjectTake: return "inject_take";
    case EventType::kSearchBegin: return "search_begin";
    case EventType::kSearchEnd: return "search_end";
    case EventType::kPark: return "park";
    case EventType::kUnpark: return "unpark";
    case EventType::kWake: return "wake";
    case EventType::kNotify: return "notify";
    case EventType::kParkFence: return "park_fence";
    case EventType::kSliceYield: return "slice_yield";
    case EventType::kInject: return "inject";
    case EventType::kIoSubmit: return "io_submit";
    case EventType::kIoComplete: return "io_complete";
    case EventType::kOffCpu: return "off_cpu";
    case EventType::kOnCpu: return "on_cpu";
    case EventType::kRuntime: return "runtime";
    case EventType::kSchedExt: return "sched_ext";
    case EventType::kSpawn: return "spawn";
    case EventType::kRunBegin: return "run_begin";
    case EventType::kRunEnd: return "run_end";
    case EventType::kJoin: return "join";
  }
  return nullptr;
}

namespace {

// Events read (and held) at a time: 64 KiB.
constexpr std::size_t kBlockEvents = 4096;

[[noreturn]] void bad(const std::string& path, std::uint64_t at, const std::string& what) {
  throw FormatError(path + ": byte " + std::to_string(at) + ": " + what);
}

// Exactly n bytes at `off` of `fd` (the caller has checked they are in the file).
void read_exact(int fd, const std::string& path, void* p, std::size_t n, std::uint64_t off) {
  auto* b = static_cast<unsigned char*>(p);
  while (n) {
    const ssize_t r = ::pread(fd, b, n, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error(path + ": cannot read at byte " + std::to_string(off) + ": " + std::strerror(errno));
    if (r == 0) bad(path, off, "the file shrank while it was read");
    b += r, n -= std::size_t(r), off += std::uint64_t(r);
  }
}

// The open file, closed on every way out.
struct File {
  int fd = -1;
  std::string path;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
  void read_at(void* p, std::size_t n, std::uint64_t off) const { read_exact(fd, path, p, n, off); }
};

int open_trace(const std::string& path, std::uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat: " + std::strerror(e));
  }
  // Read twice, at offsets (pread): a pipe has no size and cannot be read so.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + (S_ISDIR(st.st_mode) ? ": is a directory"
                                                         : ": not a regular file (a pipe?): the trace is read in two "
                                                           "passes at byte offsets; save it to a file first"));
  }
  *size = std::uint64_t(st.st_size);
  return fd;
}

const char* kind_name(std::uint16_t k) {
  switch (RecordKind(k)) {
    case RecordKind::kStream: return "stream";
    case RecordKind::kChunk: return "chunk";
    case RecordKind::kClock: return "clock";
    case RecordKind::kEnd: return "end";
  }
  return "?";
}

// A stream's times while indexing, in ticks (converted once the clock line is known).
struct Extent {
  std::uint64_t first = 0, last = 0;  // last: the largest so far (times never go back)
  std::uint64_t about = kBeforeRuntime;
  std::vector<AboutRuntime> about_ticks;
  std::map<std::uint64_t, std::size_t> about_at;  // runtime -> about_ticks[]
};

void note_about(Extent& x, std::uint64_t t) {
  auto [it, fresh] = x.about_at.emplace(x.about, x.about_ticks.size());
  if (fresh) x.about_ticks.push_back({x.about, t, t, 0});
  AboutRuntime& a = x.about_ticks[it->second];
  a.last = t;
  ++a.events;
}

}  // namespace

std::uint64_t TraceIndex::to_ns(std::uint64_t t) const {
  if (t <= origin_ticks) return 0;
  const double ns = double(t - origin_ticks) * ns_per_tick + 0.5;
  return ns < 9.0e18 ? std::uint64_t(ns) : std::uint64_t(9.0e18);  // a damaged tick count: no overflow
}

// The format version that brought an event type (format.hpp): a file of
// an older version holds none of it.
static std::uint32_t version_of(EventType t) noexcept {
  switch (t) {
    case EventType::kRuntime:
    case EventType::kJoin:
      return 2;
    case EventType::kSchedExt:
      return 3;
    case EventType::kSliceYield:
      return 4;
    default:
      return 1;
  }
}

TraceIndex index_trace(const std::string& path, bool allow_cut) {
  File f;
  f.path = path;
  std::uint64_t size = 0;
  f.fd = open_trace(path, &size);

  TraceIndex ix;
  ix.path = path;
  ix.bytes = size;
  if (size < sizeof(FileHeader)) {
    char magic[8];
    if (size >= 8) {
      f.read_at(magic, 8, 0);
      if (std::memcmp(magic, kMagic, 8) != 0) bad(path, 0, "not a parkway trace (no PWTRACE magic)");
    }
    bad(path, size, "truncated: the file header needs " + std::to_string(sizeof(FileHeader)) + " bytes, the file has " +
                        std::to_string(size));
  }
  f.read_at(&ix.header, sizeof(FileHeader), 0);
  const FileHeader& h = ix.header;
  if (std::memcmp(h.magic, kMagic, 8) != 0) bad(path, 0, "not a parkway trace (no PWTRACE magic)");
  if (h.version < kOldestVersion || h.version > kVersion)
    bad(path, 8, "format version " + std::to_string(h.version) + "; this parkway reads versions " +
                     std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  if (h.header_bytes < sizeof(FileHeader) || h.header_bytes > size)
    bad(path, 12, "corrupt header: header size " + std::to_string(h.header_bytes));
  if (h.clock != std::uint32_t(Clock::kTsc) && h.clock != std::uint32_t(Clock::kMonotonic))
    bad(path, 16, "corrupt header: unknown clock " + std::to_string(h.clock));
  if (h.level != std::uint32_t(Level::kSched) && h.level != std::uint32_t(Level::kTask))
    bad(path, 20, "corrupt header: unknown level " + std::to_string(h.level));
  // Linux's PID_MAX_LIMIT (the export numbers a process per runtime from it).
  if (h.pid > 4194304) bad(path, 24, "corrupt header: pid " + std::to_string(h.pid));

  std::map<std::uint32_t, std::size_t> index;  // stream id -> streams[]
  std::map<std::uint64_t, std::int32_t> highest_worker;  // runtime -> its highest worker index
  std::uint64_t tracks = 0;
  std::vector<Extent> extent;
  ClockSync first_clock{h.start_ticks, h.start_ns}, last_clock = first_clock;
  std::uint64_t chunk_dropped = 0;
  std::vector<Event> block(kBlockEvents);
  std::uint64_t off = h.header_bytes;
  while (off < size) {
    if (ix.complete) bad(path, off, "corrupt: data after the end record");
    // With allow_cut, a record the file ends inside (a running process
    // is writing it) is where the file is cut.
    if (size - off < sizeof(RecordHeader)) {
      if (allow_cut) break;
      bad(path, off, "truncated: a record header needs " + std::to_string(sizeof(RecordHeader)) + " bytes, " +
                         std::to_string(size - off) + " left");
    }
    RecordHeader r;
    f.read_at(&r, sizeof r, off);
    if (r.magic != kRecordMagic) bad(path, off, "corrupt: no record marker (PWRC) where a record should start");
    const std::uint64_t body = off + sizeof r;
    if (r.payload_bytes > size - body) {
      if (allow_cut) break;
      bad(path, off, std::string("truncated: a ") + kind_name(r.kind) + " record of " +
                         std::to_string(r.payload_bytes) + " bytes, " + std::to_string(size - body) + " left");
    }
    switch (RecordKind(r.kind)) {
      case RecordKind::kStream: {
        if (r.payload_bytes != sizeof(StreamInfo))
          bad(path, off, "corrupt: a stream record of " + std::to_string(r.payload_bytes) + " bytes (want " +
                             std::to_string(sizeof(StreamInfo)) + ")");
        if (index.count(r.stream)) bad(path, off, "corrupt: stream " + std::to_string(r.stream) + " described twice");
        StreamIndex s;
        s.id = r.stream;
        s.record = off;
        f.read_at(&s.info, sizeof s.info, body);
        s.info.name[sizeof s.info.name - 1] = 0;
        // Printed in the report and written into JSON and SVG: plain ASCII only.
        for (char& c : s.info.name)
          if (c && (c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&')) c = '?';
        if (s.info.worker < -1 || s.info.worker >= 4096)
          bad(path, off, "corrupt: stream " + std::to_string(r.stream) + " names worker " +
                             std::to_string(s.info.worker));
        // What the reader will hold for it: a track per worker index up
        // to the highest of each runtime, one per other thread.
        if (s.info.worker >= 0) {
          auto [w, fresh] = highest_worker.emplace(s.info.runtime, s.info.worker);
          if (fresh && highest_worker.size() > kMaxRuntimes)
            bad(path, off, "stream " + std::to_string(r.stream) + " names runtime " +
                               std::to_string(highest_worker.size()) + "; this reader holds at most " +
                               std::to_string(kMaxRuntimes));
          tracks += fresh ? std::uint64_t(s.info.worker) + 1 : std::uint64_t(std::max(0, s.info.worker - w->second));
          w->second = std::max(w->second, s.info.worker);
        } else {
          ++tracks;
        }
        if (tracks > kMaxTracks)
          bad(path, off, "stream " + std::to_string(r.stream) + " makes " + std::to_string(tracks) +
                             " threads to show (worker indexes and other threads); this reader holds at most " +
                             std::to_string(kMaxTracks));
        if (s.info.worker >= 0) extent.emplace_back().about = s.info.runtime;  // a worker's own by default
        else extent.emplace_back();
        index[r.stream] = ix.streams.size();
        ix.streams.push_back(std::move(s));
        break;
      }
      case RecordKind::kChunk: {
        if (r.payload_bytes < sizeof(ChunkInfo) || (r.payload_bytes - sizeof(ChunkInfo)) % sizeof(Event) != 0)
          bad(path, off, "corrupt: a chunk of " + std::to_string(r.payload_bytes) +
                             " bytes is not 8 + a multiple of 16");
        auto it = index.find(r.stream);
        if (it == index.end())
          bad(path, off, "corrupt: a chunk of stream " + std::to_string(r.stream) + " before its stream record");
        StreamIndex& s = ix.streams[it->second];
        Extent& x = extent[it->second];
        ChunkInfo ci;
        f.read_at(&ci, sizeof ci, body);
        s.dropped += ci.dropped_before;
        chunk_dropped += ci.dropped_before;
        const std::uint64_t n = (r.payload_bytes - sizeof ci) / sizeof(Event);
        const std::uint64_t events_at = body + sizeof ci;
        for (std::uint64_t done = 0; done < n;) {
          const std::size_t k = std::size_t(std::min<std::uint64_t>(kBlockEvents, n - done));
          f.read_at(block.data(), k * sizeof(Event), events_at + done * sizeof(Event));
          for (std::size_t i = 0; i < k; ++i) {
            const Event& e = block[i];
            const std::uint64_t at = events_at + (done + i) * sizeof(Event);
            if (!event_name(e.type)) bad(path, at + 8, "corrupt: unknown event type " + std::to_string(e.type));
            if (const std::uint32_t v = version_of(EventType(e.type)); v > h.version)
              bad(path, at + 8,
                  std::string("corrupt: a ") + event_name(e.type) + " event, which came with format version " +
                      std::to_string(v) + ", in a version " + std::to_string(h.version) + " file");
            if (h.level == std::uint32_t(Level::kSched) && e.type >= std::uint8_t(EventType::kSpawn))
              bad(path, at + 8,
                  std::string("corrupt: a task-level event (") + event_name(e.type) + ") in a scheduling-level trace");
            const std::uint64_t t = s.events == 0 ? e.ticks : std::max(e.ticks, x.last);
            if (s.events++ == 0) x.first = t;
            x.last = t;
            if (EventType(e.type) == EventType::kRuntime)
              x.about = event_task(e);
            else if (follows_runtime_events(s.info, e) && (s.info.worker < 0 || x.about != s.info.runtime))
              note_about(x, t);
          }
          done += k;
        }
        if (n) s.last_chunk = off, s.chunks.push_back(off);
        ix.events += n;
        break;
      }
      case RecordKind::kClock: {
        if (r.payload_bytes != sizeof(ClockSync))
          bad(path, off, "corrupt: a clock record of " + std::to_string(r.payload_bytes) + " bytes");
        f.read_at(&last_clock, sizeof last_clock, body);
        break;
      }
      case RecordKind::kEnd: {
        if (r.payload_bytes != sizeof(EndInfo))
          bad(path, off, "corrupt: an end record of " + std::to_string(r.payload_bytes) + " bytes");
        EndInfo e;
        f.read_at(&e, sizeof e, body);
        if (e.events != ix.events)
          bad(path, off, "corrupt: the end record counts " + std::to_string(e.events) + " events, the chunks hold " +
                             std::to_string(ix.events));
        ix.dropped = e.dropped;
        last_clock = {e.ticks, e.ns};
        ix.complete = true;
        break;
      }
      default:
        bad(path, off, "corrupt: unknown record kind " + std::to_string(r.kind));
    }
    off = body + r.payload_bytes;
  }
  ix.data_end = off;
  if (!ix.complete) {
    if (!allow_cut)
      bad(path, size, "truncated: the file ends without its end record (did the traced process exit normally?); "
                      "--partial reads what is there");
    ix.dropped = chunk_dropped;
  }

  const ClockSync& a = first_clock;
  const ClockSync& b = last_clock;
  ix.origin_ticks = a.ticks;
  if (h.clock == std::uint32_t(Clock::kTsc) && b.ticks > a.ticks && b.ns > a.ns)
    ix.ns_per_tick = double(b.ns - a.ns) / double(b.ticks - a.ticks);
  std::uint64_t last = 0;
  for (std::size_t i = 0; i < ix.streams.size(); ++i) {
    StreamIndex& s = ix.streams[i];
    const Extent& x = extent[i];
    if (s.events) {
      s.first = ix.to_ns(x.first);
      s.last = ix.to_ns(x.last);
      last = std::max(last, s.last);
    }
    for (const AboutRuntime& r : x.about_ticks) s.about.push_back({r.runtime, ix.to_ns(r.first), ix.to_ns(r.last), r.events});
  }
  ix.end_ns = std::max(last, b.ticks > a.ticks ? ix.to_ns(b.ticks) : last);
  return ix;
}

// ---- EventReader --------------------------------------------------------

struct EventReader::Cursor {
  const std::vector<std::uint64_t>* chunks = nullptr;  // StreamIndex::chunks
  std::size_t next_chunk = 0;    // chunks[] to read next
  std::uint64_t chunk_at = 0;    // the current chunk's next unread event
  std::uint64_t chunk_left = 0;  // its events not yet read
  std::vector<Event> block;      // read, ticks converted
  std::size_t pos = 0;
  std::uint64_t prev = 0;        // the last time read (ns); before the first block, the stream's first
};

EventReader::EventReader(const TraceIndex& ix) : ix_(ix) {
  std::uint64_t size = 0;
  fd_ = open_trace(ix.path, &size);
  if (size < ix.data_end) {
    ::close(fd_);
    throw FormatError(ix.path + ": byte " + std::to_string(size) + ": the file shrank while it was read");
  }
  cursors_.resize(ix.streams.size());
  // A stream's blocks are read when its next event comes up (next): a
  // trace of many threads one after another holds the blocks of those
  // that overlap in time, not a block of every thread at once.
  for (std::size_t i = 0; i < cursors_.size(); ++i) {
    cursors_[i].chunks = &ix.streams[i].chunks;
    cursors_[i].prev = ix.streams[i].first;
    if (ix.streams[i].events) heap_.push_back(i);
  }
  std::make_heap(heap_.begin(), heap_.end(), [this](std::size_t a, std::size_t b) { return later(a, b); });
}

EventReader::~EventReader() {
  if (fd_ >= 0) ::close(fd_);
}

// Makes block[pos] the cursor's next event; false when the stream has no more.
bool EventReader::refill(Cursor& c) {
  if (c.pos < c.block.size()) return true;
  while (c.chunk_left == 0) {
    if (c.next_chunk >= c.chunks->size()) {
      std::vector<Event>().swap(c.block);  // its memory too
      c.pos = 0;
      return false;
    }
    const std::uint64_t at = (*c.chunks)[c.next_chunk++];
    RecordHeader r;
    read_exact(fd_, ix_.path, &r, sizeof r, at);
    if (r.magic != kRecordMagic || RecordKind(r.kind) != RecordKind::kChunk || r.payload_bytes <= sizeof(ChunkInfo))
      bad(ix_.path, at, "the file changed while it was read");
    c.chunk_at = at + sizeof r + sizeof(ChunkInfo);
    c.chunk_left = (r.payload_bytes - sizeof(ChunkInfo)) / sizeof(Event);
  }
  const std::size_t k = std::size_t(std::min<std::uint64_t>(kBlockEvents, c.chunk_left));
  c.block.resize(k);
  read_exact(fd_, ix_.path, c.block.data(), k * sizeof(Event), c.chunk_at);
  c.chunk_at += k * sizeof(Event);
  c.chunk_left -= k;
  c.pos = 0;
  for (Event& e : c.block) {
    e.ticks = std::max(ix_.to_ns(e.ticks), c.prev);
    c.prev = e.ticks;
  }
  return true;
}

// Cursor a's next event comes after cursor b's: by time, a spawn first at
// the same ns (it is matched to the run it starts), then by stream. A
// cursor whose block is used up (or not read yet) stands at `prev` as if
// a spawn: its next event is no earlier.
bool EventReader::later(std::size_t a, std::size_t b) const {
  auto key = [this](std::size_t i) {
    const Cursor& c = cursors_[i];
    if (c.pos == c.block.size()) return std::make_tuple(c.prev, false, i);
    const Event& e = c.block[c.pos];
    return std::make_tuple(e.ticks, e.type != std::uint8_t(EventType::kSpawn), i);
  };
  return key(a) > key(b);
}

bool EventReader::next(Item* out) {
  auto later = [this](std::size_t a, std::size_t b) { return this->later(a, b); };
  for (;;) {
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const std::size_t i = heap_.back();
    Cursor& c = cursors_[i];
    if (c.pos == c.block.size()) {  // its turn: its next block read, then it takes its place again
      if (refill(c))
        std::push_heap(heap_.begin(), heap_.end(), later);
      else
        heap_.pop_back();
      continue;
    }
    out->stream = i;
    out->event = c.block[c.pos++];
    std::push_heap(heap_.begin(), heap_.end(), later);
    return true;
  }
}

}  // namespace parkway::tracetool
