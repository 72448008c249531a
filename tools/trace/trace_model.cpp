// trace_model.cpp -- analyse: the events of all streams in time order
// (EventReader), each handed to the track it belongs to, which keeps a
// stack of its open spans; what crosses tracks (a wake and the wakee's
// unpark, a spawn and the run of the task on another worker, the queued
// count against idle workers) is matched as the events come, since every
// event before the current one has been seen.
#include "trace_model.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <unordered_map>

namespace parkway::tracetool {

using trace_format::Event;
using trace_format::EventType;
using trace_format::event_task;

void StateGrid::add(std::size_t track, std::uint64_t begin, std::uint64_t end, std::uint8_t state) {
  if (to <= from || bins == 0 || track >= share.size()) return;
  const double width = double(to - from) / bins;
  double b = std::max(double(begin), double(from)) - double(from);
  const double e = std::min(double(end), double(to)) - double(from);
  if (!(b < e)) return;
  Row& row = share[track];
  const unsigned k0 = std::min(bins - 1, b > 0 ? unsigned(b / width) : 0u);
  for (unsigned k = k0; k < bins && b < e; ++k) {
    const double upto = std::min(e, (k + 1) * width);
    if (upto > b) put(row, k, state, upto - b);
    b = std::max(b, upto);
  }
}

// Adds `ns` in `state` to slice k of the row. In time order, k is the
// row's last slice or one after it; a slice's edge rounded the other way
// may give an earlier one, which is found and split.
void StateGrid::put(Row& row, unsigned k, std::uint8_t state, double ns) {
  auto mixed = [&](std::vector<Run>::iterator pos, unsigned slice, const Cell& c) {
    if (pos == row.runs.end() && !row.runs.empty()) {
      Run& last = row.runs.back();
      if (last.state == kMixed && last.lo + last.n == slice && last.at + last.n == row.cells.size()) {
        row.cells.push_back(c);
        ++last.n;
        return;
      }
    }
    Run r;
    r.lo = slice;
    r.n = 1;
    r.at = std::uint32_t(row.cells.size());
    row.cells.push_back(c);
    row.runs.insert(pos, r);
  };
  if (row.runs.empty() || k >= row.runs.back().lo + row.runs.back().n) {
    Run* last = row.runs.empty() ? nullptr : &row.runs.back();
    if (ns == whole(k)) {  // all of the slice: a run
      if (last && last->state == state && last->lo + last->n == k) {
        ++last->n;
      } else {
        Run r;
        r.lo = k;
        r.n = 1;
        r.state = state;
        row.runs.push_back(r);
      }
      return;
    }
    Cell c{};
    c[state] += ns;
    mixed(row.runs.end(), k, c);
    return;
  }
  // The run holding slice k, if any.
  auto it = std::upper_bound(row.runs.begin(), row.runs.end(), k, [](unsigned x, const Run& r) { return x < r.lo; });
  if (it == row.runs.begin() || k >= std::prev(it)->lo + std::prev(it)->n) {
    Cell c{};
    c[state] += ns;
    mixed(it, k, c);
    return;
  }
  --it;
  if (it->state == kMixed) {
    row.cells[it->at + (k - it->lo)][state] += ns;
    return;
  }
  // Slice k of a run: the run split around it, k a cell of its own.
  Cell c{};
  c[it->state] = whole(k);
  c[state] += ns;
  Run after = *it;
  after.lo = k + 1;
  after.n = it->lo + it->n - (k + 1);
  it->n = k - it->lo;
  std::ptrdiff_t pos = it - row.runs.begin();
  if (it->n == 0) {
    row.runs.erase(it);
  } else {
    ++pos;
  }
  if (after.n) row.runs.insert(row.runs.begin() + pos, after);
  const std::uint32_t at = std::uint32_t(row.cells.size());
  row.cells.push_back(c);
  Run r;
  r.lo = k;
  r.n = 1;
  r.at = at;
  row.runs.insert(row.runs.begin() + pos, r);
}

double StateGrid::at(std::size_t track, unsigned k, unsigned state) const {
  if (track >= share.size()) return 0.0;
  const Row& row = share[track];
  auto it = std::upper_bound(row.runs.begin(), row.runs.end(), k, [](unsigned x, const Run& r) { return x < r.lo; });
  if (it == row.runs.begin()) return 0.0;
  --it;
  if (k >= it->lo + it->n) return 0.0;
  if (it->state == kMixed) return row.cells[it->at + (k - it->lo)][state];
  return it->state == state ? whole(k) : 0.0;
}

void StateGrid::cells(std::size_t track, std::vector<Cell>* out) const {
  out->assign(bins, Cell{});
  if (track >= share.size()) return;
  const Row& row = share[track];
  for (const Run& r : row.runs)
    for (unsigned i = 0; i < r.n; ++i) {
      if (r.state == kMixed)
        (*out)[r.lo + i] = row.cells[r.at + i];
      else
        (*out)[r.lo + i][r.state] = whole(r.lo + i);
    }
}

const char* sched_ext_name(unsigned kind) {
  switch (kind) {
    case kScxBusyPromote: return "busy_promote";
    case kScxKeepPrev: return "keep_prev";
    case kScxYieldToBusy: return "yield_to_busy";
  }
  return "other";
}

std::vector<double> parallelism(const Model& m, const StateGrid& g) {
  std::vector<double> busy(g.bins, 0.0);
  if (g.to <= g.from || g.bins == 0) return busy;
  const double width = double(g.to - g.from) / g.bins;
  const std::uint8_t counted = m.task_level ? kRunning : kOther;
  // Each worker's row in turn, its slices in order (a slice outside it adds nothing).
  for (unsigned w = 0; w < m.workers && w < g.share.size(); ++w) {
    const StateGrid::Row& row = g.share[w];
    for (const StateGrid::Run& r : row.runs)
      for (unsigned i = 0; i < r.n; ++i) {
        if (r.state == StateGrid::kMixed)
          busy[r.lo + i] += row.cells[r.at + i][counted];
        else if (r.state == counted)
          busy[r.lo + i] += g.whole(r.lo + i);
      }
  }
  for (double& x : busy) x /= width;
  return busy;
}

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

using RunId = TaskGraph::RunId;
constexpr RunId kNoRun = TaskGraph::kNoRun;

// An open span of a track.
struct Frame {
  std::uint64_t begin;
  std::uint64_t task;
  SpanKind kind;
  RunId run = kNoRun;    // a task span of a worker, with the task graph
  bool waiting = false;  // its task is in a blocking wait (until that wait's `join`)
};

// A worker's hand-off: an unpark after a waker took it off the idle list
// (a8 = 1), from its sleep or (slept false) at the recheck before it. The
// k-th wake of a worker made its k-th hand-off: each wake takes it off the
// list once, and it is not on the list again until it has withdrawn. Kept
// until its wake is known and what the worker did next is.
struct Handoff {
  std::uint64_t at = 0;
  bool slept = false;
  bool matched = false;  // w is its wake
  Wake w;
  bool run_seen = false, found_seen = false, park_seen = false, settled = false;
  std::uint64_t found_at = 0, park_at = 0, run_at = 0;
};
// Hand-offs with no wake yet (their wakes lost with dropped events) kept
// at most, per worker.
constexpr std::size_t kMaxUnmatched = 64;

// One track's walk.
struct TrackWalk {
  std::vector<Frame> stack;
  std::uint64_t t_prev = 0, state_since = 0;
  State cur = kOther;
  bool started = false;
  std::uint64_t last_inject = 0;  // the stream's last event, if an inject
  // A worker as a wakee: wakes not yet matched to a hand-off, and its
  // hand-offs in order.
  std::vector<Wake> wakes;
  std::vector<Handoff> handoffs;
  // A worker's gaps between its threads (Track::gone), in time order, and the next to come.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;
  std::size_t next_gap = 0;
};

class Builder {
 public:
  Builder(Model& m, const AnalyseOptions& opt) : m_(m), opt_(opt) {}

