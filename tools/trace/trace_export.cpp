// trace_export.cpp -- `parkway trace export`: the Chrome trace-event JSON
// that ui.perfetto.dev and chrome://tracing load. One thread track per
// worker (and per outside thread) with its task, search and park slices,
// which nest as the spans do; flow arrows from a spawn to the start of the
// task on another worker (task level) or from victim to thief of a steal
// (scheduling level), and from a wake to the wakee's unpark; counters for
// the running workers and the queued tasks.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <vector>

#include "trace_tool.hpp"

namespace parkway::tracetool {

namespace {

constexpr std::size_t kMaxFlows = 200000;  // per kind: beyond this the viewer bogs down

int tid_of(const Model& m, std::size_t track) {
  return track < m.workers ? int(track) : int(100000 + track);
}

// `s` (a file name: any bytes but NUL) as XML text: '<', '>', '&', control
// characters and bytes that are not well-formed UTF-8 (RFC 3629; U+FFFE and
// U+FFFF, which XML excludes, too) become '_'.
std::string xml_text(const std::string& s) {
  std::string t;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    // The sequence's length, and the range of its second byte.
    std::size_t n = 1;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    bool ok = c < 0x80 ? c >= 0x20 && c != '<' && c != '>' && c != '&' : n > 1 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = k == 1 ? b >= lo && b <= hi : (b & 0xc0) == 0x80;
    }
    if (ok && n == 3 && c == 0xef && static_cast<unsigned char>(s[i + 1]) == 0xbf &&
        static_cast<unsigned char>(s[i + 2]) >= 0xbe)
      ok = false;
    if (ok)
      t.append(s, i, n), i += n;
    else
      t += '_', ++i;
  }
  return t;
}

const char* span_name(SpanKind k) {
  switch (k) {
    case SpanKind::kTask: return "task";
    case SpanKind::kSearch: return "search";
    case SpanKind::kPark: return "park";
    case SpanKind::kDescheduled: return "descheduled";
  }
  return "?";
}

struct Json {
  std::FILE* o;
  bool first = true;
  void sep() {
    std::fputs(first ? "\n" : ",\n", o);
    first = false;
  }
  // ns -> the format's microseconds, exact to the ns.
  static void us(std::FILE* o, std::uint64_t ns) {
    std::fprintf(o, "%" PRIu64 ".%03u", ns / 1000, unsigned(ns % 1000));
  }
  void slice(int pid, int tid, const char* name, std::uint64_t b, std::uint64_t e, const char* args = nullptr) {
    sep();
    std::fprintf(o, "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", name, pid, tid);
    us(o, b);
    std::fputs(",\"dur\":", o);
    us(o, e - b);
    if (args) std::fprintf(o, ",\"args\":{%s}", args);
    std::fputs("}", o);
  }
  void flow(int pid, const char* name, std::uint64_t id, int tid_from, std::uint64_t at_from, int tid_to,
            std::uint64_t at_to) {
    sep();
    std::fprintf(o, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"s\",\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"ts\":", name,
                 name, id, pid, tid_from);
    us(o, at_from);
    std::fputs("}", o);
    sep();
    std::fprintf(o,
                 "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"ts\":",
                 name, name, id, pid, tid_to);
    us(o, at_to);
    std::fputs("}", o);
  }
  void counter(int pid, const char* name, std::uint64_t at, double v) {
    sep();
    std::fprintf(o, "{\"name\":\"%s\",\"ph\":\"C\",\"pid\":%d,\"ts\":", name, pid);
    us(o, at);
    std::fprintf(o, ",\"args\":{\"value\":%.3f}}", v);
  }
};

}  // namespace

// The slices and flows as the pass finds them; per runtime, the tracks'
// names and the counters at the end.
struct ChromeJsonWriter::Impl : ModelSink {
  Json j;
  int base_pid;
  struct PerModel {
    std::uint64_t next_id = 0;  // flow ids: unique across runtimes
    std::size_t migrations = 0, steals = 0, wakes = 0;
  };
  std::vector<PerModel> per;
  char args[64];

