// trace_record.cpp -- `parkway trace record`: the scheduling-level events
// of a process that was not started with PARKWAY_TRACE, from its USDT
// probes under bpftrace, written as a trace file (format.hpp) that
// `parkway trace report|export` read like an in-process one.
//
// bpftrace prints one line per probe hit: "NS TID NAME ARGS..." (NS from
// bpftrace's nsecs, CLOCK_MONOTONIC); each thread becomes a stream, named
// by the worker index its worker-side probes carry. Task-level events are
// not recorded this way: a uprobe hit costs microseconds. The kernel's
// view comes with them: sched_switch of the process's threads, as off_cpu
// (preempted while runnable, or blocked) and on_cpu. With the sched_ext
// scheduler loaded, its decisions about the process's workers come from
// its ring buffer too (trace_sched_ext.hpp); without bpftrace, only they.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "trace_sched_ext.hpp"
#include "trace_tool.hpp"

namespace parkway::tracetool {

using namespace trace_format;

namespace {

// probe name, its EventType, how many arguments it has, and which
// argument (if any) is the worker index of the thread that fired it.
struct Probe {
  const char* name;
  EventType type;
  int args;
  int worker_arg;  // -1: none
  bool usdt;       // else a line of the sched_switch part of the program
};
constexpr Probe kProbes[] = {
    {"steal", EventType::kSteal, 3, 0, true},
    {"steal_fence", EventType::kStealFence, 2, 0, true},
    {"inject_take", EventType::kInjectTake, 2, 0, true},
    {"search_begin", EventType::kSearchBegin, 1, 0, true},
    {"search_end", EventType::kSearchEnd, 2, 0, true},
    {"park", EventType::kPark, 2, 0, true},
    {"unpark", EventType::kUnpark, 3, 0, true},
    {"withdrawn", EventType::kUnpark, 2, 0, true},  // handed off at the recheck: unpark a8 = 1, a16 = 1
    {"wake", EventType::kWake, 2, 0, true},
    {"notify", EventType::kNotify, 3, 0, true},
    {"park_fence", EventType::kParkFence, 1, 0, true},
    {"slice_yield", EventType::kSliceYield, 1, 0, true},
    {"inject", EventType::kInject, 1, -1, true},
    {"off_cpu", EventType::kOffCpu, 1, -1, false},  // arg: prev_state; then the thread's name
    {"on_cpu", EventType::kOnCpu, 0, -1, false},
};

std::string which(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return access(prog.c_str(), X_OK) == 0 ? prog : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + prog;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// The file that holds the probes: the libparkway.so the process mapped,
// else its executable (a static link).
std::string probe_target_of_pid(int pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    auto base = path.substr(path.rfind('/') + 1);
    if (base.rfind("libparkway.so", 0) == 0) return path;
  }
  char exe[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  return exe;
}

// For a command not started yet: the libparkway.so its loader would map
// (ldd), else the executable itself.
std::string probe_target_of_cmd(const std::string& exe) {
  std::string cmd = "ldd '" + exe + "' 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::string found;
    while (std::fgets(buf, sizeof buf, p)) {
      std::string l = buf;
      auto at = l.find("libparkway.so");
      auto arrow = l.find("=> ");
      if (at != std::string::npos && arrow != std::string::npos) {
        std::string path = l.substr(arrow + 3);
        path = path.substr(0, path.find(' '));
        if (!path.empty() && path[0] == '/') found = path;
      }
    }
    pclose(p);
    if (!found.empty()) return found;
  }
  return exe;
}

// The bits of sched_switch's prev_state that say the thread blocked (S,
// D, T, ...), as the tracepoint's format prints them (__print_flags):
// without any of them it was still runnable, preempted (the kernel may add
// a bit of its own for that, TASK_REPORT_MAX, above them). Unreadable
// format: the states of kernels since 4.14 (TASK_REPORT, 0x7f, and
// TASK_REPORT_IDLE, 0x80).
std::uint64_t blocked_state_bits() {
  std::ifstream f("/sys/kernel/tracing/events/sched/sched_switch/format");
  std::string fmt((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::uint64_t bits = 0;
  const auto from = fmt.find("__print_flags(");
  const auto to = from == std::string::npos ? from : fmt.find("\"R\"", from);
  for (auto at = from; at != std::string::npos && at < to; ++at) {
    at = fmt.find('{', at);
    if (at == std::string::npos || at >= to) break;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(fmt.c_str() + at + 1, &end, 0);
    if (end && *end == ',') bits |= v;
  }
  return bits ? bits : 0xff;
}

std::string bpftrace_program(const std::string& target, const std::string& filter, bool command) {
  // A thread of the process leaving its CPU marks it (@pw), so that its
  // return is seen too (sched_switch names the next thread by tid only);
  // that line carries the thread's name, for threads gone by the end. A
  // command's process id comes first (cpid).
  std::string s =
      std::string(command ? "BEGIN { printf(\"0 %d pid\\n\", cpid); }\n" : "") +
      "tracepoint:sched:sched_switch /" + filter +
      "/ { @pw[tid] = 1; printf(\"%llu %d off_cpu %lld %s\\n\", nsecs, tid, (int64)args->prev_state, "
      "args->prev_comm); }\n"
      "tracepoint:sched:sched_switch /@pw[args->next_pid]/ { printf(\"%llu %d on_cpu\\n\", nsecs, "
      "args->next_pid); }\n";
  for (const Probe& p : kProbes) {
    if (!p.usdt) continue;
    s += "usdt:" + target + ":parkway:" + p.name + " /" + filter + "/ { printf(\"%llu %d " + p.name;
    for (int i = 0; i < p.args; ++i) s += " %lld";
    s += "\\n\", nsecs, tid";
    for (int i = 0; i < p.args; ++i) s += ", (int64)arg" + std::to_string(i);
    s += "); }\n";
  }
  return s;
}

struct Collected {
  std::map<std::uint32_t, std::vector<Event>> by_tid;
  std::map<std::uint32_t, int> worker_of;  // tid -> worker index
  std::map<std::uint32_t, std::string> name_of;  // tid -> its name when it last left its CPU
  std::uint64_t first_ns = UINT64_MAX, last_ns = 0;
  std::uint64_t blocked_bits = 0xff;  // prev_state bits of a thread that blocked
  int pid = 0;                        // the command's process (bpftrace's cpid)
};

void take_line(const char* line, Collected& c) {
  unsigned long long ns;
  int tid, used = 0;
  char name[32];
  if (std::sscanf(line, "%llu %d %31s%n", &ns, &tid, name, &used) != 3) return;  // bpftrace's own lines
  if (!std::strcmp(name, "pid")) {
    c.pid = tid;
    return;
  }
  const Probe* p = nullptr;
  for (const Probe& q : kProbes)
    if (!std::strcmp(q.name, name)) p = &q;
  if (!p) return;
  long long a[3] = {0, 0, 0};
  const char* rest = line + used;
  for (int i = 0; i < p->args; ++i) {
    int n = 0;
    if (std::sscanf(rest, " %lld%n", &a[i], &n) != 1) return;
    rest += n;
  }
  Event e{};
  e.ticks = ns;
  e.type = std::uint8_t(p->type);
  switch (p->type) {
    case EventType::kSteal: e.a16 = std::uint16_t(a[1]); e.a32 = std::uint32_t(a[2]); break;
    case EventType::kStealFence: e.a16 = std::uint16_t(a[1]); break;
    case EventType::kInjectTake: e.a32 = std::uint32_t(a[1]); break;
    case EventType::kSearchEnd: e.a8 = std::uint8_t(a[1]); break;
    case EventType::kPark: e.a32 = std::uint32_t(a[1]); break;
    case EventType::kUnpark:
      if (p->args == 2) {  // withdrawn(worker, park_id): no park to end
        e.a8 = 1;
        e.a16 = 1;
        e.a32 = std::uint32_t(a[1]);
      } else {
        e.a8 = std::uint8_t(a[1]);
        e.a32 = std::uint32_t(a[2]);
      }
      break;
    case EventType::kWake: e.a16 = std::uint16_t(a[1]); e.a32 = std::uint32_t(std::int32_t(a[0])); break;
    case EventType::kNotify: e.a8 = std::uint8_t(a[2]); e.a32 = std::uint32_t(a[1]); break;
    case EventType::kInject:
      e.a16 = std::uint16_t(std::uint64_t(a[0]) >> 32);
      e.a32 = std::uint32_t(a[0]);
      break;
    case EventType::kOffCpu: {
      e.a8 = (std::uint64_t(a[0]) & c.blocked_bits) == 0;  // preempted: runnable still
      while (*rest == ' ') ++rest;
      std::string comm(rest, std::strcspn(rest, "\n"));
      if (!comm.empty()) c.name_of[std::uint32_t(tid)] = comm.substr(0, 15);
      break;
    }
    default: break;
  }
  if (p->worker_arg >= 0 && a[p->worker_arg] >= 0 && a[p->worker_arg] < 4096) c.worker_of[tid] = int(a[p->worker_arg]);
  c.by_tid[std::uint32_t(tid)].push_back(e);
  if (ns < c.first_ns) c.first_ns = ns;
  if (ns > c.last_ns) c.last_ns = ns;
}

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000u + std::uint64_t(ts.tv_nsec);
}

bool write_file(const std::string& path, int pid, std::uint64_t start_ns, Collected& c, std::string* err) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof h.magic);
  h.version = kVersion;
  h.header_bytes = sizeof h;
  h.clock = std::uint32_t(Clock::kMonotonic);
  h.level = std::uint32_t(Level::kSched);
  h.pid = std::uint32_t(pid);
  h.chunk_events = 0;
  h.start_ticks = h.start_ns = start_ns;
  std::fwrite(&h, sizeof h, 1, f);
  auto record = [&](RecordKind k, std::uint32_t stream, const void* a, std::size_t alen, const void* b,
                    std::size_t blen) {
    RecordHeader r{kRecordMagic, std::uint16_t(k), 0, std::uint32_t(alen + blen), stream};
    std::fwrite(&r, sizeof r, 1, f);
    if (alen) std::fwrite(a, 1, alen, f);
    if (blen) std::fwrite(b, 1, blen, f);
  };
  std::uint64_t events = 0;
  std::uint32_t id = 0;
  constexpr std::size_t kChunk = 1 << 20;
  for (auto& [tid, evs] : c.by_tid) {
    // bpftrace prints each CPU's buffer in turn: a thread that moved
    // between CPUs can come out of order.
    std::stable_sort(evs.begin(), evs.end(), [](const Event& a, const Event& b) { return a.ticks < b.ticks; });
    StreamInfo si{};
    auto w = c.worker_of.find(tid);
    si.worker = w == c.worker_of.end() ? -1 : w->second;
    si.tid = tid;
    si.runtime = si.worker >= 0 ? 1 : 0;  // one runtime per traced process (probes carry no runtime)
    std::ifstream comm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    std::string name;
    if (!pid || !std::getline(comm, name)) {  // the thread is gone: its name as last seen
      auto n = c.name_of.find(tid);
      name = n == c.name_of.end() ? "" : n->second;
    }
    std::strncpy(si.name, name.c_str(), sizeof si.name - 1);
    record(RecordKind::kStream, ++id, &si, sizeof si, nullptr, 0);
    for (std::size_t i = 0; i < evs.size(); i += kChunk) {
      const std::size_t n = std::min(kChunk, evs.size() - i);
      ChunkInfo ci{0};
      record(RecordKind::kChunk, id, &ci, sizeof ci, evs.data() + i, n * sizeof(Event));
      events += n;
    }
  }
  const std::uint64_t end = std::max(c.last_ns, start_ns);
  EndInfo e{events, 0, end, end};
  record(RecordKind::kEnd, 0, &e, sizeof e, nullptr, 0);
  const bool ok = !std::ferror(f);
  if (std::fclose(f) != 0 || !ok) {
    *err = "writing " + path + " failed";
    std::remove(path.c_str());  // not a half-written trace
    return false;
  }
  return true;
}

// Whether `path` can be written, asked before recording (not after a
// recording the user cannot repeat); a file this made is removed again.
bool writable(const char* where, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return true;
  }
  if (errno == EEXIST) {
    const int f2 = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // no O_TRUNC: left as it is until the end
    if (f2 >= 0) {
      ::close(f2);
      return true;
    }
  }
  std::fprintf(stderr, "%s: cannot write %s: %s\n", where, path.c_str(), std::strerror(errno));
  return false;
}

