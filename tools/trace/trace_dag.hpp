// trace_dag.hpp -- work and span of a task-level trace (Cilkscale's
// measures): the task graph rebuilt from spawns, task runs and joins, as
// the events come, keeping only the runs not yet done.
//
// Algorithm outline (docs/design/tracing.md, "Work and span"):
//   - Each task run is a chain of strands: its own time (the time it is the
//     innermost span of its worker: not in a nested task, a search or a
//     park), cut by spawn points and join points.
//   - A spawn point of run T is an edge to the run of the task it spawned
//     (matched by address, the first start after the spawn).
//   - A join point of T: a `join` event (a wait that blocked or helped
//     returned once its group finished) joins every child spawned so far;
//     the end of a task run nested in T (T was in a wait) joins the
//     children that had ended by then; T's end joins the children that
//     started before it (a group made in a task finishes before the task
//     returns). A child started after its parent ended is detached.
//   - A run's longest path from its start: path += own time between
//     points; at a join, path = max(path, path at the child's spawn + the
//     child's path). Its reach: max(path, path at each child's spawn + that
//     child's reach), joined or detached. Burdened: each spawn edge on a
//     path adds kBurdenNs.
//   - Span: the largest reach of a root (a task no recorded spawn made:
//     injected from outside the pool); roots count as parallel.
//
// Bounded memory: a run is done once it has ended and every child its
// spawns started is done; then its path and reach are computed from its
// points and its children's, the children are freed, and it waits only for
// its parent. The runs held are the live ones and their done children
// (each run's points included): for a recursive computation, the spawn tree
// along the workers' current paths.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace parkway::tracetool {

// The burden charged per spawn edge on the burdened span (Cilkview charges
// 15,000 instructions per continuation edge, He, Leiserson and Leiserson,
// SPAA 2010; 5 us is that at 3 instructions per ns, and the order of a
// steal that crosses cores and fences with membarrier on this machine).
inline constexpr std::uint64_t kBurdenNs = 5000;

struct WorkSpan {
  bool valid = false;  // a task-level trace with at least one run
  std::uint64_t work = 0, span = 0, burdened_span = 0;
  std::uint64_t runs = 0, roots = 0, spawn_edges = 0;
  std::uint64_t joins_recorded = 0;  // `join` events
  std::uint64_t joins_nested = 0;    // ends of runs nested in their parent
  std::uint64_t joined_at_end = 0;   // children first joined by their parent's end
  std::uint64_t detached = 0;        // children started after their parent ended
};

class TaskGraph {
 public:
  using RunId = std::uint32_t;
  static constexpr RunId kNoRun = UINT32_MAX;

  // A task starts on a worker; its spawn (if one was recorded) is its parent's.
  RunId begin_run(std::uint64_t task, std::uint64_t at);
  void add_self(RunId r, std::uint64_t ns) { runs_[r].self += ns; }
  void spawn(RunId r, std::uint64_t at, std::uint64_t task);
  void join_event(RunId r, std::uint64_t at);
  void join_nested(RunId r, std::uint64_t at);
  void end_run(RunId r, std::uint64_t at);
  // Every run has ended (the trace's end): the rest are done, then the totals.
  WorkSpan finish();
  std::size_t held() const { return runs_.size() - free_.size(); }  // runs in memory

 private:
  enum class PointKind : std::uint8_t { kSpawn, kJoinEvent, kJoinNested };
  struct Point {
    std::uint64_t at;    // ns since the trace start
    std::uint64_t self;  // the run's own time up to `at`
    RunId child;         // kSpawn: the run it started, kNoRun: none (yet)
    PointKind kind;
  };
  struct Run {
    std::uint64_t begin = 0, end = 0, self = 0;
    RunId parent = kNoRun;
    std::uint32_t spawn_point = 0;  // its spawn in the parent's points
    std::uint32_t waiting_for = 0;  // spawns of it whose run is not done (or not started)
    bool ended = false, done = false;
    std::vector<Point> points;      // until done
    // Done: its longest path and reach from its start (plain and burdened).
    std::uint64_t path = 0, path_b = 0, reach = 0, reach_b = 0;
    std::uint64_t at_spawn = 0, at_spawn_b = 0;  // the parent's path at its spawn (while the parent is computed)
  };
  struct Spawned {  // a spawn whose run has not started
    RunId run;
    std::uint32_t point;
  };

  void add_point(RunId r, Point p);
  void maybe_done(RunId r);
  void compute(RunId r);
  void release(RunId r);

  std::vector<Run> runs_;
  std::vector<RunId> free_;
  std::unordered_map<std::uint64_t, Spawned> spawned_;  // task address -> its spawn
  WorkSpan ws_;
};

}  // namespace parkway::tracetool
