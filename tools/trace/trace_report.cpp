// trace_report.cpp -- `parkway trace report`: the model as text a person
// reads in a terminal (docs/tracing.md explains each section).
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "trace_tool.hpp"

namespace parkway::tracetool {

std::string fmt_ns(double ns) {
  char b[32];
  if (ns < 1e3)
    std::snprintf(b, sizeof b, "%.0f ns", ns);
  else if (ns < 1e6)
    std::snprintf(b, sizeof b, "%.1f us", ns / 1e3);
  else if (ns < 1e9)
    std::snprintf(b, sizeof b, "%.2f ms", ns / 1e6);
  else
    std::snprintf(b, sizeof b, "%.2f s", ns / 1e9);
  return b;
}

namespace {

std::string pct(double part, double whole) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return b;
}

std::string name_of(int w) { return w < 0 ? std::string("out") : "w" + std::to_string(w); }

void percentiles(std::FILE* o, const char* what, const QuantileSketch& v) {
  if (v.empty()) {
    std::fprintf(o, "  %-26s none\n", what);
    return;
  }
  std::fprintf(o, "  %-26s n=%llu  p50 %s  p90 %s  p99 %s  max %s\n", what, (unsigned long long)v.count(),
               fmt_ns(double(v.quantile(0.5))).c_str(), fmt_ns(double(v.quantile(0.9))).c_str(),
               fmt_ns(double(v.quantile(0.99))).c_str(), fmt_ns(double(v.max())).c_str());
}

// A matrix of rows x columns of `cell(r, c)` strings, "-" on the diagonal
// when `diag`; row and column names from name_of.
template <class Cell>
void matrix(std::FILE* o, const std::vector<int>& rows, const std::vector<int>& cols, Cell cell) {
  std::fprintf(o, "    %8s", "");
  for (int c : cols) std::fprintf(o, " %12s", name_of(c).c_str());
  std::fprintf(o, "\n");
  for (int r : rows) {
    std::fprintf(o, "    %8s", name_of(r).c_str());
    for (int c : cols) std::fprintf(o, " %12s", cell(r, c).c_str());
    std::fprintf(o, "\n");
  }
}

void section_workers(std::FILE* o, const Model& m) {
  std::fprintf(o, "\nWorkers: share of each worker's traced time (first to last event)\n");
  const char* other = m.task_level ? "between" : "running*";
  std::fprintf(o, "    %-6s %10s %9s %9s %9s %9s %9s %9s %9s %10s %9s\n", "worker", "traced", "running", "searching",
               "parked", other, "desched", "tasks", "spawns", "stole", "dropped");
  for (unsigned w = 0; w < m.workers; ++w) {
    const Track& t = m.tracks[w];
    double total = double(t.last - t.first - t.gone);
    std::fprintf(o, "    %-6s %10s %9s %9s %9s %9s %9s %9llu %9llu %10llu %9llu\n", t.label.c_str(), fmt_ns(total).c_str(),
                 m.task_level ? pct(double(t.time_in[kRunning]), total).c_str() : "-",
                 pct(double(t.time_in[kSearching]), total).c_str(), pct(double(t.time_in[kParked]), total).c_str(),
                 pct(double(t.time_in[kOther]), total).c_str(),
                 m.kernel_view ? pct(double(t.time_in[kDescheduled]), total).c_str() : "-", (unsigned long long)t.runs,
                 (unsigned long long)t.spawns, (unsigned long long)t.stolen, (unsigned long long)t.dropped);
  }
  if (m.task_level)
    std::fprintf(o, "    running: inside a task; between: the worker loop between tasks\n");
  else
    std::fprintf(o, "    running*: neither searching nor parked (tasks and the loop; PARKWAY_TRACE_LEVEL=task splits them)\n");
  if (m.kernel_view)
    std::fprintf(o, "    desched: preempted by the OS while runnable (sched_switch)\n");
  else
    std::fprintf(o, "    desched: not seen by in-process capture (it counts as the state the worker was in; "
                    "`parkway trace record` sees it)\n");
  std::uint64_t io_sub = 0, io_done = 0;
  for (const Track& t : m.tracks) io_sub += t.io_submits, io_done += t.io_completes;
  if (io_sub || io_done) {
    std::fprintf(o, "    I/O operations submitted/completed (to a ring, or done at the co_await; Stats: io_ops + "
                    "io_sent_now + io_read_now):");
    for (unsigned w = 0; w < m.workers; ++w)
      std::fprintf(o, " %s %llu/%llu", m.tracks[w].label.c_str(), (unsigned long long)m.tracks[w].io_submits,
                   (unsigned long long)m.tracks[w].io_completes);
    std::fprintf(o, ", all %llu/%llu\n", (unsigned long long)io_sub, (unsigned long long)io_done);
  }
  std::uint64_t yields = 0;
  for (const Track& t : m.tracks) yields += t.slice_yields;
  if (yields) {
    std::fprintf(o, "    slice yields (a worker with a ring ended its kernel slice between tasks):");
    for (unsigned w = 0; w < m.workers; ++w)
      std::fprintf(o, " %s %llu", m.tracks[w].label.c_str(), (unsigned long long)m.tracks[w].slice_yields);
    std::fprintf(o, ", all %llu\n", (unsigned long long)yields);
  }
  for (std::size_t i = m.workers; i < m.tracks.size(); ++i) {
    const Track& t = m.tracks[i];
    std::fprintf(o, "    outside: %s, %llu events (parked %s)\n", t.label.c_str(), (unsigned long long)t.events,
                 fmt_ns(double(t.time_in[kParked])).c_str());
  }
}

// What the sched_ext scheduler decided about each worker (docs/design/sched-ext.md).
void section_sched_ext(std::FILE* o, const Model& m) {
  if (!m.sched_ext) return;
  std::fprintf(o, "\nThe sched_ext scheduler's decisions about each worker (parkway sched load)\n");
  std::fprintf(o, "    %-6s %13s %13s %13s %9s\n", "worker", "busy_promote", "keep_prev", "yield_to_busy", "other");
  for (unsigned w = 0; w < m.workers; ++w) {
    const Track& t = m.tracks[w];
    std::fprintf(o, "    %-6s %13llu %13llu %13llu %9llu\n", t.label.c_str(), (unsigned long long)t.sched_ext[kScxBusyPromote],
                 (unsigned long long)t.sched_ext[kScxKeepPrev], (unsigned long long)t.sched_ext[kScxYieldToBusy],
                 (unsigned long long)t.sched_ext[kScxOther]);
  }
  std::fprintf(o, "    busy_promote: preempted while busy, queued ahead of its program's thieves; keep_prev: its\n"
                  "    slice ran out, it kept the CPU (still ahead of the queue); yield_to_busy: searching, it\n"
                  "    gave its CPU to a busy sibling that waited\n");
}

void section_steals(std::FILE* o, const Model& m) {
  std::fprintf(o, "\nSteals: %llu, thief (row) by victim (column): steals/tasks moved\n", (unsigned long long)m.steal_count);
  if (m.steals.empty() || m.workers == 0) return;
  // The workers that stole or were stolen from: a row and a column each
  // (not every index up to the highest, which a file names in a few bytes).
  std::vector<int> ws;
  for (const auto& [k, n] : m.steals)
    for (int w : {k.first, k.second})
      if (w >= 0 && unsigned(w) < m.workers) ws.push_back(w);
  std::sort(ws.begin(), ws.end());
  ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
  if (ws.empty()) return;
  matrix(o, ws, ws, [&](int r, int c) -> std::string {
    if (r == c) return "-";
    auto it = m.steals.find({r, c});
    if (it == m.steals.end()) return "0";
    return std::to_string(it->second.first) + "/" + std::to_string(it->second.second);
  });
}

void section_parks_wakes(std::FILE* o, const Model& m) {
  const WakeStats& ws = m.wakes;
  std::fprintf(o, "\nParks and wakes\n");
  percentiles(o, "park duration", m.park_ns);
  std::fprintf(o, "  wakes: %llu, %llu of them found the worker asleep (the rest left a token)\n",
               (unsigned long long)ws.count, (unsigned long long)ws.asleep);
  percentiles(o, "wake -> unpark", ws.to_unpark);
  if (m.task_level)
    percentiles(o, "wake -> first task start", ws.to_run);
  else
    std::fprintf(o, "  %-26s needs PARKWAY_TRACE_LEVEL=task\n", "wake -> first task start");
  std::fprintf(o, "  woken, then parked again before finding work: %llu of %llu (%s)\n",
               (unsigned long long)ws.found_nothing, (unsigned long long)ws.asleep,
               pct(double(ws.found_nothing), double(ws.asleep)).c_str());
  // A submission that woke a sleeper, step by step: the submitter's push
  // and wake (its FUTEX_WAKE included), the kernel bringing the sleeper
  // back, the sleeper finding the task.
  if (!ws.sub_wake.empty()) {
    std::fprintf(o, "  submissions from outside that woke a sleeping worker: %llu, step by step\n",
                 (unsigned long long)ws.sub_wake.count());
    percentiles(o, "  submit -> wake", ws.sub_wake);
    percentiles(o, "  wake -> unpark", ws.sub_wake_unpark);
    if (m.task_level) {
      percentiles(o, "  unpark -> task start", ws.sub_unpark_run);
      percentiles(o, "  submit -> task start", ws.sub_run);
    }
  }
  if (ws.by_pair.empty()) return;
  std::vector<int> rows, cols;
  for (const auto& [k, n] : ws.by_pair) {
    if (std::find(rows.begin(), rows.end(), k.first) == rows.end()) rows.push_back(k.first);
    if (std::find(cols.begin(), cols.end(), k.second) == cols.end()) cols.push_back(k.second);
  }
  std::sort(rows.begin(), rows.end());
  std::sort(cols.begin(), cols.end());
  std::fprintf(o, "  waker (row; out: a thread outside the pool) by wakee (column): wakes, p50 wake -> unpark\n");
  matrix(o, rows, cols, [&](int r, int c) -> std::string {
    auto it = ws.by_pair.find({r, c});
    if (it == ws.by_pair.end()) return "0";
    auto lt = ws.unpark_by_pair.find({r, c});
    if (lt == ws.unpark_by_pair.end()) return std::to_string(it->second);
    return std::to_string(it->second) + " " + fmt_ns(double(lt->second.quantile(0.5)));
  });
}

void section_tasks(std::FILE* o, const Model& m) {
  std::fprintf(o, "\nTasks\n");
  if (!m.task_level) {
    std::fprintf(o, "  task durations, work, stolen tasks and idleness while work was queued need PARKWAY_TRACE_LEVEL=task\n");
    return;
  }
  percentiles(o, "task duration", m.task_ns);
  // Powers of two of ns, from < 128 ns up.
  const std::map<int, std::uint64_t>& hist = m.task_ns_log2;
  std::uint64_t most = 0;
  for (const auto& [b, n] : hist) most = std::max(most, n);
  for (const auto& [b, n] : hist) {
    std::string lo = b == 7 ? std::string("0") : fmt_ns(double(1ull << (b - 1)));
    std::string hi = fmt_ns(double(1ull << b));
    int bar = most ? int(std::lround(50.0 * double(n) / double(most))) : 0;
    std::fprintf(o, "    %9s .. %-9s %9llu %s\n", lo.c_str(), hi.c_str(), (unsigned long long)n, std::string(std::max(bar, n ? 1 : 0), '#').c_str());
  }
  std::fprintf(o, "  tasks started on another worker than the one that spawned them: %llu\n",
               (unsigned long long)m.migrations);
}

// Cilkscale's measures of the task graph (trace_dag.hpp says how it is rebuilt).
void section_work_span(std::FILE* o, const WorkSpan& ws, std::size_t held) {
  if (!ws.valid || ws.span == 0) {
    std::fprintf(o, "  work/span: no task ran on a worker in the trace\n");
    return;
  }
  std::fprintf(o, "\nWork and span of the task graph (%llu task runs, %llu roots, %llu spawn edges)\n",
               (unsigned long long)ws.runs, (unsigned long long)ws.roots, (unsigned long long)ws.spawn_edges);
  auto us = [](std::uint64_t ns) { return double(ns) / 1e3; };
  std::fprintf(o, "  work %.1f us, span %.1f us: parallelism %.2f\n", us(ws.work), us(ws.span),
               double(ws.work) / double(ws.span));
  std::fprintf(o, "  burdened span %.1f us (%.1f us per spawn edge on a path): burdened parallelism %.2f\n",
               us(ws.burdened_span), us(kBurdenNs), double(ws.work) / double(ws.burdened_span));
  std::fprintf(o, "  joins: %llu waits that blocked or helped, %llu nested task ends; %llu children joined at "
                  "their parent's end, %llu started after it (joined later, as a coroutine's co_await does, or "
                  "detached)\n",
               (unsigned long long)ws.joins_recorded, (unsigned long long)ws.joins_nested,
               (unsigned long long)ws.joined_at_end, (unsigned long long)ws.detached);
  std::fprintf(o, "  the graph held at most %zu task runs at once (those not done, and their children)\n", held);
  if (ws.roots > 1)
    std::fprintf(o, "  the %llu roots (runs no spawn started: submissions from outside the pool, and "
                    "coroutines resumed by an I/O completion) count as parallel: the span is the "
                    "longest of their graphs, so a chain of I/O waits is not in it\n", (unsigned long long)ws.roots);
}

void section_parallelism(std::FILE* o, const Model& m) {
  // The report's grid (kReportGrid): 40 slices of the active window.
  const StateGrid& g = m.grids.at(0);
  const unsigned bins = g.bins;
  const std::uint64_t t0 = g.from, t1 = g.to;
  std::vector<double> p = parallelism(m, g);
  std::fprintf(o, "\nParallelism over time: workers %s, %u slices of %s from %s (the first event) to %s\n",
               m.task_level ? "running tasks" : "neither searching nor parked", bins,
               fmt_ns(double(t1 - t0) / bins).c_str(), fmt_ns(double(t0)).c_str(), fmt_ns(double(t1)).c_str());
  // A row per worker that recorded something (the most that can be busy
  // at once), not per index up to the highest.
  unsigned active = 0;
  for (unsigned w = 0; w < m.workers; ++w) active += m.tracks[w].events > 0;
  const int rows = int(std::max(1u, active));
  for (int r = rows; r >= 1; --r) {
    std::fprintf(o, "    %3d |", r);
    for (double x : p) std::fputc(x >= r - 0.5 ? '#' : (x >= r - 0.75 ? '.' : ' '), o);
    std::fprintf(o, "\n");
  }
  std::fprintf(o, "        +%s\n", std::string(bins, '-').c_str());
  if (m.task_level) {
    std::fprintf(o, "  work (time inside tasks, all workers): %s over %s: average parallelism %.2f of %u workers\n",
                 fmt_ns(double(m.work_ns)).c_str(), fmt_ns(double(t1 - t0)).c_str(),
                 t1 > t0 ? double(m.work_ns) / double(t1 - t0) : 0.0, m.workers);
    section_work_span(o, m.work_span, m.dag_runs_held);
    double idle = 0;
    for (unsigned w = 0; w < m.workers; ++w) idle += double(m.tracks[w].time_in[kSearching] + m.tracks[w].time_in[kParked]);
    std::fprintf(o, "\nIdle while work was queued (a worker searching or parked while a spawned task waited to start)\n");
    std::fprintf(o, "  searching %s, parked %s (worker-time; %s of all searching and parked time)\n",
                 fmt_ns(double(m.idle_with_work_searching)).c_str(), fmt_ns(double(m.idle_with_work_parked)).c_str(),
                 pct(double(m.idle_with_work_searching + m.idle_with_work_parked), idle).c_str());
  }
}

}  // namespace