// Writes the trace and says on stderr how many `what` it holds; false
// (with the reason printed) if the file could not be written.
bool write_and_report(const char* where, const std::string& out, int pid, std::uint64_t start_ns, Collected& c,
                      const char* what) {
  std::string err;
  if (!write_file(out, pid, start_ns, c, &err)) {
    std::fprintf(stderr, "%s: %s\n", where, err.c_str());
    return false;
  }
  std::uint64_t n = 0;
  for (auto& [tid, v] : c.by_tid) n += v.size();
  std::fprintf(stderr, "%s: %llu %s from %zu threads written to %s\n", where, (unsigned long long)n, what,
               c.by_tid.size(), out.c_str());
  return true;
}

// The scheduler's records about the traced process (tgid; 0: the threads
// the probes saw) as events of their threads.
void take_sched_ext(const std::vector<SchedExtRecord>& recs, std::uint32_t tgid, Collected& c) {
  std::vector<std::uint32_t> seen;
  for (const auto& [tid, evs] : c.by_tid) seen.push_back(tid);
  for (const SchedExtRecord& r : recs) {
    if (tgid ? r.tgid != tgid : !std::binary_search(seen.begin(), seen.end(), r.tid)) continue;
    c.by_tid[r.tid].push_back(sched_ext_event(r));
    if (r.worker < 4096) c.worker_of.emplace(r.tid, int(r.worker));
    c.first_ns = std::min<std::uint64_t>(c.first_ns, r.ns);
    c.last_ns = std::max<std::uint64_t>(c.last_ns, r.ns);
  }
}

