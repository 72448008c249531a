// trace_model.cpp -- build_model: one pass over each track's events with a
// stack of open spans, then the cross-track matches (wakes to unparks,
// spawns to the runs of stolen tasks) and the sweep for idleness while
// work was queued.
#include "trace_model.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace parkway::tracetool {

using trace_format::Event;
using trace_format::EventType;
using trace_format::event_task;

namespace {

State state_of(SpanKind k) {
  switch (k) {
    case SpanKind::kTask: return kRunning;
    case SpanKind::kSearch: return kSearching;
    case SpanKind::kPark: return kParked;
    case SpanKind::kDescheduled: return kDescheduled;
  }
  return kOther;
}

struct TaskPoint {  // a spawn or a run begin, for matching them across tracks
  std::uint64_t at, task;
  int worker;
  bool spawn;
};

struct QueuePoint {  // for the idleness sweep
  std::uint64_t at;
  int worker;         // -1: a change of the queued count only
  std::int8_t state;  // the worker's new State (worker >= 0)
  std::int8_t queued; // +1 spawn/inject, -1 a task started
};

struct QueueMove {  // a change of one queue's length
  std::uint64_t at;
  int queue;  // a worker's deque, or -1: the injection queue
  std::int32_t delta;
};

// Walks one track's events (its streams' events, in time order).
void walk(Model& m, std::size_t track, Track& tr, const std::vector<const Event*>& evs, std::vector<TaskPoint>& tasks,
          std::vector<QueuePoint>& queue, std::vector<QueueMove>& moves) {
  std::vector<std::size_t> stack;  // indices into tr.spans
  // Per stack entry, its run in m.graph.runs (a task span of a worker), else kNoRun.
  constexpr std::size_t kNoRun = SIZE_MAX;
  std::vector<std::size_t> run_of;
  const bool dag = m.task_level && m.with_work_span && tr.worker >= 0;
  // The innermost task run on the stack, or kNoRun.
  auto enclosing_run = [&]() -> std::size_t {
    for (auto it = run_of.rbegin(); it != run_of.rend(); ++it)
      if (*it != kNoRun) return *it;
    return kNoRun;
  };
  auto dag_point = [&](std::uint64_t at, std::uint64_t task, DagPointKind kind) {
    const std::size_t r = enclosing_run();
    if (r != kNoRun) m.graph.add_point(std::uint32_t(r), {at, m.graph.runs[r].self, task, 0, kNoPoint, kind});
  };
  std::uint64_t t_prev = tr.first;
  State cur = kOther;
  std::uint64_t last_inject = 0;  // an inject not yet followed by a wake
  auto set_state = [&](std::uint64_t at) {
    State s = stack.empty() ? kOther : state_of(tr.spans[stack.back()].kind);
    // A task in a blocking wait, between its searches, parks and the tasks
    // it ran there, is the worker loop, not the task's work.
    if (s == kRunning && dag && m.graph.runs[run_of.back()].waiting) s = kOther;
    if (s == cur && !tr.states.empty()) return;
    cur = s;
    tr.states.emplace_back(at, std::uint8_t(s));
    if (tr.worker >= 0) queue.push_back({at, tr.worker, std::int8_t(s), 0});
  };
  auto push = [&](std::uint64_t at, SpanKind k, std::uint64_t task) {
    // A search or park right inside a task: it is in a blocking wait,
    // until that wait's `join` event.
    if (dag && k != SpanKind::kTask && k != SpanKind::kDescheduled && !run_of.empty() && run_of.back() != kNoRun)
      m.graph.runs[run_of.back()].waiting = true;
    tr.spans.push_back({at, at, k, std::uint16_t(stack.size()), false, task});
    stack.push_back(tr.spans.size() - 1);
    std::size_t run = kNoRun;
    if (dag && k == SpanKind::kTask) {
      run = m.graph.runs.size();
      TaskRun tr_run;
      tr_run.task = task;
      tr_run.begin = tr_run.end = at;
      tr_run.worker = tr.worker;
      m.graph.runs.push_back(std::move(tr_run));
    }
    run_of.push_back(run);
    set_state(at);
  };
  auto pop = [&](std::uint64_t at) {
    Span& s = tr.spans[stack.back()];
    s.end = at;
    s.closed = true;
    stack.pop_back();
    if (const std::size_t r = run_of.back(); r != kNoRun) {
      m.graph.runs[r].end = at;
      run_of.pop_back();
      dag_point(at, 0, DagPointKind::kJoinNested);  // the enclosing run was in a wait
    } else {
      run_of.pop_back();
    }
    if (s.kind == SpanKind::kTask) m.task_ns.push_back(s.end - s.begin);
    if (s.kind == SpanKind::kPark) m.park_ns.push_back(s.end - s.begin);
    set_state(at);
  };
  set_state(tr.first);
  for (const Event* e : evs) {
    const std::uint64_t at = e->ticks;
    tr.time_in[cur] += at - t_prev;
    if (cur == kRunning && dag && run_of.back() != kNoRun) m.graph.runs[run_of.back()].self += at - t_prev;
    t_prev = at;
    ++tr.events;
    switch (EventType(e->type)) {
      case EventType::kRunBegin:
        ++tr.runs;
        push(at, SpanKind::kTask, event_task(*e));
        if (tr.worker >= 0) {
          tasks.push_back({at, event_task(*e), tr.worker, false});
          queue.push_back({at, -1, 0, -1});
          moves.push_back({at, tr.worker, -1});
        }
        break;
      case EventType::kRunEnd: {
        auto it = std::find_if(stack.rbegin(), stack.rend(), [&](std::size_t i) {
          return tr.spans[i].kind == SpanKind::kTask && tr.spans[i].task == event_task(*e);
        });
        if (it == stack.rend()) break;  // its begin was dropped
        while (tr.spans[stack.back()].task != event_task(*e) || tr.spans[stack.back()].kind != SpanKind::kTask) {
          tr.spans[stack.back()].end = at;  // unclosed inside it: its end was dropped
          if (run_of.back() != kNoRun) m.graph.runs[run_of.back()].end = at;
          stack.pop_back();
          run_of.pop_back();
        }
        pop(at);
        break;
      }
      case EventType::kSearchBegin: push(at, SpanKind::kSearch, 0); break;
      case EventType::kSearchEnd:
        if (!stack.empty() && tr.spans[stack.back()].kind == SpanKind::kSearch) pop(at);
        break;
      case EventType::kPark: push(at, SpanKind::kPark, 0); break;
      case EventType::kUnpark:
        if (!stack.empty() && tr.spans[stack.back()].kind == SpanKind::kPark) pop(at);
        break;
      case EventType::kSteal:
        ++tr.steals;
        tr.stolen += e->a32;
        if (tr.worker >= 0) {
          m.steals.push_back({at, tr.worker, int(e->a16), e->a32});
          moves.push_back({at, int(e->a16), -std::int32_t(e->a32)});
          moves.push_back({at, tr.worker, std::int32_t(e->a32)});
        }
        break;
      case EventType::kWake: {
        Wake w;
        w.at = at;
        w.track = track;
        w.waker = std::int32_t(e->a32);
        w.wakee = int(e->a16);
        w.injected = last_inject;
        last_inject = 0;
        m.wakes.push_back(w);
        break;
      }
      case EventType::kInject:
        ++m.injected;
        last_inject = at;
        queue.push_back({at, -1, 0, +1});
        moves.push_back({at, -1, +1});
        break;
      case EventType::kInjectTake:
        tr.injected_taken += e->a32;
        if (tr.worker >= 0) {
          moves.push_back({at, -1, -std::int32_t(e->a32)});
          moves.push_back({at, tr.worker, std::int32_t(e->a32)});
        }
        break;
      case EventType::kJoin:
        if (dag) {
          dag_point(at, 0, DagPointKind::kJoinEvent);
          if (const std::size_t r = enclosing_run(); r != kNoRun) m.graph.runs[r].waiting = false;
          set_state(at);
        }
        break;
      case EventType::kSpawn:
        ++tr.spawns;
        if (dag) dag_point(at, event_task(*e), DagPointKind::kSpawn);
        if (tr.worker >= 0) {
          tasks.push_back({at, event_task(*e), tr.worker, true});
          moves.push_back({at, tr.worker, +1});
        }
        queue.push_back({at, -1, 0, +1});
        break;
      case EventType::kIoSubmit: ++tr.io_submits; break;
      case EventType::kIoComplete: ++tr.io_completes; break;
      case EventType::kStealFence: ++tr.steal_fences; break;
      case EventType::kParkFence: ++tr.park_fences; break;
      case EventType::kNotify: ++tr.notifies; break;
      case EventType::kRuntime: break;  // outside threads' events are sorted by it before the walk
      case EventType::kOffCpu:
        m.kernel_view = true;
        if (e->a8) push(at, SpanKind::kDescheduled, 0);  // preempted; a thread that blocked is in its park or task
        break;
      case EventType::kOnCpu:
        m.kernel_view = true;
        if (!stack.empty() && tr.spans[stack.back()].kind == SpanKind::kDescheduled) pop(at);
        break;
    }
  }
  tr.time_in[cur] += tr.last - t_prev;
  if (cur == kRunning && dag && run_of.back() != kNoRun) m.graph.runs[run_of.back()].self += tr.last - t_prev;
  for (std::size_t i : stack) tr.spans[i].end = tr.last;  // open at its last event
  for (std::size_t r : run_of)
    if (r != kNoRun) m.graph.runs[r].end = tr.last;
}

// The first element of `v` (sorted) at or after t, or v.end().
template <class It, class Key>
It first_at_or_after(It b, It e, std::uint64_t t, Key key) {
  return std::partition_point(b, e, [&](const auto& x) { return key(x) < t; });
}

void match_wakes(Model& m) {
  std::vector<std::vector<const Span*>> parks(m.workers), runs(m.workers);
  std::vector<std::vector<std::uint64_t>> found(m.workers);  // moments a worker found work
  for (unsigned w = 0; w < m.workers; ++w) {
    for (const Span& s : m.tracks[w].spans) {
      if (s.kind == SpanKind::kPark) parks[w].push_back(&s);
      if (s.kind == SpanKind::kTask) {
        runs[w].push_back(&s);
        found[w].push_back(s.begin);
      }
    }
  }
  for (const Steal& s : m.steals) found[s.thief].push_back(s.at);
  for (auto& f : found) std::sort(f.begin(), f.end());
  for (Wake& wk : m.wakes) {
    if (wk.wakee < 0 || unsigned(wk.wakee) >= m.workers) continue;
    auto& pv = parks[wk.wakee];
    // The park it was in: the last one begun at or before the wake.
    auto it = first_at_or_after(pv.begin(), pv.end(), wk.at + 1, [](const Span* s) { return s->begin; });
    if (it == pv.begin()) continue;
    const Span* p = *(it - 1);
    if (!(p->closed && p->end >= wk.at)) continue;  // already awake (a token), or never woke in the trace
    wk.asleep = true;
    wk.unpark = p->end;
    auto& rv = runs[wk.wakee];
    auto r = first_at_or_after(rv.begin(), rv.end(), wk.unpark, [](const Span* s) { return s->begin; });
    const std::uint64_t next_run = r == rv.end() ? UINT64_MAX : (*r)->begin;
    if (m.task_level && r != rv.end()) wk.run = next_run;
    auto np = first_at_or_after(pv.begin(), pv.end(), wk.unpark, [](const Span* s) { return s->begin; });
    const std::uint64_t next_park = np == pv.end() ? UINT64_MAX : (*np)->begin;
    auto& fv = found[wk.wakee];
    auto f = std::lower_bound(fv.begin(), fv.end(), wk.unpark);
    const std::uint64_t next_found = f == fv.end() ? UINT64_MAX : *f;
    wk.found_nothing = next_park != UINT64_MAX && next_park < next_found;
  }
}

void match_migrations(Model& m, std::vector<TaskPoint>& pts) {
  std::stable_sort(pts.begin(), pts.end(), [](const TaskPoint& a, const TaskPoint& b) {
    return a.at != b.at ? a.at < b.at : a.spawn > b.spawn;  // a spawn before a run at the same ns
  });
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, int>> spawned;  // task -> (at, worker)
  spawned.reserve(1024);
  for (const TaskPoint& p : pts) {
    if (p.spawn) {
      spawned[p.task] = {p.at, p.worker};
      continue;
    }
    auto it = spawned.find(p.task);
    if (it == spawned.end()) continue;
    if (it->second.second != p.worker) m.migrations.push_back({it->second.first, p.at, it->second.second, p.worker});
    spawned.erase(it);
  }
}

// Worker-ns spent searching or parked while some task was queued (spawned
// or injected and not yet started): the queued count is the whole pool's,
// from spawns, injections and starts.
void idle_with_work(Model& m, std::vector<QueuePoint>& q) {
  std::stable_sort(q.begin(), q.end(), [](const QueuePoint& a, const QueuePoint& b) { return a.at < b.at; });
  std::vector<std::int8_t> st(m.workers, kOther);
  std::int64_t queued = 0;
  unsigned searching = 0, parked = 0, descheduled = 0;
  std::uint64_t prev = 0;
  const std::uint64_t step = m.end_ns / 4000 + 1;
  for (const QueuePoint& p : q) {
    if (p.worker < 0 && (m.queued.empty() || p.at / step != m.queued.back().first / step))
      m.queued.emplace_back(p.at, queued);
    if (queued > 0) {
      m.idle_with_work_searching += (p.at - prev) * searching;
      m.idle_with_work_parked += (p.at - prev) * parked;
      m.idle_with_work_descheduled += (p.at - prev) * descheduled;
    }
    prev = p.at;
    if (p.worker < 0) {
      queued += p.queued;
      if (queued < 0) queued = 0;  // a task started that no spawn in the trace made (an I/O continuation)
      continue;
    }
    std::int8_t& s = st[p.worker];
    if (s == kSearching) --searching;
    if (s == kParked) --parked;
    if (s == kDescheduled) --descheduled;
    s = p.state;
    if (s == kSearching) ++searching;
    if (s == kParked) ++parked;
    if (s == kDescheduled) ++descheduled;
  }
}

// Each queue's length over time, sampled as m.queued is. A length that
// would go below zero (a task no recorded event queued: an I/O
// continuation) stays at zero.
void queue_lengths(Model& m, std::vector<QueueMove>& moves) {
  std::stable_sort(moves.begin(), moves.end(), [](const QueueMove& a, const QueueMove& b) { return a.at < b.at; });
  m.queue_len.assign(m.workers + 1, {});
  std::vector<std::int64_t> len(m.workers + 1, 0);
  const std::uint64_t step = m.end_ns / 4000 + 1;
  for (const QueueMove& mv : moves) {
    const std::size_t q = mv.queue < 0 ? m.workers : std::size_t(mv.queue);
    if (q > m.workers) continue;
    len[q] = std::max<std::int64_t>(0, len[q] + mv.delta);
    auto& series = m.queue_len[q];
    if (!series.empty() && series.back().first / step == mv.at / step)
      series.back().second = len[q];  // the bucket's last value
    else
      series.emplace_back(mv.at, len[q]);
  }
}

}  // namespace

