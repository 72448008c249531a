// trace_file.cpp -- read_trace: the file mapped, each record checked in
// turn; the first thing wrong ends the read with the offset of its byte.
#include "trace_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

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
    case EventType::kInject: return "inject";
    case EventType::kIoSubmit: return "io_submit";
    case EventType::kIoComplete: return "io_complete";
    case EventType::kOffCpu: return "off_cpu";
    case EventType::kOnCpu: return "on_cpu";
    case EventType::kRuntime: return "runtime";
    case EventType::kSpawn: return "spawn";
    case EventType::kRunBegin: return "run_begin";
    case EventType::kRunEnd: return "run_end";
    case EventType::kJoin: return "join";
  }
  return nullptr;
}

namespace {

[[noreturn]] void bad(const std::string& path, std::uint64_t at, const std::string& what) {
  throw FormatError(path + ": byte " + std::to_string(at) + ": " + what);
}

// The mapped file, unmapped on every way out.
struct Mapping {
  const unsigned char* p = nullptr;
  std::size_t n = 0;
  ~Mapping() {
    if (p && n) munmap(const_cast<unsigned char*>(p), n);
  }
};

const char* kind_name(std::uint16_t k) {
  switch (RecordKind(k)) {
    case RecordKind::kStream: return "stream";
    case RecordKind::kChunk: return "chunk";
    case RecordKind::kClock: return "clock";
    case RecordKind::kEnd: return "end";
  }
  return "?";
}

}  // namespace

