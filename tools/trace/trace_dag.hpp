// trace_dag.hpp -- work and span of a task-level trace (Cilkscale's
// measures): the task graph rebuilt from spawns, task runs and joins.
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
//   - Children before parents, each run's longest path from its start:
//     path += own time between points; at a join,
//     path = max(path, path at the child's spawn + the child's path).
//     Burdened: each spawn edge on a path adds kBurdenNs.
//   - Span: the longest path of any run from its root (a task no recorded
//     spawn made: injected from outside the pool); roots count as parallel.
#pragma once

#include <cstdint>
#include <vector>

namespace parkway::tracetool {

// The burden charged per spawn edge on the burdened span (Cilkview charges
// 15,000 instructions per continuation edge, He, Leiserson and Leiserson,
// SPAA 2010; 5 us is that at 3 instructions per ns, and the order of a
// steal that crosses cores and fences with membarrier on this machine).
inline constexpr std::uint64_t kBurdenNs = 5000;

enum class DagPointKind : std::uint8_t { kSpawn, kJoinEvent, kJoinNested };

inline constexpr std::uint32_t kNoPoint = UINT32_MAX;

struct DagPoint {
  std::uint64_t at;     // ns since the trace start
  std::uint64_t self;   // the run's own time up to `at`
  std::uint64_t task;   // kSpawn: the spawned task's address
  std::uint32_t child;  // kSpawn: the run it started + 1 (work_span fills it in), 0: none
  std::uint32_t next;   // the run's next point (TaskGraph::points), or kNoPoint
  DagPointKind kind;
};

struct TaskRun {
  std::uint64_t task = 0, begin = 0, end = 0;
  std::uint64_t self = 0;  // own time, all told
  int worker = -1;
  bool waiting = false;  // in a blocking wait (while the model is built)
  std::uint32_t first = kNoPoint, last = kNoPoint;  // its points, in time order (a list in TaskGraph::points)
};

// The runs and their points, the points of all runs in one array (a run's
// points interleave with those of the runs nested in it).
struct TaskGraph {
  std::vector<TaskRun> runs;
  std::vector<DagPoint> points;
  void add_point(std::uint32_t run, DagPoint p) {
    p.next = kNoPoint;
    const auto i = std::uint32_t(points.size());
    points.push_back(p);
    TaskRun& r = runs[run];
    (r.last == kNoPoint ? r.first : points[r.last].next) = i;
    r.last = i;
  }
};

struct WorkSpan {
  bool valid = false;  // a task-level trace with at least one run
  std::uint64_t work = 0, span = 0, burdened_span = 0;
  std::uint64_t runs = 0, roots = 0, spawn_edges = 0;
  std::uint64_t joins_recorded = 0;  // `join` events
  std::uint64_t joins_nested = 0;    // ends of runs nested in their parent
  std::uint64_t joined_at_end = 0;   // children first joined by their parent's end
  std::uint64_t detached = 0;        // children started after their parent ended
};

WorkSpan work_span(TaskGraph& g);

}  // namespace parkway::tracetool