std::vector<std::uint64_t> trace_runtimes(const TraceFile& tf) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> first;  // (first event, runtime)
  for (const Stream& s : tf.streams) {
    if (s.info.worker < 0) continue;
    const std::uint64_t at = s.events.empty() ? UINT64_MAX : s.events.front().ticks;
    auto it = std::find_if(first.begin(), first.end(), [&](const auto& f) { return f.second == s.info.runtime; });
    if (it == first.end())
      first.emplace_back(at, s.info.runtime);
    else
      it->first = std::min(it->first, at);
  }
  std::sort(first.begin(), first.end());
  std::vector<std::uint64_t> out;
  for (const auto& f : first) out.push_back(f.second);
  return out;
}

Model build_model(const TraceFile& tf, std::uint64_t runtime, bool first_runtime, bool with_work_span) {
  Model m;
  m.task_level = tf.header.level == std::uint32_t(trace_format::Level::kTask);
  m.end_ns = tf.end_ns;
  m.dropped = tf.dropped;
  m.events = tf.events;
  m.complete = tf.complete;
  m.runtime = runtime;
  m.with_work_span = with_work_span;

  std::vector<std::vector<const Stream*>> of_worker;
  std::vector<const Stream*> outside;
  for (const Stream& s : tf.streams) {
    if (s.info.worker < 0) {
      outside.push_back(&s);
    } else if (s.info.runtime == m.runtime) {
      if (unsigned(s.info.worker) >= of_worker.size()) of_worker.resize(s.info.worker + 1);
      of_worker[s.info.worker].push_back(&s);
    }
  }
  m.workers = unsigned(of_worker.size());
  std::vector<TaskPoint> tasks;
  std::vector<QueuePoint> queue;
  std::vector<QueueMove> moves;
  auto add_track = [&](std::vector<const Stream*> streams, int worker, std::string label) {
    Track tr;
    tr.worker = worker;
    tr.label = std::move(label);
    // Streams of one track follow each other in time (a runtime made again
    // at the same address): by their first event.
    std::sort(streams.begin(), streams.end(), [](const Stream* a, const Stream* b) {
      return (a->events.empty() ? UINT64_MAX : a->events.front().ticks) <
             (b->events.empty() ? UINT64_MAX : b->events.front().ticks);
    });
    std::vector<const Event*> evs;
    for (const Stream* s : streams) {
      tr.dropped += s->dropped;
      tr.tid = s->info.tid;
      // A thread outside the pool: its events about this runtime, as its
      // runtime events say (those before its first go with the first runtime).
      std::uint64_t about = first_runtime ? m.runtime : 0;
      for (const Event& e : s->events) {
        if (worker >= 0) {
          evs.push_back(&e);
        } else if (EventType(e.type) == EventType::kRuntime) {
          about = event_task(e);
        } else if (about == m.runtime) {
          evs.push_back(&e);
        }
      }
    }
    if (worker < 0 && evs.empty()) return;
    if (!evs.empty()) {
      tr.first = evs.front()->ticks;
      tr.last = evs.back()->ticks;
    }
    walk(m, m.tracks.size(), tr, evs, tasks, queue, moves);
    m.tracks.push_back(std::move(tr));
  };
  for (unsigned w = 0; w < m.workers; ++w) add_track(of_worker[w], int(w), "w" + std::to_string(w));
  for (const Stream* s : outside)
    add_track({s}, -1, std::string(s->info.name[0] ? s->info.name : "thread") + " (tid " + std::to_string(s->info.tid) + ")");

  for (unsigned w = 0; w < m.workers; ++w) m.work_ns += m.tracks[w].time_in[kRunning];
  std::sort(m.steals.begin(), m.steals.end(), [](const Steal& a, const Steal& b) { return a.at < b.at; });
  std::sort(m.wakes.begin(), m.wakes.end(), [](const Wake& a, const Wake& b) { return a.at < b.at; });
  match_wakes(m);
  if (m.task_level) {
    match_migrations(m, tasks);
    if (m.with_work_span) {
      m.work_span = work_span(m.graph);
      m.graph = TaskGraph();  // done with: the report keeps several runtimes' models
    }
    idle_with_work(m, queue);
    queue_lengths(m, moves);
  }
  return m;
}

