// trace_cli.cpp -- `parkway trace report|export`: arguments, then the
// file indexed (checked), analysed in a second pass, and the chosen
// output written.
#include "trace_cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trace_tool.hpp"

using namespace parkway::tracetool;

extern "C" const char parkway_trace_usage[] =
    "usage: parkway trace report [--partial] FILE\n"
    "       parkway trace export [--partial] [--json OUT] [--svg OUT]\n"
    "                            [--window MS:MS] FILE\n"
    "       parkway trace record [-o FILE] -p PID | -- COMMAND [ARGS...]\n"
    "\n"
    "FILE is written by a program run with PARKWAY_TRACE=FILE in its environment\n"
    "(PARKWAY_TRACE_LEVEL=task adds every task's spawn and run; docs/tracing.md).\n"
    "trace report  per worker running/searching/parked shares, steals, parks and\n"
    "              wake latencies, task durations, parallelism over time\n"
    "trace export  Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing\n"
    "              (default FILE.json) and an SVG timeline (default FILE.svg)\n"
    "  --partial   read a file without its end record (the process is running, or did\n"
    "              not exit normally) up to its last whole record\n"
    "  --json OUT, --svg OUT   where to write (- for stdout, one of them)\n"
    "  --window A:B  the SVG shows ms A to B of the trace (default: first to last\n"
    "                event)\n"
    "trace record  the scheduling events of a running process (-p, until Ctrl-C)\n"
    "              or of COMMAND, from the USDT probes under bpftrace (root),\n"
    "              into FILE (default parkway.pwt); no restart with PARKWAY_TRACE;\n"
    "              with `parkway sched load`, the sched_ext scheduler's decisions\n"
    "              about the workers too (those alone without bpftrace)\n";