// Without bpftrace: the scheduler's decisions only, about process `pid` or
// the command, which this starts, until it ends (or SIGINT/SIGTERM).
int record_sched_ext_only(const char* where, int pid, const std::vector<std::string>& cmd, const std::string& out,
                          SchedExtEvents& scx) {
  std::fprintf(stderr, "%s: bpftrace is not installed: recording the sched_ext scheduler's decisions only\n", where);
  std::vector<SchedExtRecord> recs;
  const std::uint64_t start_ns = monotonic_ns();
  pid_t child = 0;
  if (pid <= 0) {
    child = fork();
    if (child == 0) {
      std::vector<char*> argv;
      for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "%s: %s: %s\n", where, cmd[0].c_str(), std::strerror(errno));
      _exit(127);
    }
    if (child < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", where, std::strerror(errno));
      return 1;
    }
    pid = child;
  }
  struct sigaction sa {};
  sa.sa_handler = &on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int status = 0;
  bool forwarded = false;
  for (;;) {
    scx.drain(&recs);
    if (child ? waitpid(child, &status, WNOHANG) == child : kill(pid, 0) != 0) break;
    if (g_stop && !child) break;
    if (g_stop && !forwarded) kill(child, SIGINT), forwarded = true;
    usleep(20000);
  }
  scx.drain(&recs);
  Collected c;
  take_sched_ext(recs, std::uint32_t(pid), c);
  if (!write_and_report(where, out, pid, start_ns, c, "sched_ext events")) return 1;
  if (child && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    std::fprintf(stderr, "%s: %s exited with status %d\n", where, cmd[0].c_str(),
                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

}  // namespace

// Whether `path` holds parkway's USDT notes: an ELF .note.stapsdt names
// the provider, "parkway", beside the section's "stapsdt" owner.
bool has_parkway_probes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return bytes.find(std::string("stapsdt\0", 8)) != std::string::npos &&
         bytes.find(std::string("parkway\0spawn\0", 14)) != std::string::npos;
}

