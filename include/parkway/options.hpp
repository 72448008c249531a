// parkway/options.hpp -- construction options of a parkway::Runtime.
#pragma once

#include <cstddef>

#include "parkway/export.hpp"

namespace parkway {

// Number of CPUs this process may run on (sched_getaffinity), at least 1.
PARKWAY_API unsigned online_cpus() noexcept;

struct Options {
  // Worker threads. Valid: 1..4096. Default: the CPUs this process may use.
  unsigned workers = online_cpus();

  // Rounds of stealing a worker tries before it parks (each round visits
  // every other worker once and the injection queue). Valid: 1..1000000.
  unsigned search_rounds = 32;

  // Guard the shared injection queue's multi-CAS operations with
  // priority-tag transactions, which make them starvation-free (every
  // submission's retries stay bounded under contention). The queue is
  // lock-free and correct either way; false is for ablation experiments
  // (docs/design/priority-tags.md).
  bool priority_tags = true;

  // Worker thread names are "<name>-w<index>" (Linux limits the whole name
  // to 15 characters). Valid: 1..8 characters, no '/'. The runtime keeps
  // its own copy (Runtime::options().name points at it).
  const char* name = "parkway";
};

// Upper bound on Options::workers.
inline constexpr unsigned kMaxWorkers = 4096;

}  // namespace parkway
