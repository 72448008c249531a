// trace_tool.hpp -- the `parkway trace` commands' parts: the text report,
// the Chrome trace-event JSON, the SVG timeline.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "trace_file.hpp"
#include "trace_model.hpp"

namespace parkway::tracetool {

// The grids each command asks analyse() for (AnalyseOptions::grids).
inline constexpr std::size_t kReportGrid = 0;         // report: the parallelism chart
inline constexpr unsigned kReportSlices = 40;         //   slices of the active window
inline constexpr std::size_t kExportCounterGrid = 0;  // export: the running-workers counter
inline constexpr unsigned kExportCounterSlices = 2000;  //   slices of the whole trace
inline constexpr std::size_t kSvgGrid = 1;            // export: the SVG's pixel columns
inline constexpr unsigned kSvgColumns = 1030;

// One section per runtime (models: analyse() with the report's grid and
// the work/span graph).
void write_report(const TraceIndex& ix, const std::vector<Model>& models, std::FILE* out);

// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing), one process
// per runtime: the header at construction, the slices and flows as
// analyse() gives them to sink(), the names and counters at finish.
class ChromeJsonWriter {
 public:
  ChromeJsonWriter(std::FILE* out, const TraceIndex& ix);
  ~ChromeJsonWriter();
  ModelSink* sink();
  void finish(const std::vector<Model>& models);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The SVG timeline of the model's kSvgGrid.
void write_svg(const std::string& title, const Model& m, std::FILE* out);

// `parkway trace record`: -p PID (pid > 0) or the command `cmd`, into `out`.
int record_main(const char* where, int pid, const std::vector<std::string>& cmd, const std::string& out);

// A duration in ns as "812 ns", "4.5 us", "12.3 ms", "1.20 s".
std::string fmt_ns(double ns);

}  // namespace parkway::tracetool