// A command started by `record`, held before its exec until bpftrace has
// attached its probes (record_main, "held").
struct HeldCommand {
  pid_t pid = -1;
  int go = -1;          // write end of the pipe the child waits on
  std::string dir, fifo;  // bpftrace's BEGIN reads the FIFO: attached
  int status = 0;
  bool ended = false, interrupted = false;

  bool start(const char* where, const std::string& exe, const std::vector<std::string>& cmd) {
    char d[] = "/tmp/parkway-record-held.XXXXXX";
    if (!mkdtemp(d)) {
      std::fprintf(stderr, "%s: cannot make a temporary directory: %s\n", where, std::strerror(errno));
      return false;
    }
    dir = d;
    fifo = dir + "/attached";
    if (mkfifo(fifo.c_str(), 0600) != 0) {
      std::fprintf(stderr, "%s: mkfifo %s: %s\n", where, fifo.c_str(), std::strerror(errno));
      return false;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "%s: pipe: %s\n", where, std::strerror(errno));
      return false;
    }
    pid = fork();
    if (pid == 0) {
      close(p[1]);
      char b;
      if (read(p[0], &b, 1) != 1) _exit(127);  // `record` gave up: never run the command
      std::vector<char*> argv;
      for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "%s: %s: %s\n", where, cmd[0].c_str(), std::strerror(errno));
      _exit(127);
    }
    close(p[0]);
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", where, std::strerror(errno));
      close(p[1]);
      return false;
    }
    go = p[1];
    return true;
  }

  // Waits (at most 60 s) until bpftrace's BEGIN opens the FIFO, then lets
  // the command run. False if bpftrace ended first or took too long.
  bool release_when_attached(const char* where, pid_t bt) {
    for (int i = 0; i < 6000; ++i) {
      const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO until a reader
      if (fd >= 0) {
        close(fd);  // its cat() reads EOF and goes on
        const char b = 1;
        const bool ok = write(go, &b, 1) == 1;
        close(go);
        go = -1;
        return ok;
      }
      int st;
      if (waitpid(bt, &st, WNOHANG) == bt) {
        std::fprintf(stderr, "%s: bpftrace ended (status %d) before it attached; the command was not run\n", where,
                     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return false;
      }
      usleep(10000);
    }
    std::fprintf(stderr, "%s: bpftrace did not attach within 60 s; the command was not run\n", where);
    return false;
  }

  ~HeldCommand() {
    if (go >= 0) close(go);  // a command never released exits unrun
    if (pid > 0 && !ended) waitpid(pid, &status, 0);
    if (!fifo.empty()) unlink(fifo.c_str());
    if (!dir.empty()) rmdir(dir.c_str());
  }
};

