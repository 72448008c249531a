// env_choice.hpp -- the library's environment variables that pick one of a
// few values (PARKWAY_MEMBARRIER, PARKWAY_IO_WAKE, PARKWAY_IO_SETUP,
// PARKWAY_IO_IOWAIT, PARKWAY_SCHED_EXT). An unset or empty variable means
// the default. A value that is none of those accepted is a mistake the
// user should hear of: env_choice names the variable, the value, the
// values accepted and what is done instead on stderr, and the default
// applies. (The numbers PARKWAY_WORKER_SLICE_US and PARKWAY_TRACE_CHUNK
// are checked where they are read: runtime.cpp, trace/recorder.cpp.)
#pragma once

#include <initializer_list>

namespace parkway::detail {

// The index in `accepted` of the variable's value (compared exactly), or
// -1 when it is unset, empty or not accepted; in the last case a line on
// stderr: "parkway: NAME=VALUE is not one of A, B, ...; FALLBACK".
int env_choice(const char* name, std::initializer_list<const char*> accepted, const char* fallback) noexcept;

}  // namespace parkway::detail
