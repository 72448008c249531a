// trace_tool.hpp -- the `parkway trace` commands' parts: the text report,
// the Chrome trace-event JSON, the SVG timeline.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "trace_file.hpp"
#include "trace_model.hpp"

namespace parkway::tracetool {

// One section per runtime (models: build_model of each of trace_runtimes).
void write_report(const std::string& path, const TraceFile& tf, const std::vector<Model>& models, std::FILE* out);
// Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing): one process
// per runtime.
void write_chrome_json(const TraceFile& tf, const std::vector<Model>& models, std::FILE* out);
// [from, to) ns of the trace; from == to: from the first event to the last.
void write_svg(const std::string& title, const Model& m, std::FILE* out, std::uint64_t from = 0, std::uint64_t to = 0);

// `parkway trace record`: -p PID (pid > 0) or the command `cmd`, into `out`.
int record_main(const char* where, int pid, const std::vector<std::string>& cmd, const std::string& out);

// A duration in ns as "812 ns", "4.5 us", "12.3 ms", "1.20 s".
std::string fmt_ns(double ns);

}  // namespace parkway::tracetool