int record_main(const char* where, int pid, const std::vector<std::string>& cmd, const std::string& out) {
  // The sched_ext scheduler's decisions, when it is loaded (root): its
  // records from before the recording are dropped.
  if (!writable(where, out)) return 1;
  SchedExtEvents scx;
  std::string scx_why;
  const bool with_scx = geteuid() == 0 && scx.open(&scx_why);
  std::vector<SchedExtRecord> scx_recs;
  if (with_scx) scx.drain(&scx_recs), scx_recs.clear();
  const std::string bpftrace = which("bpftrace");
  if (bpftrace.empty() && with_scx) return record_sched_ext_only(where, pid, cmd, out, scx);
  if (bpftrace.empty()) {
    std::fprintf(stderr, "%s: bpftrace is not installed (apt-get install bpftrace); PARKWAY_TRACE=FILE in the "
                         "program's environment needs nothing\n", where);
    return 3;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "%s: attaching to USDT probes needs root; PARKWAY_TRACE=FILE in the program's "
                         "environment does not\n", where);
    return 3;
  }
  if (access("/sys/kernel/tracing/uprobe_events", F_OK) != 0) {
    std::fprintf(stderr, "%s: tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)\n", where);
    return 3;
  }
  std::string target;
  std::string exe;  // the command's program (pid <= 0)
  if (pid > 0) {
    if (kill(pid, 0) != 0) {
      std::fprintf(stderr, "%s: no process %d\n", where, pid);
      return 1;
    }
    target = probe_target_of_pid(pid);
  } else {
    exe = which(cmd[0]);
    if (exe.empty()) {
      std::fprintf(stderr, "%s: %s: command not found\n", where, cmd[0].c_str());
      return 1;
    }
    target = probe_target_of_cmd(exe);
  }
  if (target.empty()) {
    std::fprintf(stderr, "%s: cannot find the file with parkway's probes\n", where);
    return 1;
  }
  if (!has_parkway_probes(target)) {
    std::fprintf(stderr, "%s: %s has no parkway USDT probes (it neither links parkway statically nor maps "
                         "libparkway.so)\n", where, target.c_str());
    return 1;
  }
  // A command whose probes are in a library (libparkway.so) is started by
  // us, held before its exec until bpftrace has attached: bpftrace -c
  // cannot find probes in a library its child has not mapped yet ("Error
  // finding location for probe"). The library's probes are attached by
  // path, for every process, and filtered to the command's pid, which
  // stays across the exec. bpftrace runs BEGIN once every probe is
  // attached; its cat() of a FIFO returns when we open the other end.
  const bool held = pid <= 0 && target != exe;
  HeldCommand cmd_child;
  if (held && !cmd_child.start(where, exe, cmd)) return 1;
  const std::string filter = pid > 0 ? "pid == " + std::to_string(pid)
                             : held  ? "pid == " + std::to_string(cmd_child.pid)
                                     : "pid == cpid";
  std::string program = bpftrace_program(target, filter, pid <= 0 && !held);
  if (held)
    program = "BEGIN { cat(\"" + cmd_child.fifo + "\"); printf(\"0 %d pid\\n\", " + std::to_string(cmd_child.pid) +
              "); }\n" + program;
  std::vector<std::string> args{bpftrace, "-q", "-e", program};
  if (pid > 0) {
    args.push_back("-p");
    args.push_back(std::to_string(pid));
  } else if (!held) {
    std::string c;
    for (const std::string& a : cmd) {
      if (a.find_first_of(" \t'\"\\") != std::string::npos) {
        std::fprintf(stderr, "%s: bpftrace -c splits the command at spaces: '%s' cannot be passed\n", where,
                     a.c_str());
        return 2;
      }
      c += (c.empty() ? "" : " ") + a;
    }
    args.push_back("-c");
    args.push_back(exe + c.substr(cmd[0].size()));
  }
  // bpftrace writes its lines to a file of its own (-o): the command it
  // starts keeps our stdout.
  char tmp[] = "/tmp/parkway-record.XXXXXX";
  int tfd = mkstemp(tmp);
  if (tfd < 0) {
    std::fprintf(stderr, "%s: cannot make a temporary file: %s\n", where, std::strerror(errno));
    return 1;
  }
  close(tfd);
  args.insert(args.begin() + 1, {"-o", tmp});
  const std::uint64_t start_ns = monotonic_ns();
  pid_t child = fork();
  if (child == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (child < 0) {
    std::fprintf(stderr, "%s: fork: %s\n", where, std::strerror(errno));
    unlink(tmp);
    return 1;
  }
  if (held && !cmd_child.release_when_attached(where, child)) {
    kill(child, SIGINT);
    waitpid(child, nullptr, 0);
    unlink(tmp);
    return 1;
  }
  // SIGINT or SIGTERM here, or the end of process `pid` (or of the held
  // command), stops bpftrace with SIGINT (it prints what it has and
  // exits); the file is written from that.
  struct sigaction sa {};
  sa.sa_handler = &on_stop_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (pid > 0) {
    // Name the program; the probes' file too when it is a library.
    char exe[4096] = "";
    const ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    if (n > 0 && target != exe)
      std::fprintf(stderr, "%s: recording process %d (%s, probes in %s); Ctrl-C to stop\n", where, pid, exe,
                   target.c_str());
    else
      std::fprintf(stderr, "%s: recording process %d (%s); Ctrl-C to stop\n", where, pid, target.c_str());
  }
  int status = 0;
  bool stopped = false;
  for (;;) {
    pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child || (r < 0 && errno != EINTR)) break;
    if (held && !cmd_child.ended && waitpid(cmd_child.pid, &cmd_child.status, WNOHANG) == cmd_child.pid)
      cmd_child.ended = true;
    if (held && g_stop && !cmd_child.ended && !cmd_child.interrupted) {
      kill(cmd_child.pid, SIGINT);  // as a terminal's Ctrl-C would; bpftrace stops when it has ended
      cmd_child.interrupted = true;
    }
    if (!stopped && ((g_stop && !held) || (pid > 0 && kill(pid, 0) != 0) || (held && cmd_child.ended))) {
      kill(child, SIGINT);
      stopped = true;
    }
    if (with_scx) scx.drain(&scx_recs);
    usleep(50000);
  }
  if (with_scx) scx.drain(&scx_recs);
  Collected c;
  c.blocked_bits = blocked_state_bits();
  if (FILE* in = std::fopen(tmp, "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, in)) take_line(line, c);
    std::fclose(in);
  }
  unlink(tmp);
  take_sched_ext(scx_recs, pid > 0 ? std::uint32_t(pid) : 0, c);
  if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && c.by_tid.empty())) {
    std::fprintf(stderr, "%s: bpftrace failed (exit %d) and recorded nothing\n", where,
                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 1;
  }
  if (!write_and_report(where, out, pid > 0 ? pid : c.pid, start_ns, c, "events")) return 1;
  if (held && !(WIFEXITED(cmd_child.status) && WEXITSTATUS(cmd_child.status) == 0))
    std::fprintf(stderr, "%s: %s exited with status %d\n", where, cmd[0].c_str(),
                 WIFEXITED(cmd_child.status) ? WEXITSTATUS(cmd_child.status) : 128 + WTERMSIG(cmd_child.status));
  return 0;
}

}  // namespace parkway::tracetool