  void add_track(Track t, bool has_events, std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps = {}) {
    m_.tracks.push_back(std::move(t));
    has_events_.push_back(has_events);
    walks_.emplace_back().gaps = std::move(gaps);
  }

  void start() {
    // [first, last] event of any track: where something happened.
    std::uint64_t lo = UINT64_MAX, hi = 0;
    for (std::size_t i = 0; i < m_.tracks.size(); ++i)
      if (has_events_[i]) lo = std::min(lo, m_.tracks[i].first), hi = std::max(hi, m_.tracks[i].last);
    m_.window = lo < hi ? std::make_pair(lo, hi) : std::make_pair(std::uint64_t(0), m_.end_ns);
    for (const GridSpec& s : opt_.grids) {
      StateGrid g;
      g.from = s.to > s.from ? s.from : m_.window.first;
      g.to = s.to > s.from ? s.to : m_.window.second;
      g.bins = s.bins;
      g.share.assign(s.every_track ? m_.tracks.size() : m_.workers, {});
      m_.grids.push_back(std::move(g));
    }
    if (m_.task_level) m_.queue_len.assign(m_.workers + 1, {});
    queue_len_.assign(m_.workers + 1, 0);
    sweep_state_.assign(m_.workers, kOther);
    step_ = m_.end_ns / 4000 + 1;
    dag_ = m_.task_level && opt_.work_span;
  }