  Impl(std::FILE* o, int pid) : j{o}, base_pid(pid) {}
  int pid_of(const Model& m) const { return base_pid + int(m.index) * 1000000; }  // one process per runtime
  PerModel& of(const Model& m) {
    if (per.size() <= m.index) per.resize(m.index + 1);
    PerModel& p = per[m.index];
    if (p.next_id == 0) p.next_id = 1 + std::uint64_t(m.index) * 10000000;
    return p;
  }
  void span(const Model& m, std::size_t track, const Span& s) override {
    if (s.kind == SpanKind::kTask) std::snprintf(args, sizeof args, "\"task\":\"0x%" PRIx64 "\"", s.task);
    j.slice(pid_of(m), tid_of(m, track), span_name(s.kind), s.begin, s.end, s.kind == SpanKind::kTask ? args : nullptr);
  }
  void migration(const Model& m, const Migration& g) override {
    PerModel& p = of(m);
    if (p.migrations++ >= kMaxFlows) return;
    j.slice(pid_of(m), g.from, "spawn", g.spawned_at, g.spawned_at);
    j.flow(pid_of(m), "stolen task", p.next_id++, g.from, g.spawned_at, g.to, g.started_at);
  }
  void steal(const Model& m, const Steal& s) override {
    if (m.task_level) return;  // task level: each stolen task is a migration
    PerModel& p = of(m);
    if (p.steals++ >= kMaxFlows || s.victim < 0 || unsigned(s.victim) >= m.workers) return;
    std::snprintf(args, sizeof args, "\"thief\":\"w%d\",\"tasks\":%u", s.thief, s.count);
    j.slice(pid_of(m), s.victim, "stolen from", s.at, s.at, args);
    j.flow(pid_of(m), "steal", p.next_id++, s.victim, s.at, s.thief, s.at);
  }
  void sched_ext(const Model& m, std::size_t track, std::uint64_t at, unsigned kind, unsigned cpu) override {
    std::snprintf(args, sizeof args, "\"cpu\":%u", cpu);
    char name[32];
    std::snprintf(name, sizeof name, "sched_ext %s", sched_ext_name(kind));
    j.slice(pid_of(m), tid_of(m, track), name, at, at, args);
  }
  void wake(const Model& m, const Wake& w) override {
    PerModel& p = of(m);
    if (!w.asleep || p.wakes++ >= kMaxFlows) return;
    std::snprintf(args, sizeof args, "\"wakee\":\"w%d\"", w.wakee);
    j.slice(pid_of(m), tid_of(m, w.track), "wake", w.at, w.at, args);
    // Bound to the wakee's park slice, which ends at the unpark.
    j.flow(pid_of(m), "wake", p.next_id++, tid_of(m, w.track), w.at, w.wakee, w.unpark > w.at ? w.unpark - 1 : w.unpark);
  }

  // One runtime's process and track names and its counters.
  void finish_runtime(const Model& m, std::size_t of_runtimes) {
    std::FILE* o = j.o;
    const int pid = pid_of(m);
    j.sep();
    // The runtime's name is printable ASCII without '"' or '\\' (the
    // reader replaced any other byte of a thread name).
    const std::string named = m.name.empty() || m.name == "parkway" ? std::string() : " " + m.name;
    if (of_runtimes == 1)
      std::fprintf(o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"parkway%s pid %d\"}}", pid,
                   named.c_str(), pid);
    else
      std::fprintf(o, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"parkway%s runtime %zu of %zu\"}}",
                   pid, named.c_str(), m.index + 1, of_runtimes);
    for (std::size_t i = 0; i < m.tracks.size(); ++i) {
      j.sep();
      std::fprintf(o, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", pid,
                   tid_of(m, i), m.tracks[i].label.c_str());
      j.sep();
      std::fprintf(o, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%zu}}",
                   pid, tid_of(m, i), i);
    }
    const StateGrid& g = m.grids.at(kExportCounterGrid);
    std::vector<double> par = parallelism(m, g);
    for (std::size_t k = 0; k < par.size(); ++k)
      j.counter(pid, m.task_level ? "workers running tasks" : "workers not idle",
                g.from + std::uint64_t((unsigned __int128)(g.to - g.from) * k / par.size()), par[k]);
    for (const auto& [at, n] : m.queued) j.counter(pid, "queued tasks", at, double(n));
    for (std::size_t q = 0; q < m.queue_len.size(); ++q) {
      const std::string name = q < m.workers ? "deque " + m.tracks[q].label : std::string("injection queue");
      for (const auto& [at, n] : m.queue_len[q]) j.counter(pid, name.c_str(), at, double(n));
    }
  }
};

