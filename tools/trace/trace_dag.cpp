// trace_dag.cpp -- work_span: spawns matched to runs, then each run's
// longest path, children first, then each run's distance from its root in
// order of run start.
#include "trace_dag.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace parkway::tracetool {

namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

struct Node {
  std::uint32_t parent = kNone;
  std::uint64_t at_spawn = 0, at_spawn_b = 0;  // the parent's path (burdened) at the spawn
  std::uint64_t path = 0, path_b = 0;          // longest path from this run's start (burdened)
};

// For each spawn point, the run it started (DagPoint::child): the first
// run of that address starting after it (an address is reused only once
// its task has run).
void link_spawns(TaskGraph& g, std::vector<Node>& nodes) {
  struct Ev {
    std::uint64_t at, task;
    std::uint32_t run, point;  // point == kNone: a run's start
  };
  std::vector<Ev> evs;
  for (std::uint32_t r = 0; r < g.runs.size(); ++r) {
    evs.push_back({g.runs[r].begin, g.runs[r].task, r, kNone});
    for (std::uint32_t p = g.runs[r].first; p != kNoPoint; p = g.points[p].next)
      if (g.points[p].kind == DagPointKind::kSpawn) evs.push_back({g.points[p].at, g.points[p].task, r, p});
  }
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.at != b.at ? a.at < b.at : (a.point != kNone) > (b.point != kNone);  // a spawn before a start at the same ns
  });
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> spawned;  // task -> (run, point)
  for (const Ev& e : evs) {
    if (e.point != kNone) {
      spawned[e.task] = {e.run, e.point};
      continue;
    }
    auto it = spawned.find(e.task);
    if (it == spawned.end()) continue;  // a root: injected, or its spawn was not recorded
    nodes[e.run].parent = it->second.first;
    g.points[it->second.second].child = e.run + 1;
    spawned.erase(it);
  }
}

// Children before their parent: a post-order of the spawn tree (its
// child lists laid out flat, by parent).
std::vector<std::uint32_t> children_first(const std::vector<Node>& nodes) {
  const std::size_t n = nodes.size();
  std::vector<std::uint32_t> first(n + 1, 0), child(n);
  for (const Node& x : nodes)
    if (x.parent != kNone) ++first[x.parent + 1];
  for (std::size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  std::vector<std::uint32_t> fill(first.begin(), first.end() - 1);
  for (std::uint32_t i = 0; i < n; ++i)
    if (nodes[i].parent != kNone) child[fill[nodes[i].parent]++] = i;
  std::vector<std::uint32_t> order;
  order.reserve(n);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> stack;  // (run, next child slot)
  for (std::uint32_t root = 0; root < n; ++root) {
    if (nodes[root].parent != kNone) continue;
    stack.push_back({root, first[root]});
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next < first[r + 1]) {
        const std::uint32_t c = child[next++];
        stack.push_back({c, first[c]});
      } else {
        order.push_back(r);
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace

WorkSpan work_span(TaskGraph& g) {
  const std::vector<TaskRun>& runs = g.runs;
  WorkSpan ws;
  if (runs.empty() || runs.size() >= kNone) return ws;  // none, or beyond a 32-bit run index
  ws.valid = true;
  ws.runs = runs.size();
  std::vector<Node> nodes(runs.size());
  link_spawns(g, nodes);
  const std::vector<std::uint32_t> order = children_first(nodes);
  std::vector<std::uint32_t> pending;  // the run's children spawned, not yet joined
  for (std::uint32_t r : order) {
    const TaskRun& run = runs[r];
    pending.clear();
    std::uint64_t path = 0, path_b = 0, self = 0;
    // Joins the pending children that `joined` says are joined here.
    auto join = [&](auto joined) {
      std::size_t keep = 0;
      for (std::uint32_t c : pending) {
        if (!joined(c)) {
          pending[keep++] = c;
          continue;
        }
        const Node& cn = nodes[c];
        path = std::max(path, cn.at_spawn + cn.path);
        path_b = std::max(path_b, cn.at_spawn_b + kBurdenNs + cn.path_b);
      }
      pending.resize(keep);
    };
    for (std::uint32_t p = run.first; p != kNoPoint; p = g.points[p].next) {
      const DagPoint& pt = g.points[p];
      path += pt.self - self;
      path_b += pt.self - self;
      self = pt.self;
      switch (pt.kind) {
        case DagPointKind::kSpawn: {
          ++ws.spawn_edges;
          if (pt.child == 0) break;  // never started in the trace
          const std::uint32_t c = pt.child - 1;
          nodes[c].at_spawn = path;
          nodes[c].at_spawn_b = path_b;
          pending.push_back(c);
          break;
        }
        case DagPointKind::kJoinEvent:
          // The wait returned once its group had finished: every child
          // spawned so far (a child's run end is recorded a moment after
          // the completion that let the wait return, so it may come later).
          ++ws.joins_recorded;
          join([](std::uint32_t) { return true; });
          break;
        case DagPointKind::kJoinNested:
          // The run was in a wait: the children that had ended by then.
          ++ws.joins_nested;
          join([&](std::uint32_t c) { return runs[c].end <= pt.at; });
          break;
      }
    }
    path += run.self - self;
    path_b += run.self - self;
    // A group made in a task finishes before the task returns: the
    // children that started before this run ended are joined by its end.
    const std::size_t before_end = pending.size();
    join([&](std::uint32_t c) { return runs[c].begin <= run.end; });
    ws.joined_at_end += before_end - pending.size();
    ws.detached += pending.size();
    nodes[r].path = path;
    nodes[r].path_b = path_b;
  }

  // Top-down, in order of run start: each run's distance from its root.
  std::vector<std::size_t> by_begin(runs.size());
  std::iota(by_begin.begin(), by_begin.end(), 0);
  std::sort(by_begin.begin(), by_begin.end(), [&](std::size_t a, std::size_t b) { return runs[a].begin < runs[b].begin; });
  std::vector<std::uint64_t> from_root(runs.size(), 0), from_root_b(runs.size(), 0);
  for (std::size_t r : by_begin) {
    const Node& n = nodes[r];
    ws.work += runs[r].self;
    if (n.parent == kNone) {
      ++ws.roots;
    } else {
      from_root[r] = from_root[n.parent] + n.at_spawn;
      from_root_b[r] = from_root_b[n.parent] + n.at_spawn_b + kBurdenNs;
    }
    ws.span = std::max(ws.span, from_root[r] + n.path);
    ws.burdened_span = std::max(ws.burdened_span, from_root_b[r] + n.path_b);
  }
  return ws;
}

}  // namespace parkway::tracetool