TraceFile read_trace(const std::string& path, bool allow_cut) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat: " + std::strerror(e));
  }
  Mapping m;
  m.n = std::size_t(st.st_size);
  if (m.n) {
    void* p = mmap(nullptr, m.n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw std::runtime_error(path + ": cannot map: " + std::strerror(e));
    }
    m.p = static_cast<const unsigned char*>(p);
  }
  ::close(fd);

  TraceFile tf;
  tf.bytes = m.n;
  if (m.n < sizeof(FileHeader)) {
    if (m.n >= 8 && std::memcmp(m.p, kMagic, 8) != 0) bad(path, 0, "not a parkway trace (no PWTRACE magic)");
    bad(path, m.n, "truncated: the file header needs " + std::to_string(sizeof(FileHeader)) + " bytes, the file has " +
                       std::to_string(m.n));
  }
  std::memcpy(&tf.header, m.p, sizeof(FileHeader));
  const FileHeader& h = tf.header;
  if (std::memcmp(h.magic, kMagic, 8) != 0) bad(path, 0, "not a parkway trace (no PWTRACE magic)");
  if (h.version < kOldestVersion || h.version > kVersion)
    bad(path, 8, "format version " + std::to_string(h.version) + "; this parkway reads versions " +
                     std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  if (h.header_bytes < sizeof(FileHeader) || h.header_bytes > m.n)
    bad(path, 12, "corrupt header: header size " + std::to_string(h.header_bytes));
  if (h.clock != std::uint32_t(Clock::kTsc) && h.clock != std::uint32_t(Clock::kMonotonic))
    bad(path, 16, "corrupt header: unknown clock " + std::to_string(h.clock));
  if (h.level != std::uint32_t(Level::kSched) && h.level != std::uint32_t(Level::kTask))
    bad(path, 20, "corrupt header: unknown level " + std::to_string(h.level));

  std::map<std::uint32_t, std::size_t> index;  // stream id -> streams[]
  std::vector<ClockSync> clocks{{h.start_ticks, h.start_ns}};
  std::uint64_t chunk_dropped = 0;
  std::uint64_t off = h.header_bytes;
  while (off < m.n) {
    if (tf.complete) bad(path, off, "corrupt: data after the end record");
    if (m.n - off < sizeof(RecordHeader))
      bad(path, off, "truncated: a record header needs " + std::to_string(sizeof(RecordHeader)) + " bytes, " +
                         std::to_string(m.n - off) + " left");
    RecordHeader r;
    std::memcpy(&r, m.p + off, sizeof r);
    if (r.magic != kRecordMagic) bad(path, off, "corrupt: no record marker (PWRC) where a record should start");
    const std::uint64_t body = off + sizeof r;
    if (r.payload_bytes > m.n - body)
      bad(path, off, std::string("truncated: a ") + kind_name(r.kind) + " record of " +
                         std::to_string(r.payload_bytes) + " bytes, " + std::to_string(m.n - body) + " left");
    const unsigned char* pl = m.p + body;
    switch (RecordKind(r.kind)) {
      case RecordKind::kStream: {
        if (r.payload_bytes != sizeof(StreamInfo))
          bad(path, off, "corrupt: a stream record of " + std::to_string(r.payload_bytes) + " bytes (want " +
                             std::to_string(sizeof(StreamInfo)) + ")");
        if (index.count(r.stream)) bad(path, off, "corrupt: stream " + std::to_string(r.stream) + " described twice");
        Stream s;
        s.id = r.stream;
        std::memcpy(&s.info, pl, sizeof s.info);
        s.info.name[sizeof s.info.name - 1] = 0;
        // Printed in the report and written into JSON and SVG: plain ASCII only.
        for (char& c : s.info.name)
          if (c && (c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&')) c = '?';
        if (s.info.worker < -1 || s.info.worker >= 4096)
          bad(path, off, "corrupt: stream " + std::to_string(r.stream) + " names worker " +
                             std::to_string(s.info.worker));
        index[r.stream] = tf.streams.size();
        tf.streams.push_back(std::move(s));
        break;
      }
      case RecordKind::kChunk: {
        if (r.payload_bytes < sizeof(ChunkInfo) || (r.payload_bytes - sizeof(ChunkInfo)) % sizeof(Event) != 0)
          bad(path, off, "corrupt: a chunk of " + std::to_string(r.payload_bytes) +
                             " bytes is not 8 + a multiple of 16");
        auto it = index.find(r.stream);
        if (it == index.end())
          bad(path, off, "corrupt: a chunk of stream " + std::to_string(r.stream) + " before its stream record");
        Stream& s = tf.streams[it->second];
        ChunkInfo ci;
        std::memcpy(&ci, pl, sizeof ci);
        s.dropped += ci.dropped_before;
        chunk_dropped += ci.dropped_before;
        const std::size_t n = (r.payload_bytes - sizeof ci) / sizeof(Event);
        const std::size_t first = s.events.size();
        s.events.resize(first + n);
        std::memcpy(s.events.data() + first, pl + sizeof ci, n * sizeof(Event));
        for (std::size_t i = 0; i < n; ++i) {
          const Event& e = s.events[first + i];
          if (!event_name(e.type))
            bad(path, body + sizeof ci + i * sizeof(Event) + 8, "corrupt: unknown event type " + std::to_string(e.type));
          if (h.level == std::uint32_t(Level::kSched) && e.type >= std::uint8_t(EventType::kSpawn))
            bad(path, body + sizeof ci + i * sizeof(Event) + 8,
                std::string("corrupt: a task-level event (") + event_name(e.type) + ") in a scheduling-level trace");
        }
        tf.events += n;
        break;
      }
      case RecordKind::kClock: {
        if (r.payload_bytes != sizeof(ClockSync))
          bad(path, off, "corrupt: a clock record of " + std::to_string(r.payload_bytes) + " bytes");
        ClockSync c;
        std::memcpy(&c, pl, sizeof c);
        clocks.push_back(c);
        break;
      }
      case RecordKind::kEnd: {
        if (r.payload_bytes != sizeof(EndInfo))
          bad(path, off, "corrupt: an end record of " + std::to_string(r.payload_bytes) + " bytes");
        EndInfo e;
        std::memcpy(&e, pl, sizeof e);
        if (e.events != tf.events)
          bad(path, off, "corrupt: the end record counts " + std::to_string(e.events) + " events, the chunks hold " +
                             std::to_string(tf.events));
        tf.dropped = e.dropped;
        clocks.push_back({e.ticks, e.ns});
        tf.complete = true;
        break;
      }
      default:
        bad(path, off, "corrupt: unknown record kind " + std::to_string(r.kind));
    }
    off = body + r.payload_bytes;
  }
  if (!tf.complete) {
    if (!allow_cut)
      bad(path, m.n, "truncated: the file ends without its end record (did the traced process exit normally?); "
                     "--partial reads what is there");
    tf.dropped = chunk_dropped;
  }

  // ticks -> ns since the start: the line through the first and last clock pairs.
  const ClockSync& a = clocks.front();
  const ClockSync& b = clocks.back();
  double ns_per_tick = 1.0;
  if (h.clock == std::uint32_t(Clock::kTsc)) {
    if (b.ticks > a.ticks && b.ns > a.ns) ns_per_tick = double(b.ns - a.ns) / double(b.ticks - a.ticks);
  }
  auto to_ns = [&](std::uint64_t t) -> std::uint64_t {
    if (t <= a.ticks) return 0;
    const double ns = double(t - a.ticks) * ns_per_tick + 0.5;
    return ns < 9.0e18 ? std::uint64_t(ns) : std::uint64_t(9.0e18);  // a damaged tick count: no overflow
  };
  std::uint64_t last = 0;
  for (Stream& s : tf.streams) {
    std::uint64_t prev = 0;
    for (Event& e : s.events) {
      e.ticks = to_ns(e.ticks);
      if (e.ticks < prev) e.ticks = prev;  // a thread's clock never goes back (a TSC that did, by a tick)
      prev = e.ticks;
    }
    if (prev > last) last = prev;
  }
  tf.end_ns = std::max(last, b.ticks > a.ticks ? to_ns(b.ticks) : last);
  return tf;
}

}  // namespace parkway::tracetool
