// trace_model.hpp -- what a trace says happened: per worker its spans
// (tasks, searches, parks; they nest), and the steals and wakes between
// workers. analyse() builds it in one pass over the events in time order,
// keeping counts, sketches and per-slice sums, not the events: the report
// reads the models; the JSON export takes each span, steal, wake and
// migration as it is found (ModelSink).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace_dag.hpp"
#include "trace_file.hpp"
#include "trace_sketch.hpp"

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
  // A worker index of runtimes made one after another at one address: the
  // time between one of its threads' last event and the next one's first
  // (no thread then; in no state, not in time_in).
  std::uint64_t gone = 0;
  std::uint64_t time_in[kStates] = {};
  std::uint64_t dropped = 0;
  std::uint64_t events = 0;
  std::uint64_t spawns = 0, runs = 0, steals = 0, stolen = 0, injected_taken = 0, io_submits = 0, io_completes = 0;
  std::uint64_t steal_fences = 0, park_fences = 0, notifies = 0, slice_yields = 0;
  // The sched_ext scheduler's decisions about it, by kind (SchedExtKind).
  std::uint64_t sched_ext[4] = {};
};

// The kinds of kSchedExt events (bpf/parkway_sched.h, parkway_sched_event_kind).
enum SchedExtKind { kScxOther = 0, kScxBusyPromote = 1, kScxKeepPrev = 2, kScxYieldToBusy = 3 };
const char* sched_ext_name(unsigned kind);

struct Steal {
  std::uint64_t at;
  int thief, victim;
  std::uint32_t count;
};

struct Wake {
  std::uint64_t at;
  std::size_t track;          // the waker's track (tracks[])
  int waker, wakee;           // waker -1: outside the pool
  bool asleep = false;        // its hand-off (the unpark it caused) ended a park
  std::uint64_t unpark = 0;   // that unpark (asleep only; not before `at`)
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

// Each track's time in each State per slice of [from, to): `bins` equal
// slices (the report's parallelism chart, the SVG's pixel columns).
// A track's row is kept as runs: slices that one state held whole (a span
// over them) are one run, only the slices where the state changed hold
// a cell of their own. A row's memory follows the track's state changes
// (the file), and at most its slices; a track idle for the whole trace
// is one run, however many slices it covers.
struct StateGrid {
  using Cell = std::array<double, kStates>;
  static constexpr std::uint8_t kMixed = 0xff;
  struct Run {
    unsigned lo = 0, n = 0;  // slices lo .. lo + n - 1
    std::uint32_t at = 0;    // kMixed: their cells are cells[at .. at + n)
    std::uint8_t state = kMixed;  // else: each slice wholly in this state
  };
  struct Row {
    std::vector<Run> runs;  // by slice, disjoint
    std::vector<Cell> cells;
  };
  std::uint64_t from = 0, to = 0;
  unsigned bins = 0;
  // [track]: every track's, or only the workers' (GridSpec::every_track);
  // a track without a row reads as 0.
  std::vector<Row> share;
  // Called in time order per track.
  void add(std::size_t track, std::uint64_t begin, std::uint64_t end, std::uint8_t state);
  // Track `track`'s ns in `state` in slice k (0 outside its row).
  double at(std::size_t track, unsigned k, unsigned state) const;
  // Its cells, all `bins` of them (zeros outside its row), into *out.
  void cells(std::size_t track, std::vector<Cell>* out) const;
  // The ns a span over all of slice k adds to it (as add() sums it).
  double whole(unsigned k) const {
    const double width = double(to - from) / bins;
    return (k + 1) * width - k * width;
  }

