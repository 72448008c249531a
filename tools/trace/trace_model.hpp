// trace_model.hpp -- what a trace says happened: per worker its spans
// (tasks, searches, parks; they nest), and the steals and wakes between
// workers. Built once from a TraceFile; the report and the exports read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace_dag.hpp"
#include "trace_file.hpp"

namespace parkway::tracetool {

enum class SpanKind : std::uint8_t { kTask, kSearch, kPark, kDescheduled };

// A span on one track, [begin, end) in ns since the trace start. Spans of
// a track nest: a task may hold a search or park (a helping wait) and the
// tasks that wait ran.
struct Span {
  std::uint64_t begin, end;
  SpanKind kind;
  std::uint16_t depth;  // 0: outermost
  bool closed;          // its end event was recorded (else: the track's last event)
  std::uint64_t task;   // kTask: its address
};

// What a worker did with its time, by the innermost span at each instant.
// "other": inside none (between tasks: the scheduler, or at the scheduling
// level, tasks too, which it does not record). "descheduled": preempted by
// the OS while runnable (only in traces with the kernel's view).
enum State { kRunning = 0, kSearching = 1, kParked = 2, kOther = 3, kDescheduled = 4, kStates = 5 };

struct Track {
  std::string label;    // "w0", or "outside tid 1234"
  int worker = -1;      // -1: a thread outside the pool
  std::uint32_t tid = 0;
  std::uint64_t first = 0, last = 0;  // its first and last event
  std::vector<Span> spans;            // in begin order
  // Its State from each instant on: (ns, State), in time order, from `first`.
  std::vector<std::pair<std::uint64_t, std::uint8_t>> states;
  std::uint64_t time_in[kStates] = {};
  std::uint64_t dropped = 0;
  std::uint64_t events = 0;
  std::uint64_t spawns = 0, runs = 0, steals = 0, stolen = 0, injected_taken = 0, io_submits = 0, io_completes = 0;
  std::uint64_t steal_fences = 0, park_fences = 0, notifies = 0;
};

struct Steal {
  std::uint64_t at;
  int thief, victim;
  std::uint32_t count;
};

struct Wake {
  std::uint64_t at;
  std::size_t track;          // the waker's track (tracks[])
  int waker, wakee;           // waker -1: outside the pool
  bool asleep = false;        // the wakee was parked when woken
  std::uint64_t unpark = 0;   // its unpark (asleep only)
  std::uint64_t run = 0;      // its first task start after that (task level), else 0
  std::uint64_t injected = 0; // the waker's inject just before this wake (a submission), else 0
  bool found_nothing = false; // it parked again before finding work
};

// A task's start on a worker other than the one that spawned it (task
// level): the steal seen per task, for flow arrows.
struct Migration {
  std::uint64_t spawned_at, started_at;
  int from, to;
};

struct Model {
  bool task_level = false;
  std::uint64_t end_ns = 0;
  std::uint64_t runtime = 0;       // the runtime analysed (a process may hold several)
  std::vector<Track> tracks;       // workers first (by index), then outside threads
  unsigned workers = 0;            // tracks[0..workers) are workers; index == worker
  std::vector<Steal> steals;
  std::vector<Wake> wakes;
  std::vector<std::uint64_t> park_ns;        // each park's duration (closed parks)
  std::vector<std::uint64_t> task_ns;        // each task's duration, nested tasks included
  std::uint64_t work_ns = 0;                 // sum of task time, nested tasks counted once
  bool with_work_span = false;               // build_model was asked for work_span
  TaskGraph graph;                          // while the model is built
  WorkSpan work_span;                        // task level, with_work_span
  std::vector<Migration> migrations;
  // Idle while work was queued elsewhere (task level): worker-ns.
  std::uint64_t idle_with_work_searching = 0, idle_with_work_parked = 0, idle_with_work_descheduled = 0;
  bool kernel_view = false;  // off_cpu/on_cpu events are in the trace
  // Tasks queued (spawned or injected, not started), pool-wide, sampled:
  // (ns, count) at most one point per 1/4000 of the trace.
  std::vector<std::pair<std::uint64_t, std::int64_t>> queued;
  // The same per queue, [0, workers) each worker's deque and [workers] the
  // injection queue (task level: spawns, steals, injection takes, starts).
  std::vector<std::vector<std::pair<std::uint64_t, std::int64_t>>> queue_len;
  std::uint64_t injected = 0, dropped = 0, events = 0;
  bool complete = true;
};

// The runtimes of the file's worker streams (their RuntimeImpl addresses;
// runtimes made one after another at one address are one), by first event.
std::vector<std::uint64_t> trace_runtimes(const TraceFile& tf);
// The model of one runtime: its workers, and the events of threads outside
// the pool that are about it (kRuntime events say which; those before a
// thread's first go with `first_runtime`'s model).
// with_work_span: rebuild the task graph for work_span (the report; the
// exports do without it).
Model build_model(const TraceFile& tf, std::uint64_t runtime, bool first_runtime, bool with_work_span);

// Workers running tasks (task level; else not searching or parked) in
// `bins` equal slices of [from, to) (default: the whole trace): the
// average count in each.
std::vector<double> parallelism(const Model& m, unsigned bins, std::uint64_t from = 0, std::uint64_t to = 0);
// [first, last] event of any track: where something happened.
std::pair<std::uint64_t, std::uint64_t> active_window(const Model& m);

// The q-th quantile (0..1) of v (sorted in place).
std::uint64_t quantile(std::vector<std::uint64_t>& v, double q);

}  // namespace parkway::tracetool
