// sched_ext_link.cpp -- see sched_ext_link.hpp.
#include "sched_ext_link.hpp"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "env_choice.hpp"

namespace parkway::detail {
namespace {

long sys_bpf(int cmd, bpf_attr* attr) noexcept { return ::syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

int obj_get(const char* path) noexcept {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.pathname = reinterpret_cast<std::uint64_t>(path);
  return static_cast<int>(sys_bpf(BPF_OBJ_GET, &a));
}

// The pin must be the registration program of this layout: a syscall
// program named pw_register.
bool is_register_prog(int fd) noexcept {
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.info.bpf_fd = static_cast<std::uint32_t>(fd);
  a.info.info_len = sizeof(info);
  a.info.info = reinterpret_cast<std::uint64_t>(&info);
  return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a) == 0 && info.type == BPF_PROG_TYPE_SYSCALL &&
         std::strncmp(info.name, "pw_register", sizeof(info.name)) == 0;
}

// Runs the program on the calling thread; the kernel fills r.result.
long run_register(int fd, parkway_register& r) noexcept {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.test.prog_fd = static_cast<std::uint32_t>(fd);
  a.test.ctx_in = reinterpret_cast<std::uint64_t>(&r);
  a.test.ctx_size_in = sizeof(r);
  return sys_bpf(BPF_PROG_TEST_RUN, &a);
}

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// The value of "Key:" in /proc/self/status, "" if absent.
std::string status_field(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return line.substr(n + 1);
  return {};
}

// Pins survive a loader killed with -9: only trust them while sched_ext
// really runs our ops.
bool our_scheduler_enabled() {
  return read_first_line("/sys/kernel/sched_ext/state") == "enabled" &&
         read_first_line("/sys/kernel/sched_ext/root/ops").rfind(PARKWAY_OPS_NAME, 0) == 0;
}

const char* refusal(int result) noexcept {
  switch (result) {
    case -E2BIG: return "the scheduler's per-program worker cap was reached (parkway sched load --max-workers)";
    case -EINVAL: return "the scheduler refused the registration as invalid";
    case -EFAULT: return "the scheduler could not read the worker's state word";
    default: return "the scheduler could not record the worker (out of memory or program records)";
  }
}

}  // namespace

// The scheduler sees global pids and tids; inside a child pid namespace
// (a container) the program's own ids differ from them. Such a process
// stays out: /proc/self/status lists one pid per namespace level in NSpid.
bool SchedExtLink::in_child_pid_namespace() {
  std::string v = status_field("NSpid");
  std::size_t fields = 0;
  bool in_field = false;
  for (char c : v) {
    bool digit = c >= '0' && c <= '9';
    if (digit && !in_field) ++fields;
    in_field = digit;
  }
  return fields > 1;  // no NSpid line (kernel < 4.1): assume the root namespace
}

bool SchedExtLink::under_seccomp() {
  std::string v = status_field("Seccomp");
  for (char c : v)
    if (c >= '1' && c <= '9') return true;
  return false;
}

SchedExtLink::SchedExtLink(unsigned nworkers) : nworkers_(nworkers) {
  // The first seven turn it off, the others on even under seccomp.
  const int env = env_choice("PARKWAY_SCHED_EXT",
                             {"0", "off", "false", "no", "OFF", "FALSE", "NO", "1", "on", "true", "yes", "ON", "TRUE", "YES"},
                             "workers register with a loaded parkway scheduler unless a seccomp filter applies");
  const bool forced = env >= 7;
  // Every check before BPF_OBJ_GET is a plain read: a program that cannot
  // register makes no bpf(2) call at all, so a service whose seccomp
  // filter kills on bpf(2) (systemd's SystemCallFilter= default action)
  // lives on whether the scheduler is loaded or not.
  if (env >= 0 && env < 7) {
    inactive_ = "PARKWAY_SCHED_EXT turns it off";
  } else if (!our_scheduler_enabled()) {
    inactive_ = "the parkway scheduler is not loaded";
  } else if (in_child_pid_namespace()) {
    inactive_ = "the process runs in a child pid namespace, where the scheduler's ids do not apply";
  } else if (::faccessat(AT_FDCWD, PARKWAY_PIN_REGISTER, R_OK | W_OK, AT_EACCESS) != 0) {
    inactive_ = "no access to the scheduler's registration program " PARKWAY_PIN_REGISTER;
  } else if (under_seccomp() && !forced) {
    inactive_ = "a seccomp filter applies, which may forbid bpf(2); PARKWAY_SCHED_EXT=on says it allows it";
  }
  if (inactive_) return;
  int fd = obj_get(PARKWAY_PIN_REGISTER);
  if (fd < 0 || !is_register_prog(fd)) {
    if (fd >= 0) ::close(fd);
    inactive_ = "the scheduler's registration program could not be opened";
    return;
  }
  words_ = std::make_unique<Word[]>(nworkers);
  prog_fd_ = fd;
}

SchedExtLink::~SchedExtLink() {
  // The workers have exited (their registrations with them) before the
  // runtime destroys the link, so no registered thread's word goes away.
  if (prog_fd_ >= 0) ::close(prog_fd_);
}

void SchedExtLink::register_worker(unsigned index) noexcept {
  if (prog_fd_ < 0 || index >= nworkers_ || words_[index].registered.load(std::memory_order_relaxed)) return;
  parkway_register r{};
  r.op = PARKWAY_OP_REGISTER;
  r.index = index;
  r.state_addr = reinterpret_cast<std::uint64_t>(&words_[index].state);
  words_[index].state.store(PARKWAY_W_OFF, std::memory_order_relaxed);
  if (run_register(prog_fd_, r) != 0) {
    refused_.store("bpf(2) refused to run the scheduler's registration program", std::memory_order_relaxed);
    return;
  }
  if (r.result != 0) {
    refused_.store(refusal(r.result), std::memory_order_relaxed);
    return;
  }
  words_[index].registered.store(true, std::memory_order_relaxed);
  registered_.fetch_add(1, std::memory_order_relaxed);
}

void SchedExtLink::unregister_worker(unsigned index) noexcept {
  if (prog_fd_ < 0 || index >= nworkers_ || !words_[index].registered.load(std::memory_order_relaxed)) return;
  words_[index].state.store(PARKWAY_W_OFF, std::memory_order_relaxed);
  parkway_register r{};
  r.op = PARKWAY_OP_UNREGISTER;
  r.index = index;
  run_register(prog_fd_, r);  // failing, the thread's exit drops it in the scheduler
  words_[index].registered.store(false, std::memory_order_relaxed);
  registered_.fetch_sub(1, std::memory_order_relaxed);
}

SchedExtStatus SchedExtLink::status() const noexcept {
  SchedExtStatus s;
  s.workers = nworkers_;
  s.registered = registered_.load(std::memory_order_relaxed);
  if (inactive_) {
    s.reason = inactive_;
  } else if (const char* why = refused_.load(std::memory_order_relaxed); why && s.registered < s.workers) {
    s.reason = why;
  }
  return s;
}

bool sched_ext_runs_fair_tasks(const char* sysfs_dir) noexcept {
  try {
    const std::string dir(sysfs_dir);
    return read_first_line((dir + "/state").c_str()) == "enabled" &&
           read_first_line((dir + "/switch_all").c_str()) == "1";
  } catch (...) {
    return false;
  }
}

}  // namespace parkway::detail