std::vector<double> parallelism(const Model& m, unsigned bins, std::uint64_t from, std::uint64_t to) {
  if (to <= from) from = 0, to = m.end_ns;
  std::vector<double> busy(bins, 0.0);
  if (to <= from || bins == 0) return busy;
  const double width = double(to - from) / bins;
  const std::uint8_t counted = m.task_level ? kRunning : kOther;
  for (unsigned w = 0; w < m.workers; ++w) {
    const Track& tr = m.tracks[w];
    for (std::size_t i = 0; i < tr.states.size(); ++i) {
      if (tr.states[i].second != counted) continue;
      double b = std::max(double(tr.states[i].first), double(from)) - double(from);
      double e = std::min(double(i + 1 < tr.states.size() ? tr.states[i + 1].first : tr.last), double(to)) - double(from);
      for (unsigned k = b > 0 ? unsigned(b / width) : 0; k < bins && b < e; ++k) {
        const double upto = std::min(e, (k + 1) * width);
        if (upto > b) busy[k] += upto - b;
        b = std::max(b, upto);
      }
    }
  }
  for (double& x : busy) x /= width;
  return busy;
}

std::pair<std::uint64_t, std::uint64_t> active_window(const Model& m) {
  std::uint64_t a = UINT64_MAX, b = 0;
  for (const Track& t : m.tracks) {
    if (!t.events) continue;
    a = std::min(a, t.first);
    b = std::max(b, t.last);
  }
  if (a >= b) return {0, m.end_ns};
  return {a, b};
}

std::uint64_t quantile(std::vector<std::uint64_t>& v, double q) {
  if (v.empty()) return 0;
  std::size_t k = std::size_t(q * double(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

}  // namespace parkway::tracetool
