// trace_file.hpp -- reading a parkway trace file (userspace/trace/format.hpp)
// into memory, every record checked; an error names the byte offset.
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

struct Stream {
  std::uint32_t id = 0;
  trace_format::StreamInfo info{};
  std::vector<trace_format::Event> events;  // ticks converted to ns since the trace start
  std::uint64_t dropped = 0;                // as the chunk headers say
};

struct TraceFile {
  trace_format::FileHeader header{};
  std::vector<Stream> streams;  // in the order their stream records came
  std::uint64_t end_ns = 0;     // the trace's end, ns since its start
  std::uint64_t events = 0;
  std::uint64_t dropped = 0;  // all streams (the end record's count, or the chunks' when cut)
  bool complete = false;      // the end record was there
  std::uint64_t bytes = 0;
};

// Reads and checks `path`. With allow_cut, a file that stops at a record
// boundary without its end record (the process did not exit normally) is
// read as far as it goes; without it, that is an error too.
TraceFile read_trace(const std::string& path, bool allow_cut);

const char* event_name(std::uint8_t type);

}  // namespace parkway::tracetool