namespace {

constexpr int kOk = 0, kFail = 1, kUsage = 2;

int usage_error(const char* where, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
int usage_error(const char* where, const char* fmt, ...) {
  std::fprintf(stderr, "%s: ", where);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputs(" (see `parkway trace --help`)\n", stderr);
  return kUsage;
}

struct Args {
  bool partial = false;
  std::string file, json, svg;
  std::uint64_t from_ns = 0, to_ns = 0;  // --window
};

// "A:B" in ms, A < B; false if it is not that.
bool parse_window(const char* s, Args* a) {
  char* end;
  const double from = std::strtod(s, &end);
  if (end == s || *end != ':') return false;
  const char* rest = end + 1;
  const double to = std::strtod(rest, &end);
  if (end == rest || *end || !(from >= 0) || !(to > from) || to > 1e12) return false;
  a->from_ns = std::uint64_t(from * 1e6);
  a->to_ns = std::uint64_t(to * 1e6);
  return true;
}

// Parses argv[2..]; `outputs`: --json and --svg are allowed.
int parse(int argc, char** argv, const char* where, bool outputs, Args* a) {
  for (int i = 2; i < argc; ++i) {
    const char* s = argv[i];
    if (!std::strcmp(s, "--partial")) {
      a->partial = true;
    } else if (outputs && !std::strcmp(s, "--window")) {
      if (i + 1 >= argc) return usage_error(where, "option %s needs a value", s);
      if (!parse_window(argv[++i], a))
        return usage_error(where, "--window takes A:B in ms with A < B, not '%s'", argv[i]);
    } else if (outputs && (!std::strcmp(s, "--json") || !std::strcmp(s, "--svg"))) {
      if (i + 1 >= argc) return usage_error(where, "option %s needs a value", s);
      (s[2] == 'j' ? a->json : a->svg) = argv[++i];
    } else if (s[0] == '-' && s[1] != 0) {
      return usage_error(where, "unknown option '%s'", s);
    } else if (a->file.empty()) {
      a->file = s;
    } else {
      return usage_error(where, "unexpected argument '%s'", s);
    }
  }
  if (a->file.empty()) return usage_error(where, "missing FILE");
  return kOk;
}

// An output file: "-" is stdout; a regular file (or a path not there yet)
// is written under a temporary name beside it and renamed at commit, so
// that an error leaves neither a half-written file nor a damaged old one;
// anything else (/dev/null, a pipe) is written in place.
struct Out {
  std::string path, tmp;
  std::FILE* f = nullptr;
  ~Out() {
    if (f && f != stdout) std::fclose(f);
    if (!tmp.empty()) ::unlink(tmp.c_str());
  }
};

// Opens `path` for writing; false after printing why. An output that is
// the trace being read (`input`) is refused: it would be truncated before
// it is read.
bool open_out(const char* where, const std::string& path, const std::string& input, Out* o) {
  o->path = path;
  if (path == "-") {
    o->f = stdout;
    return true;
  }
  struct stat in, st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && ::stat(input.c_str(), &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
    std::fprintf(stderr, "%s: %s is the trace being read: choose another output (--json, --svg)\n", where, path.c_str());
    return false;
  }
  struct stat l;
  if (!exists || (::lstat(path.c_str(), &l) == 0 && S_ISREG(l.st_mode))) {
    std::string t = path + ".XXXXXX";
    const int fd = ::mkstemp(t.data());
    if (fd < 0) {
      std::fprintf(stderr, "%s: cannot write %s: %s\n", where, path.c_str(), std::strerror(errno));
      return false;
    }
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask);  // what fopen would have left
    o->tmp = t;
    o->f = ::fdopen(fd, "w");
    if (!o->f) ::close(fd);
  } else {
    o->f = std::fopen(path.c_str(), "w");
  }
  if (!o->f) std::fprintf(stderr, "%s: cannot write %s: %s\n", where, path.c_str(), std::strerror(errno));
  return o->f != nullptr;
}

// Flushes and closes (stdout: flushes); a temporary file is renamed to
// the output's name. False after printing why.
bool close_out(const char* where, Out* o) {
  std::FILE* f = o->f;
  o->f = nullptr;
  bool ok = !std::ferror(f);
  int err = ok ? 0 : EIO;
  if (std::fflush(f) != 0 && ok) ok = false, err = errno;
  if (f != stdout && std::fclose(f) != 0 && ok) ok = false, err = errno;
  if (ok && !o->tmp.empty()) {
    if (::rename(o->tmp.c_str(), o->path.c_str()) != 0) ok = false, err = errno;
    else o->tmp.clear();
  }
  if (!ok)
    std::fprintf(stderr, "%s: writing %s failed: %s\n", where, o->path == "-" ? "stdout" : o->path.c_str(),
                 std::strerror(err));
  return ok;
}

// Whether paths a and b name one file that would hold both documents:
// the same file where they exist (not a device: /dev/null takes both),
// else the same name in the same directory.
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  const bool has_a = ::stat(a.c_str(), &sa) == 0, has_b = ::stat(b.c_str(), &sb) == 0;
  if (has_a || has_b)
    return has_a && has_b && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino && !S_ISCHR(sa.st_mode);
  if (a == b) return true;
  auto in_dir = [](const std::string& p) {
    const auto slash = p.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : p.substr(0, slash + 1);
    char* real = ::realpath(dir.c_str(), nullptr);
    std::string r = real ? real : dir;
    std::free(real);
    return r + "/" + p.substr(slash == std::string::npos ? 0 : slash + 1);
  };
  return in_dir(a) == in_dir(b);
}

std::string with_ext(const std::string& file, const char* ext) {
  std::string base = file;
  auto slash = base.rfind('/');
  auto dot = base.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) base.resize(dot);
  return base + ext;
}