ChromeJsonWriter::ChromeJsonWriter(std::FILE* o, const TraceIndex& ix) : impl_(new Impl(o, int(ix.header.pid))) {
  std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", o);
}

ChromeJsonWriter::~ChromeJsonWriter() = default;

ModelSink* ChromeJsonWriter::sink() { return impl_.get(); }

void ChromeJsonWriter::finish(const std::vector<Model>& models) {
  for (const Model& m : models) impl_->finish_runtime(m, models.size());
  std::fputs("\n]}\n", impl_->j.o);
}

void write_svg(const std::string& title, const Model& m, std::FILE* o) {
  const StateGrid& g = m.grids.at(kSvgGrid);
  const int left = 150, right = 20, row = 22, plot_h = 120;
  const int cols = int(g.bins);
  const int width = left + cols + right;
  const int rows = int(m.tracks.size());
  const int top = 40, plot_top = top + rows * row + 40;
  const int height = plot_top + plot_h + 60;
  const std::uint64_t t0 = g.from, t1 = g.to;
  const char* color[kStates] = {"#2e9d4a", "#f0a030", "#8aa0c8", m.task_level ? "#d8d8d8" : "#9fd3a8", "#d04040"};
  std::fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n",
               width, height);
  std::fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  const std::string t = xml_text(title);
  std::fprintf(o, "<text x=\"10\" y=\"20\" font-size=\"14\">%s: %s to %s of the trace, %s level</text>\n",
               t.c_str(), fmt_ns(double(t0)).c_str(), fmt_ns(double(t1)).c_str(), m.task_level ? "task" : "scheduling");
  std::vector<StateGrid::Cell> cells;  // a row's, in turn
  for (int r = 0; r < rows; ++r) {
    const Track& tr = m.tracks[r];
    const int y = top + r * row;
    std::fprintf(o, "<text x=\"10\" y=\"%d\">%s</text>\n", y + 15, tr.label.substr(0, 20).c_str());
    // Per pixel column, the state that held most of its time.
    int run_start = -1, run_state = -1;
    auto flush = [&](int end_col) {
      if (run_state >= 0)
        std::fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", left + run_start, y + 2,
                     end_col - run_start, row - 4, color[run_state]);
    };
    g.cells(std::size_t(r), &cells);
    for (int c = 0; c < cols; ++c) {
      int best = -1;
      double most = 0;
      for (int s = 0; s < kStates; ++s)
        if (cells[c][s] > most) most = cells[c][s], best = s;
      if (best != run_state) {
        flush(c);
        run_start = c;
        run_state = best;
      }
    }
    flush(cols);
  }
  // Time axis.
  const int axis_y = top + rows * row + 5;
  for (int k = 0; k <= 5; ++k) {
    const int x = left + cols * k / 5;
    std::fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", x, top, x, axis_y);
    std::fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, axis_y + 14,
                 fmt_ns(double(t0) + double(t1 - t0) * k / 5).c_str());
  }
  // Parallelism plot.
  std::vector<double> par = parallelism(m, g);
  const double ymax = std::max(1u, m.workers);
  std::fprintf(o, "<text x=\"10\" y=\"%d\">%s</text>\n", plot_top + 12,
               m.task_level ? "workers running tasks" : "workers not idle");
  std::fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", left, plot_top,
               cols, plot_h);
  std::fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%u</text>\n", left - 4, plot_top + 10, m.workers);
  std::fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n", left - 4, plot_top + plot_h);
  std::fprintf(o, "<polyline fill=\"none\" stroke=\"#2e9d4a\" points=\"");
  for (int c = 0; c < cols; ++c)
    std::fprintf(o, "%d,%.1f ", left + c, plot_top + plot_h - par[c] / ymax * plot_h);
  std::fprintf(o, "\"/>\n");
  // Legend.
  const char* names[kStates] = {"task", "searching", "parked", m.task_level ? "between tasks" : "running (tasks and loop)",
                                "descheduled by the OS"};
  int lx = left;
  for (int s = 0; s < kStates; ++s) {
    if (s == kDescheduled && !m.kernel_view) continue;
    std::fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx, height - 30, color[s]);
    std::fprintf(o, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 16, height - 20, names[s]);
    lx += 190;
  }
  std::fprintf(o, "</svg>\n");
}

}  // namespace parkway::tracetool