void write_report(const TraceIndex& tf, const std::vector<Model>& models, std::FILE* o) {
  const std::string& path = tf.path;
  const auto& h = tf.header;
  unsigned workers = 0;
  for (const Model& m : models) workers += m.workers;
  const bool task_level = h.level == std::uint32_t(trace_format::Level::kTask);
  std::fprintf(o, "parkway trace %s\n", path.c_str());
  const std::string named =
      models.size() == 1 && !models[0].name.empty() ? " (\"" + models[0].name + "\")" : std::string();
  std::fprintf(o, "  pid %u, level %s, clock %s, %u workers, %zu runtime%s%s, %s traced, %llu events, %llu dropped%s\n",
               h.pid, task_level ? "task" : "sched", h.clock == 1 ? "tsc" : "monotonic", workers, models.size(),
               models.size() == 1 ? "" : "s", named.c_str(), fmt_ns(double(tf.end_ns)).c_str(), (unsigned long long)tf.events,
               (unsigned long long)tf.dropped, tf.complete ? "" : " (file cut: no end record)");
  if (tf.dropped)
    std::fprintf(o, "  DROPPED %llu events: the writer fell behind; spans around them may be wrong "
                    "(a larger PARKWAY_TRACE_CHUNK helps)\n", (unsigned long long)tf.dropped);
  for (std::size_t k = 0; k < models.size(); ++k) {
    const Model& m = models[k];
    if (models.size() > 1)
      std::fprintf(o, "\n==== Runtime %zu of %zu%s (id 0x%llx): %u workers ====\n", k + 1, models.size(),
                   m.name.empty() ? "" : (" \"" + m.name + "\"").c_str(), (unsigned long long)m.runtime, m.workers);
    section_workers(o, m);
    section_sched_ext(o, m);
    section_steals(o, m);
    section_parks_wakes(o, m);
    section_tasks(o, m);
    section_parallelism(o, m);
  }
}

}  // namespace parkway::tracetool