int run(int argc, char** argv) {
  const bool report = !std::strcmp(argv[1], "report");
  const char* where = report ? "parkway trace report" : "parkway trace export";
  Args a;
  if (int rc = parse(argc, argv, where, !report, &a); rc != kOk) return rc;
  // Two documents one after the other on stdout would be neither JSON nor SVG.
  if (!report && a.json == "-" && a.svg == "-")
    return usage_error(where, "--json - and --svg - both write to stdout: give one of them a file");
  // First pass: every record checked (a bad file fails here, before any output).
  const TraceIndex ix = index_trace(a.file, a.partial);
  AnalyseOptions opt;
  if (report) {
    opt.work_span = true;
    opt.grids = {{0, 0, kReportSlices, false}};
    const std::vector<Model> models = analyse(ix, opt);
    write_report(ix, models, stdout);
    Out o;
    o.path = "-";
    o.f = stdout;
    return close_out(where, &o) ? kOk : kFail;
  }
  // A window that starts past the end would draw an empty timeline.
  if (a.to_ns != 0 && a.from_ns >= ix.end_ns) {
    std::fprintf(stderr, "%s: --window %.3f:%.3f starts past the end of %s (%.3f ms traced)\n", where,
                 double(a.from_ns) / 1e6, double(a.to_ns) / 1e6, a.file.c_str(), double(ix.end_ns) / 1e6);
    return kFail;
  }
  if (a.json.empty()) a.json = with_ext(a.file, ".json");
  if (a.svg.empty()) a.svg = with_ext(a.file, ".svg");
  // One file for both is refused: the SVG would replace the JSON written there.
  if (a.json != "-" && a.svg != "-" && same_file(a.json, a.svg))
    return usage_error(where, "the JSON and the SVG would both be written to %s: give --json or --svg another file",
                       a.svg.c_str());
  // Both outputs opened before anything is written: neither is left behind
  // (nor an old one replaced) when the other cannot be.
  Out j, s;
  if (!open_out(where, a.json, a.file, &j) || !open_out(where, a.svg, a.file, &s)) return kFail;
  // Second pass: the JSON written as the events are analysed.
  ChromeJsonWriter json(j.f, ix);
  opt.grids = {{0, ix.end_ns, kExportCounterSlices, false}, {a.from_ns, a.to_ns, kSvgColumns, true}};
  opt.sink = json.sink();
  const std::vector<Model> models = analyse(ix, opt);
  json.finish(models);
  // The SVG draws the runtime with the most events.
  const Model* most = &models[0];
  std::uint64_t most_events = 0;
  for (const Model& m : models) {
    std::uint64_t n = 0;
    for (const Track& t : m.tracks) n += t.events;
    if (n > most_events) most = &m, most_events = n;
  }
  write_svg(models.size() > 1 ? a.file + " (the runtime with the most events)" : a.file, *most, s.f);
  if (!close_out(where, &j) || !close_out(where, &s)) return kFail;
  if (a.json != "-" && a.svg != "-")
    std::fprintf(stderr, "%s: wrote %s (ui.perfetto.dev) and %s\n", where, a.json.c_str(), a.svg.c_str());
  return kOk;
}

int record(int argc, char** argv) {
  const char* where = "parkway trace record";
  std::string out = "parkway.pwt";
  int pid = 0;
  std::vector<std::string> cmd;
  for (int i = 2; i < argc; ++i) {
    const char* s = argv[i];
    if (!std::strcmp(s, "--")) {
      for (++i; i < argc; ++i) cmd.push_back(argv[i]);
      if (cmd.empty()) return usage_error(where, "missing COMMAND after --");
    } else if (!std::strcmp(s, "-o") || !std::strcmp(s, "-p")) {
      if (i + 1 >= argc) return usage_error(where, "option %s needs a value", s);
      const char* v = argv[++i];
      if (s[1] == 'o') {
        out = v;
      } else {
        char* end;
        long p = std::strtol(v, &end, 10);
        if (!*v || *end || p <= 0 || p > 4194304) return usage_error(where, "-p takes a process id, not '%s'", v);
        pid = int(p);
      }
    } else if (s[0] == '-') {
      return usage_error(where, "unknown option '%s'", s);
    } else {
      return usage_error(where, "unexpected argument '%s' (a command goes after --)", s);
    }
  }
  if ((pid > 0) == !cmd.empty())
    return usage_error(where, pid > 0 ? "-p and a command: give one" : "missing -p PID or -- COMMAND");
  return record_main(where, pid, cmd, out);
}

}  // namespace

extern "C" int parkway_trace_main(int argc, char** argv) {
  if (argc < 2) return usage_error("parkway trace", "missing trace subcommand (report, export or record)");
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(parkway_trace_usage, stdout);
    return kOk;
  }
  // `parkway trace report --help` (or export's, record's): the same text.
  for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(parkway_trace_usage, stdout);
      return kOk;
    }
  if (!std::strcmp(argv[1], "record")) return record(argc, argv);
  if (std::strcmp(argv[1], "report") != 0 && std::strcmp(argv[1], "export") != 0)
    return usage_error("parkway trace", "unknown trace subcommand '%s' (report, export or record)", argv[1]);
  try {
    return run(argc, argv);
  } catch (const FormatError& e) {
    std::fprintf(stderr, "parkway trace: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parkway trace: %s\n", e.what());
  }
  return kFail;
}