 private:
  void put(Row& row, unsigned k, std::uint8_t state, double ns);
};
struct GridSpec {
  std::uint64_t from = 0, to = 0;  // to <= from: the model's active window
  unsigned bins = 0;
  bool every_track = false;  // a row per track (the SVG); else the workers' only (parallelism())
};

struct WakeStats {
  std::uint64_t count = 0, asleep = 0, found_nothing = 0;
  QuantileSketch to_unpark, to_run;  // wake -> unpark, wake -> first task start
  std::map<std::pair<int, int>, std::uint64_t> by_pair;          // (waker, wakee): wakes
  std::map<std::pair<int, int>, QuantileSketch> unpark_by_pair;  // wake -> unpark
  // Submissions from outside that woke a sleeping worker, step by step.
  QuantileSketch sub_wake, sub_unpark, sub_wake_unpark, sub_unpark_run, sub_run;
};

struct Model {
  bool task_level = false;
  std::uint64_t end_ns = 0;
  std::uint64_t runtime = 0;       // the runtime analysed (a process may hold several)
  std::size_t index = 0;           // its place among the file's runtimes (by first event)
  // Options::name, read from its workers' thread names ("<name>-w<index>");
  // empty when they do not all carry one name that way (a worker renamed).
  std::string name;
  std::vector<Track> tracks;       // workers first (by index), then outside threads
  unsigned workers = 0;            // tracks[0..workers) are workers; index == worker
  std::pair<std::uint64_t, std::uint64_t> window{0, 0};  // [first, last] event of any track
  std::uint64_t steal_count = 0;
  std::map<std::pair<int, int>, std::pair<std::uint64_t, std::uint64_t>> steals;  // (thief, victim): steals, tasks
  WakeStats wakes;
  QuantileSketch park_ns;                     // each park's duration (closed parks)
  QuantileSketch task_ns;                     // each task's duration, nested tasks included
  std::map<int, std::uint64_t> task_ns_log2;  // task durations by power of two (< 128 ns: 7)
  std::uint64_t work_ns = 0;                  // sum of task time, nested tasks counted once
  WorkSpan work_span;                         // task level, AnalyseOptions::work_span
  std::size_t dag_runs_held = 0;              // the most task runs the graph held at once
  std::uint64_t migrations = 0;
  // Idle while work was queued elsewhere (task level): worker-ns.
  std::uint64_t idle_with_work_searching = 0, idle_with_work_parked = 0, idle_with_work_descheduled = 0;
  bool kernel_view = false;  // off_cpu/on_cpu events are in the trace
  bool sched_ext = false;    // the sched_ext scheduler's events are in the trace
  // Tasks queued (spawned or injected, not started), pool-wide, sampled:
  // (ns, count) at most one point per 1/4000 of the trace.
  std::vector<std::pair<std::uint64_t, std::int64_t>> queued;
  // The same per queue, [0, workers) each worker's deque and [workers] the
  // injection queue (task level: spawns, steals, injection takes, starts).
  std::vector<std::vector<std::pair<std::uint64_t, std::int64_t>>> queue_len;
  std::vector<StateGrid> grids;  // as AnalyseOptions::grids asked
  std::uint64_t injected = 0, dropped = 0, events = 0;
  bool complete = true;
};

// What the JSON export writes as the pass finds it.
struct ModelSink {
  virtual ~ModelSink() = default;
  virtual void span(const Model&, std::size_t /*track*/, const Span&) {}
  virtual void steal(const Model&, const Steal&) {}
  virtual void wake(const Model&, const Wake&) {}
  virtual void migration(const Model&, const Migration&) {}
  virtual void sched_ext(const Model&, std::size_t /*track*/, std::uint64_t /*at*/, unsigned /*kind*/,
                         unsigned /*cpu*/) {}
};

struct AnalyseOptions {
  bool work_span = false;       // rebuild the task graph (the report)
  std::vector<GridSpec> grids;  // per model, in this order
  ModelSink* sink = nullptr;
};

// One model per runtime of the file (its worker streams' RuntimeImpl
// addresses, by first event; runtimes made one after another at one address
// are one), each with its workers and the events of threads outside the
// pool that are about it (kRuntime events say which; those before a
// thread's first go with the first runtime's model). No worker stream at
// all: one model of the outside threads.
std::vector<Model> analyse(const TraceIndex& ix, const AnalyseOptions& opt);

// Workers running tasks (task level; else not searching or parked) in
// each slice of the grid: the average count.
std::vector<double> parallelism(const Model& m, const StateGrid& g);

}  // namespace parkway::tracetool