  void event(std::size_t track, const Event& e);
  void finish();

 private:
  bool dag_on(const Track& t) const { return dag_ && t.worker >= 0; }
  RunId enclosing_run(const TrackWalk& tw) const {
    for (auto it = tw.stack.rbegin(); it != tw.stack.rend(); ++it)
      if (it->run != kNoRun) return it->run;
    return kNoRun;
  }
  void set_state(std::size_t track, std::uint64_t at);
  void leave(std::size_t track, std::uint64_t from, std::uint64_t to);
  void push(std::size_t track, std::uint64_t at, SpanKind k, std::uint64_t task);
  void pop(std::size_t track, std::uint64_t at, bool closed);
  void sweep(std::uint64_t at, int worker, std::int8_t state, std::int8_t queued);
  void move(std::uint64_t at, int queue, std::int64_t delta);
  void add_wake(std::size_t wakee, const Wake& w);
  void add_handoff(std::size_t track, std::uint64_t at, bool slept);
  void judge_wakes(std::size_t track, std::uint64_t now, bool at_end);
  void wake_done(const Wake& w);

  Model& m_;
  const AnalyseOptions& opt_;
  std::vector<TrackWalk> walks_;
  std::vector<bool> has_events_;  // per track: the index saw events of it
  bool dag_ = false;
  TaskGraph graph_;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, int>> spawned_;  // task -> (at, worker): migrations
  // The idleness sweep: the pool's queued count and how many workers are in each state.
  std::vector<std::int8_t> sweep_state_;
  std::int64_t queued_ = 0;
  unsigned searching_ = 0, parked_ = 0, descheduled_ = 0;
  std::uint64_t sweep_prev_ = 0, step_ = 1;
  std::vector<std::int64_t> queue_len_;
};

// Worker-ns spent searching or parked while some task was queued (spawned
// or injected and not yet started): the queued count is the whole pool's,
// from spawns, injections and starts. Called in time order.
void Builder::sweep(std::uint64_t at, int worker, std::int8_t state, std::int8_t queued) {
  if (!m_.task_level) return;
  if (queued_ > 0) {
    m_.idle_with_work_searching += (at - sweep_prev_) * searching_;
    m_.idle_with_work_parked += (at - sweep_prev_) * parked_;
    m_.idle_with_work_descheduled += (at - sweep_prev_) * descheduled_;
  }
  sweep_prev_ = at;
  if (worker < 0) {
    queued_ += queued;
    if (queued_ < 0) queued_ = 0;  // a task started that no spawn in the trace made (an I/O continuation)
    // The count after this change: one point per bucket, its last value.
    if (!m_.queued.empty() && m_.queued.back().first / step_ == at / step_)
      m_.queued.back().second = queued_;
    else
      m_.queued.emplace_back(at, queued_);
    return;
  }
  std::int8_t& s = sweep_state_[worker];
  if (s == kSearching) --searching_;
  if (s == kParked) --parked_;
  if (s == kDescheduled) --descheduled_;
  s = state;
  if (s == kSearching) ++searching_;
  if (s == kParked) ++parked_;
  if (s == kDescheduled) ++descheduled_;
}

// Each queue's length over time, sampled as m.queued is. A length that
// would go below zero (a task no recorded event queued: an I/O
// continuation) stays at zero.
void Builder::move(std::uint64_t at, int queue, std::int64_t delta) {
  if (!m_.task_level) return;
  const std::size_t q = queue < 0 ? m_.workers : std::size_t(queue);
  if (q > m_.workers) return;
  queue_len_[q] = std::max<std::int64_t>(0, queue_len_[q] + delta);
  auto& series = m_.queue_len[q];
  if (!series.empty() && series.back().first / step_ == at / step_)
    series.back().second = queue_len_[q];  // the bucket's last value
  else
    series.emplace_back(at, queue_len_[q]);
}

void Builder::set_state(std::size_t track, std::uint64_t at) {
  Track& tr = m_.tracks[track];
  TrackWalk& tw = walks_[track];
  State s = tw.stack.empty() ? kOther : state_of(tw.stack.back().kind);
  // A task in a blocking wait, between its searches, parks and the tasks
  // it ran there, is the worker loop, not the task's work.
  if (s == kRunning && tw.stack.back().waiting) s = kOther;
  if (s == tw.cur && tw.started) return;
  if (tw.started)
    for (StateGrid& g : m_.grids) g.add(track, tw.state_since, at, std::uint8_t(tw.cur));
  tw.started = true;
  tw.cur = s;
  tw.state_since = at;
  if (tr.worker >= 0) sweep(at, tr.worker, std::int8_t(s), 0);
}

// A gap between two threads of a worker index, [from, to): the first
// thread's state and open spans end at its last event; none runs until
// the next thread's first.
void Builder::leave(std::size_t track, std::uint64_t from, std::uint64_t to) {
  Track& tr = m_.tracks[track];
  TrackWalk& tw = walks_[track];
  tr.time_in[tw.cur] += from - tw.t_prev;
  if (tw.cur == kRunning && dag_on(tr) && tw.stack.back().run != kNoRun) graph_.add_self(tw.stack.back().run, from - tw.t_prev);
  for (StateGrid& g : m_.grids) g.add(track, tw.state_since, from, std::uint8_t(tw.cur));
  while (!tw.stack.empty()) pop(track, from, false);  // open when its thread ended
  tr.gone += to - from;
  tw.cur = kOther;
  tw.t_prev = tw.state_since = to;
}

void Builder::push(std::size_t track, std::uint64_t at, SpanKind k, std::uint64_t task) {
  const Track& tr = m_.tracks[track];
  TrackWalk& tw = walks_[track];
  const bool dag = dag_on(tr);
  // A search or park right inside a task: it is in a blocking wait,
  // until that wait's `join` event.
  if (dag && k != SpanKind::kTask && k != SpanKind::kDescheduled && !tw.stack.empty() && tw.stack.back().run != kNoRun)
    tw.stack.back().waiting = true;
  Frame f{at, task, k};
  if (dag && k == SpanKind::kTask) {
    f.run = graph_.begin_run(task, at);
    m_.dag_runs_held = std::max(m_.dag_runs_held, graph_.held());
  }
  tw.stack.push_back(f);
  set_state(track, at);
}

// Ends the innermost span: closed, by its end event; else at an outer
// span's end or the track's end (its own end event was dropped or never came).
void Builder::pop(std::size_t track, std::uint64_t at, bool closed) {
  TrackWalk& tw = walks_[track];
  const Frame f = tw.stack.back();
  tw.stack.pop_back();
  if (opt_.sink)
    opt_.sink->span(m_, track, {f.begin, at, f.kind, std::uint16_t(tw.stack.size()), closed, f.task});
  if (f.run != kNoRun) {
    graph_.end_run(f.run, at);
    // The enclosing run was in a wait.
    if (closed)
      if (const RunId r = enclosing_run(tw); r != kNoRun) graph_.join_nested(r, at);
  }
  if (closed) {
    if (f.kind == SpanKind::kTask) {
      m_.task_ns.add(at - f.begin);
      const std::uint64_t d = at - f.begin;
      ++m_.task_ns_log2[d < 128 ? 7 : 64 - __builtin_clzll(d)];
    }
    if (f.kind == SpanKind::kPark) m_.park_ns.add(at - f.begin);
    set_state(track, at);
  }
}

// A wake of worker `wakee`: matched to its oldest hand-off without one,
// else kept until its hand-off comes.
void Builder::add_wake(std::size_t wakee, const Wake& w) {
  TrackWalk& tw = walks_[wakee];
  for (Handoff& h : tw.handoffs)
    if (!h.matched) {
      h.matched = true;
      h.w = w;
      return;
    }
  tw.wakes.push_back(w);
}

void Builder::add_handoff(std::size_t track, std::uint64_t at, bool slept) {
  TrackWalk& tw = walks_[track];
  Handoff h;
  h.at = at;
  h.slept = slept;
  h.settled = !slept;  // it never slept: nothing to follow
  if (!tw.wakes.empty()) {
    h.matched = true;
    h.w = tw.wakes.front();
    tw.wakes.erase(tw.wakes.begin());
  }
  tw.handoffs.push_back(h);
  std::size_t unmatched = 0;
  for (const Handoff& x : tw.handoffs) unmatched += !x.matched;
  if (unmatched > kMaxUnmatched)
    for (auto it = tw.handoffs.begin(); it != tw.handoffs.end(); ++it)
      if (!it->matched) {
        tw.handoffs.erase(it);
        break;
      }
}

// The hand-offs of this worker whose wake is known and whose sequel is:
// after an unpark from sleep, its next task start and whether it parked
// again before finding work (a task start, a steal, a take from the
// injection queue, a search that found work). A wake that found the
// worker awake (its hand-off at the recheck) is done at once; one with no
// hand-off in the trace, at the end.
void Builder::judge_wakes(std::size_t track, std::uint64_t now, bool at_end) {
  TrackWalk& tw = walks_[track];
  for (auto it = tw.handoffs.begin(); it != tw.handoffs.end();) {
    Handoff& a = *it;
    if (!a.settled && a.park_seen && !a.found_seen && (at_end || now > a.park_at)) a.settled = true;
    const bool ready = at_end || (a.settled && (a.run_seen || !a.slept || !m_.task_level));
    if (!a.matched || !ready) {
      ++it;
      continue;
    }
    Wake w = a.w;
    if (a.slept) {
      w.asleep = true;
      w.unpark = std::max(a.at, w.at);  // a wake recorded late (format before the stamp at [W1]): 0
      if (a.run_seen && m_.task_level) w.run = std::max(a.run_at, w.at);
      w.found_nothing = a.park_seen && (!a.found_seen || a.park_at < a.found_at);
    }
    wake_done(w);
    it = tw.handoffs.erase(it);
  }
  if (at_end) {
    for (const Wake& w : tw.wakes) wake_done(w);  // no hand-off in the trace
    tw.wakes.clear();
    tw.handoffs.clear();
  }
}

void Builder::wake_done(const Wake& w) {
  WakeStats& s = m_.wakes;
  ++s.count;
  ++s.by_pair[{w.waker, w.wakee}];
  if (opt_.sink) opt_.sink->wake(m_, w);
  if (!w.asleep) return;
  ++s.asleep;
  s.to_unpark.add(w.unpark - w.at);
  s.unpark_by_pair[{w.waker, w.wakee}].add(w.unpark - w.at);
  if (w.run) s.to_run.add(w.run - w.at);
  s.found_nothing += w.found_nothing;
  if (w.injected) {
    s.sub_wake.add(w.at - w.injected);
    s.sub_unpark.add(w.unpark - w.injected);
    s.sub_wake_unpark.add(w.unpark - w.at);
    if (w.run) {
      s.sub_unpark_run.add(w.run - w.unpark);
      s.sub_run.add(w.run - w.injected);
    }
  }
}

void Builder::event(std::size_t track, const Event& e) {
  Track& tr = m_.tracks[track];
  TrackWalk& tw = walks_[track];
  const std::uint64_t at = e.ticks;
  const bool dag = dag_on(tr);
  if (!tw.started) {
    tw.t_prev = tr.first;
    set_state(track, tr.first);
  }
  while (tw.next_gap < tw.gaps.size() && tw.gaps[tw.next_gap].second <= at) {
    const auto [from, to] = tw.gaps[tw.next_gap++];
    leave(track, from, to);
  }
  if (tr.worker >= 0 && !tw.handoffs.empty()) judge_wakes(track, at, false);
  tr.time_in[tw.cur] += at - tw.t_prev;
  if (tw.cur == kRunning && dag && tw.stack.back().run != kNoRun) graph_.add_self(tw.stack.back().run, at - tw.t_prev);
  tw.t_prev = at;
  ++tr.events;
  // What a wakee finds after its unpark.
  auto found = [&](bool run) {
    for (Handoff& a : tw.handoffs) {
      if (!a.slept) continue;
      if (!a.found_seen) a.found_seen = true, a.found_at = at, a.settled = true;
      if (run && !a.run_seen) a.run_seen = true, a.run_at = at;
    }
  };
  // A wake answers the inject just before it in its stream, or none: the
  // shutdown's first wake (waker -1 too) came after an inject that woke
  // nobody and a park of that thread, and was taken for that inject's.
  const std::uint64_t inject_before = std::exchange(tw.last_inject, 0);
  switch (EventType(e.type)) {
    case EventType::kRunBegin:
      ++tr.runs;
      found(true);
      push(track, at, SpanKind::kTask, event_task(e));
      if (tr.worker >= 0) {
        if (auto it = spawned_.find(event_task(e)); it != spawned_.end()) {
          if (it->second.second != tr.worker) {
            ++m_.migrations;
            if (opt_.sink) opt_.sink->migration(m_, {it->second.first, at, it->second.second, tr.worker});
          }
          spawned_.erase(it);
        }
        sweep(at, -1, 0, -1);
        move(at, tr.worker, -1);
      }
      break;
    case EventType::kRunEnd: {
      auto it = std::find_if(tw.stack.rbegin(), tw.stack.rend(), [&](const Frame& f) {
        return f.kind == SpanKind::kTask && f.task == event_task(e);
      });
      if (it == tw.stack.rend()) break;  // its begin was dropped
      while (tw.stack.back().kind != SpanKind::kTask || tw.stack.back().task != event_task(e))
        pop(track, at, false);  // unclosed inside it: its end was dropped
      pop(track, at, true);
      break;
    }
    case EventType::kSearchBegin: push(track, at, SpanKind::kSearch, 0); break;
    case EventType::kSearchEnd:
      if (e.a8) found(false);
      if (!tw.stack.empty() && tw.stack.back().kind == SpanKind::kSearch) pop(track, at, true);
      break;
    case EventType::kPark:
      for (Handoff& a : tw.handoffs)
        if (a.slept && !a.park_seen) a.park_seen = true, a.park_at = at;
      push(track, at, SpanKind::kPark, 0);
      break;
    case EventType::kUnpark: {
      // a16 = 1: a hand-off at the recheck, before any sleep (no park to end).
      const bool slept = e.a16 == 0 && !tw.stack.empty() && tw.stack.back().kind == SpanKind::kPark;
      if (slept) pop(track, at, true);
      if (tr.worker >= 0 && e.a8) add_handoff(track, at, slept);
      break;
    }
    case EventType::kSteal:
      ++tr.steals;
      tr.stolen += e.a32;
      if (tr.worker >= 0) {
        found(false);
        const Steal s{at, tr.worker, int(e.a16), e.a32};
        ++m_.steal_count;
        auto& c = m_.steals[{s.thief, s.victim}];
        ++c.first;
        c.second += s.count;
        if (opt_.sink) opt_.sink->steal(m_, s);
        move(at, int(e.a16), -std::int64_t(e.a32));  // a damaged count: any of 2^32, no overflow
        move(at, tr.worker, std::int64_t(e.a32));
      }
      break;
    case EventType::kWake: {
      Wake w;
      w.at = at;
      w.track = track;
      w.waker = std::int32_t(e.a32);
      w.wakee = int(e.a16);
      w.injected = inject_before;
      if (w.wakee >= 0 && unsigned(w.wakee) < m_.workers)
        add_wake(std::size_t(w.wakee), w);
      else
        wake_done(w);
      break;
    }
    case EventType::kInject:
      ++m_.injected;
      tw.last_inject = at;
      sweep(at, -1, 0, +1);
      move(at, -1, +1);
      break;
    case EventType::kInjectTake:
      tr.injected_taken += e.a32;
      if (tr.worker >= 0) {
        found(false);
        move(at, -1, -std::int64_t(e.a32));
        move(at, tr.worker, std::int64_t(e.a32));
      }
      break;
    case EventType::kJoin:
      if (dag) {
        for (auto it = tw.stack.rbegin(); it != tw.stack.rend(); ++it)
          if (it->run != kNoRun) {
            graph_.join_event(it->run, at);
            it->waiting = false;
            break;
          }
        set_state(track, at);
      }
      break;
    case EventType::kSpawn:
      ++tr.spawns;
      if (dag)
        if (const RunId r = enclosing_run(tw); r != kNoRun) graph_.spawn(r, at, event_task(e));
      if (tr.worker >= 0) {
        spawned_[event_task(e)] = {at, tr.worker};
        move(at, tr.worker, +1);
      }
      sweep(at, -1, 0, +1);
      break;
    case EventType::kIoSubmit: ++tr.io_submits; break;
    case EventType::kIoComplete: ++tr.io_completes; break;
    case EventType::kStealFence: ++tr.steal_fences; break;
    case EventType::kParkFence: ++tr.park_fences; break;
    case EventType::kSliceYield: ++tr.slice_yields; break;
    case EventType::kNotify: ++tr.notifies; break;
    case EventType::kRuntime: break;  // routed by analyse
    case EventType::kSchedExt: {
      m_.sched_ext = true;
      const unsigned kind = e.a8 <= unsigned(kScxYieldToBusy) ? unsigned(e.a8) : unsigned(kScxOther);
      ++tr.sched_ext[kind];
      if (opt_.sink) opt_.sink->sched_ext(m_, track, at, kind, e.a16);
      break;
    }
    case EventType::kOffCpu:
      m_.kernel_view = true;
      if (e.a8) push(track, at, SpanKind::kDescheduled, 0);  // preempted; a thread that blocked is in its park or task
      break;
    case EventType::kOnCpu:
      m_.kernel_view = true;
      if (!tw.stack.empty() && tw.stack.back().kind == SpanKind::kDescheduled) pop(track, at, true);
      break;
  }
}

void Builder::finish() {
  for (std::size_t i = 0; i < m_.tracks.size(); ++i) {
    Track& tr = m_.tracks[i];
    TrackWalk& tw = walks_[i];
    if (!tw.started) {  // no event: one state, from 0
      tw.started = true;
      tw.t_prev = tr.first;
    }
    while (tw.next_gap < tw.gaps.size()) {  // a thread whose events all went to other runtimes' models
      const auto [from, to] = tw.gaps[tw.next_gap++];
      leave(i, from, to);
    }
    judge_wakes(i, UINT64_MAX, false);  // every event of it seen
    tr.time_in[tw.cur] += tr.last - tw.t_prev;
    if (tw.cur == kRunning && dag_on(tr) && tw.stack.back().run != kNoRun) graph_.add_self(tw.stack.back().run, tr.last - tw.t_prev);
    for (StateGrid& g : m_.grids) g.add(i, tw.state_since, tr.last, std::uint8_t(tw.cur));
    while (!tw.stack.empty()) pop(i, tr.last, false);  // open at its last event
    judge_wakes(i, tr.last, true);
  }
  for (unsigned w = 0; w < m_.workers; ++w) m_.work_ns += m_.tracks[w].time_in[kRunning];
  if (dag_) m_.work_span = graph_.finish();
}

// A runtime's name (Options::name) from its workers' thread names, each
// "<name>-w<index>" (runtime.cpp names them so; the name is at most 8
// bytes, so Linux's 15 never cuts it); empty unless every worker stream
// carries the same name that way.
std::string runtime_name(const TraceIndex& ix, const std::vector<std::vector<std::size_t>>& of_worker) {
  std::string name;
  bool any = false;
  for (std::size_t w = 0; w < of_worker.size(); ++w) {
    const std::string suffix = "-w" + std::to_string(w);
    for (std::size_t i : of_worker[w]) {
      const std::string thread(ix.streams[i].info.name,
                               strnlen(ix.streams[i].info.name, sizeof ix.streams[i].info.name));
      if (thread.size() <= suffix.size() || thread.compare(thread.size() - suffix.size(), suffix.size(), suffix) != 0)
        return "";
      const std::string prefix = thread.substr(0, thread.size() - suffix.size());
      if (any && prefix != name) return "";
      name = prefix;
      any = true;
    }
  }
  return name;
}

}  // namespace

