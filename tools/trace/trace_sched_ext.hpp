// trace_sched_ext.hpp -- the sched_ext scheduler's decisions about
// registered workers, read from the BPF ring buffer `parkway sched load`
// pins (bpf/parkway_sched.h, PARKWAY_PIN_EVENTS) for `parkway trace record`.
// Plain bpf(2) and mmap: the command builds without libbpf.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/format.hpp"

namespace parkway::tracetool {

struct SchedExtRecord {
  std::uint64_t ns;  // CLOCK_MONOTONIC
  std::uint32_t tgid, tid, kind, worker, cpu;
};

class SchedExtEvents {
 public:
  // Opens the pinned ring; false (with why) if the scheduler is not loaded
  // or the ring cannot be mapped.
  bool open(std::string* why);
  ~SchedExtEvents();
  // Appends every record the ring holds now and frees its space.
  void drain(std::vector<SchedExtRecord>* out);

 private:
  int fd_ = -1;
  std::size_t size_ = 0, page_ = 0;
  void* consumer_ = nullptr;  // the consumer position page (read-write)
  void* producer_ = nullptr;  // the producer position page, then the data twice (read-only)
};

// A record as a trace event (kSchedExt) of its thread.
trace_format::Event sched_ext_event(const SchedExtRecord& r);

}  // namespace parkway::tracetool
