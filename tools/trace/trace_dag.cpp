// trace_dag.cpp -- TaskGraph: spawns matched to runs as runs start; a run
// is computed (its points walked, its children joined) once it is done,
// then its children are freed.
#include "trace_dag.hpp"

#include <algorithm>

namespace parkway::tracetool {

void TaskGraph::add_point(RunId r, Point p) { runs_[r].points.push_back(p); }

TaskGraph::RunId TaskGraph::begin_run(std::uint64_t task, std::uint64_t at) {
  RunId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    runs_[id] = Run();
  } else {
    id = RunId(runs_.size());
    runs_.emplace_back();
  }
  Run& run = runs_[id];
  run.begin = run.end = at;
  ++ws_.runs;
  if (auto it = spawned_.find(task); it != spawned_.end()) {
    run.parent = it->second.run;
    run.spawn_point = it->second.point;
    runs_[run.parent].points[run.spawn_point].child = id;
    spawned_.erase(it);
  } else {
    ++ws_.roots;  // injected, or its spawn was not recorded
  }
  return id;
}

void TaskGraph::spawn(RunId r, std::uint64_t at, std::uint64_t task) {
  Run& run = runs_[r];
  ++run.waiting_for;
  auto [it, fresh] = spawned_.try_emplace(task, Spawned{r, std::uint32_t(run.points.size())});
  add_point(r, {at, run.self, kNoRun, PointKind::kSpawn});
  if (!fresh) {  // the address spawned again before its first spawn started: that one never did
    const RunId old = it->second.run;
    it->second = {r, std::uint32_t(runs_[r].points.size() - 1)};
    --runs_[old].waiting_for;
    maybe_done(old);
  }
}

void TaskGraph::join_event(RunId r, std::uint64_t at) { add_point(r, {at, runs_[r].self, kNoRun, PointKind::kJoinEvent}); }

void TaskGraph::join_nested(RunId r, std::uint64_t at) { add_point(r, {at, runs_[r].self, kNoRun, PointKind::kJoinNested}); }

void TaskGraph::end_run(RunId r, std::uint64_t at) {
  if (runs_[r].ended) return;
  runs_[r].end = at;
  runs_[r].ended = true;
  maybe_done(r);
}

// r and then its ancestors, as far as each is done.
void TaskGraph::maybe_done(RunId r) {
  while (r != kNoRun) {
    Run& run = runs_[r];
    if (!run.ended || run.waiting_for || run.done) return;
    compute(r);
    run.done = true;
    run.points = std::vector<Point>();
    const RunId parent = run.parent;
    if (parent == kNoRun) {
      ws_.span = std::max(ws_.span, run.reach);
      ws_.burdened_span = std::max(ws_.burdened_span, run.reach_b);
      release(r);
      return;
    }
    --runs_[parent].waiting_for;
    r = parent;
  }
}

void TaskGraph::release(RunId r) {
  runs_[r] = Run();
  free_.push_back(r);
}

// r's path and reach from its points and its (done) children's; then the
// children are freed.
void TaskGraph::compute(RunId r) {
  Run& run = runs_[r];
  std::vector<RunId> pending;  // its children spawned, not yet joined
  std::uint64_t path = 0, path_b = 0, self = 0;
  // Joins the pending children that `joined` says are joined here.
  auto join = [&](auto joined) {
    std::size_t keep = 0;
    for (RunId c : pending) {
      if (!joined(runs_[c])) {
        pending[keep++] = c;
        continue;
      }
      const Run& cr = runs_[c];
      path = std::max(path, cr.at_spawn + cr.path);
      path_b = std::max(path_b, cr.at_spawn_b + kBurdenNs + cr.path_b);
    }
    pending.resize(keep);
  };
  for (const Point& pt : run.points) {
    path += pt.self - self;
    path_b += pt.self - self;
    self = pt.self;
    switch (pt.kind) {
      case PointKind::kSpawn:
        ++ws_.spawn_edges;
        if (pt.child == kNoRun) break;  // never started in the trace
        runs_[pt.child].at_spawn = path;
        runs_[pt.child].at_spawn_b = path_b;
        pending.push_back(pt.child);
        break;
      case PointKind::kJoinEvent:
        // The wait returned once its group had finished: every child
        // spawned so far (a child's run end is recorded a moment after
        // the completion that let the wait return, so it may come later).
        ++ws_.joins_recorded;
        join([](const Run&) { return true; });
        break;
      case PointKind::kJoinNested:
        // The run was in a wait: the children that had ended by then.
        ++ws_.joins_nested;
        join([&](const Run& c) { return c.end <= pt.at; });
        break;
    }
  }
  path += run.self - self;
  path_b += run.self - self;
  // A group made in a task finishes before the task returns: the
  // children that started before this run ended are joined by its end.
  const std::size_t before_end = pending.size();
  join([&](const Run& c) { return c.begin <= run.end; });
  ws_.joined_at_end += before_end - pending.size();
  ws_.detached += pending.size();
  ws_.work += run.self;
  run.path = path;
  run.path_b = path_b;
  run.reach = path;
  run.reach_b = path_b;
  for (const Point& pt : run.points) {
    if (pt.kind != PointKind::kSpawn || pt.child == kNoRun) continue;
    const Run& c = runs_[pt.child];
    run.reach = std::max(run.reach, c.at_spawn + c.reach);
    run.reach_b = std::max(run.reach_b, c.at_spawn_b + kBurdenNs + c.reach_b);
    release(pt.child);
  }
}

WorkSpan TaskGraph::finish() {
  // Spawns that never started: their parents wait no more.
  std::vector<RunId> parents;
  for (const auto& [task, s] : spawned_) {
    --runs_[s.run].waiting_for;
    parents.push_back(s.run);
  }
  spawned_.clear();
  for (RunId p : parents) maybe_done(p);
  ws_.valid = ws_.runs > 0;
  return ws_;
}

}  // namespace parkway::tracetool