std::vector<Model> analyse(const TraceIndex& ix, const AnalyseOptions& opt) {
  // The runtimes, by the first event of their worker streams.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> first;  // (first event, runtime)
  for (const StreamIndex& s : ix.streams) {
    if (s.info.worker < 0) continue;
    const std::uint64_t at = s.events ? s.first : UINT64_MAX;
    auto it = std::find_if(first.begin(), first.end(), [&](const auto& f) { return f.second == s.info.runtime; });
    if (it == first.end())
      first.emplace_back(at, s.info.runtime);
    else
      it->first = std::min(it->first, at);
  }
  std::sort(first.begin(), first.end());
  if (first.empty()) first.emplace_back(0, 0);  // no worker recorded anything

  std::vector<Model> models(first.size());
  std::vector<Builder> builders;
  builders.reserve(models.size());
  std::map<std::uint64_t, std::size_t> model_of;  // runtime -> models[]
  // Where each stream's events go: a worker stream to its track; an outside
  // thread's to its track in the model of the runtime it is about.
  constexpr std::size_t kNone = SIZE_MAX;
  std::vector<std::size_t> worker_track(ix.streams.size(), kNone);
  std::vector<std::map<std::size_t, std::size_t>> outside_track(models.size());  // stream -> track
  const bool task_level = ix.header.level == std::uint32_t(trace_format::Level::kTask);
  for (std::size_t k = 0; k < models.size(); ++k) {
    Model& m = models[k];
    m.task_level = task_level;
    m.end_ns = ix.end_ns;
    m.dropped = ix.dropped;
    m.events = ix.events;
    m.complete = ix.complete;
    m.runtime = first[k].second;
    m.index = k;
    model_of[m.runtime] = k;
    builders.emplace_back(m, opt);
    Builder& b = builders.back();
    std::vector<std::vector<std::size_t>> of_worker;
    for (std::size_t i = 0; i < ix.streams.size(); ++i) {
      const StreamIndex& s = ix.streams[i];
      if (s.info.worker < 0 || s.info.runtime != m.runtime) continue;
      if (unsigned(s.info.worker) >= of_worker.size()) of_worker.resize(s.info.worker + 1);
      of_worker[s.info.worker].push_back(i);
      worker_track[i] = std::size_t(s.info.worker);
    }
    m.workers = unsigned(of_worker.size());
    m.name = runtime_name(ix, of_worker);
    for (unsigned w = 0; w < m.workers; ++w) {
      Track t;
      t.worker = int(w);
      t.label = "w" + std::to_string(w);
      bool any = false;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> alive;  // each thread's first and last event
      for (std::size_t i : of_worker[w]) {
        const StreamIndex& s = ix.streams[i];
        t.dropped += s.dropped;
        t.tid = s.info.tid;
        if (!s.events) continue;
        t.first = any ? std::min(t.first, s.first) : s.first;
        t.last = any ? std::max(t.last, s.last) : s.last;
        any = true;
        alive.emplace_back(s.first, s.last);
      }
      // Where none of its threads was alive: runtimes one after another.
      std::sort(alive.begin(), alive.end());
      std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;
      std::uint64_t upto = alive.empty() ? 0 : alive[0].second;
      for (const auto& [from, to] : alive) {
        if (from > upto) gaps.emplace_back(upto, from);
        upto = std::max(upto, to);
      }
      b.add_track(std::move(t), any, std::move(gaps));
    }
    // Threads outside the pool, and workers of other runtimes, with events about this one.
    for (std::size_t i = 0; i < ix.streams.size(); ++i) {
      const StreamIndex& s = ix.streams[i];
      if (s.info.worker >= 0 && (s.info.runtime == m.runtime || s.about.empty())) continue;
      Track t;
      if (s.info.worker >= 0) {
        const auto of =
            std::find_if(first.begin(), first.end(), [&](const auto& f) { return f.second == s.info.runtime; });
        t.label = "w" + std::to_string(s.info.worker) + " of runtime " + std::to_string(of - first.begin() + 1) +
                  " (tid " + std::to_string(s.info.tid) + ")";
      } else {
        t.label = std::string(s.info.name[0] ? s.info.name : "thread") + " (tid " + std::to_string(s.info.tid) + ")";
        t.dropped = s.dropped;
      }
      t.tid = s.info.tid;
      bool any = false;
      for (const AboutRuntime& a : s.about) {
        if (!(a.runtime == m.runtime || (a.runtime == kBeforeRuntime && k == 0)) || !a.events) continue;
        t.first = any ? std::min(t.first, a.first) : a.first;
        t.last = any ? std::max(t.last, a.last) : a.last;
        any = true;
      }
      if (!any) continue;
      outside_track[k][i] = m.tracks.size();
      b.add_track(std::move(t), true);
    }
    b.start();
  }

  std::vector<std::uint64_t> about(ix.streams.size(), kBeforeRuntime);
  for (std::size_t i = 0; i < ix.streams.size(); ++i)
    if (ix.streams[i].info.worker >= 0) about[i] = ix.streams[i].info.runtime;
  EventReader reader(ix);
  EventReader::Item it;
  while (reader.next(&it)) {
    const StreamIndex& s = ix.streams[it.stream];
    if (EventType(it.event.type) == EventType::kRuntime) {
      about[it.stream] = event_task(it.event);
      continue;
    }
    if (s.info.worker >= 0 && (about[it.stream] == s.info.runtime || !follows_runtime_events(s.info, it.event))) {
      if (worker_track[it.stream] == kNone) continue;
      builders[model_of[s.info.runtime]].event(worker_track[it.stream], it.event);
      continue;
    }
    std::size_t k;
    if (about[it.stream] == kBeforeRuntime) {
      k = 0;
    } else {
      auto mo = model_of.find(about[it.stream]);
      if (mo == model_of.end()) continue;
      k = mo->second;
    }
    auto tr = outside_track[k].find(it.stream);
    if (tr != outside_track[k].end()) builders[k].event(tr->second, it.event);
  }
  for (Builder& b : builders) b.finish();
  return models;
}

}  // namespace parkway::tracetool
