// sched_ext_link.cpp -- see sched_ext_link.hpp.
#include "sched_ext_link.hpp"

#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace parkway::detail {
namespace {

constexpr std::size_t kMapBytes = sizeof(parkway_slot) * PARKWAY_MAX_SLOTS;

long sys_bpf(int cmd, bpf_attr* attr) noexcept {
  return ::syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int obj_get(const char* path) noexcept {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.pathname = reinterpret_cast<std::uint64_t>(path);
  return static_cast<int>(sys_bpf(BPF_OBJ_GET, &a));
}

bool map_info(int fd, bpf_map_info* info) noexcept {
  std::memset(info, 0, sizeof(*info));
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.info.bpf_fd = static_cast<std::uint32_t>(fd);
  a.info.info_len = sizeof(*info);
  a.info.info = reinterpret_cast<std::uint64_t>(info);
  return sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a) == 0;
}

// The pinned maps must be the layout this build knows: the worker array...
bool is_worker_map(int fd) noexcept {
  bpf_map_info info;
  return map_info(fd, &info) && info.type == BPF_MAP_TYPE_ARRAY && info.value_size == sizeof(parkway_slot) &&
         info.max_entries == PARKWAY_MAX_SLOTS && (info.map_flags & BPF_F_MMAPABLE);
}

// ... and the tids hash: tid (u32) -> slot (u32).
bool is_tids_map(int fd) noexcept {
  bpf_map_info info;
  return map_info(fd, &info) && info.type == BPF_MAP_TYPE_HASH && info.key_size == sizeof(std::uint32_t) &&
         info.value_size == sizeof(std::uint32_t);
}

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// Pins survive a loader killed with -9: only trust them while sched_ext
// really runs our ops.
bool our_scheduler_enabled() {
  return read_first_line("/sys/kernel/sched_ext/state") == "enabled" &&
         read_first_line("/sys/kernel/sched_ext/root/ops").rfind(PARKWAY_OPS_NAME, 0) == 0;
}

// PARKWAY_SCHED_EXT=0 (or off, false, no) keeps the runtime away from a
// loaded scheduler.
bool disabled_by_env() noexcept {
  const char* e = std::getenv("PARKWAY_SCHED_EXT");
  if (!e) return false;
  for (const char* off : {"0", "off", "false", "no", "OFF", "FALSE", "NO"})
    if (std::strcmp(e, off) == 0) return true;
  return false;
}

bool process_dead(std::uint32_t pid) noexcept {
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

long tids_update(int fd, std::uint32_t tid, std::uint32_t slot, bool remove) noexcept {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.map_fd = static_cast<std::uint32_t>(fd);
  a.key = reinterpret_cast<std::uint64_t>(&tid);
  if (remove) return sys_bpf(BPF_MAP_DELETE_ELEM, &a);
  a.value = reinterpret_cast<std::uint64_t>(&slot);
  a.flags = BPF_ANY;
  return sys_bpf(BPF_MAP_UPDATE_ELEM, &a);
}

}  // namespace

// The scheduler sees global pids and tids; inside a child pid namespace
// (a container) getpid()/gettid() give others, so the program would never
// be recognised, and kill(pid, 0) of another namespace's live program
// answers ESRCH, which would hand its slot to us. Such a process stays
// out: /proc/self/status lists one pid per namespace level in NSpid.
bool SchedExtLink::in_child_pid_namespace() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::size_t fields = 0;
    bool in_field = false;
    for (char c : line.substr(6)) {
      bool digit = c >= '0' && c <= '9';
      if (digit && !in_field) ++fields;
      in_field = digit;
    }
    return fields > 1;
  }
  return false;  // no NSpid line (kernel < 4.1): no way to tell; assume the root namespace
}

SchedExtLink::SchedExtLink(unsigned nworkers) : nworkers_(nworkers) {
  if (disabled_by_env()) return;
  // sysfs first, with plain reads: without our scheduler no bpf(2) call is
  // made at all (a service under a seccomp filter such as systemd's
  // @system-service, which lacks bpf, would be killed by one).
  if (!our_scheduler_enabled() || in_child_pid_namespace()) return;
  int fd = obj_get(PARKWAY_PIN_WORKERS);
  if (fd < 0) return;  // not pinned (or not permitted): run as if absent
  bool ok = is_worker_map(fd);
  void* p = ok ? ::mmap(nullptr, kMapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);  // the mapping keeps the map alive
  if (p == MAP_FAILED) return;
  tids_fd_ = obj_get(PARKWAY_PIN_TIDS);
  if (tids_fd_ >= 0 && !is_tids_map(tids_fd_)) {
    ::close(tids_fd_);
    tids_fd_ = -1;
  }
  if (tids_fd_ < 0) {
    ::munmap(p, kMapBytes);
    return;
  }
  slot_of_ = std::make_unique<int[]>(nworkers);
  tid_of_ = std::make_unique<std::uint32_t[]>(nworkers);
  for (unsigned i = 0; i < nworkers; ++i) slot_of_[i] = -1;
  slots_ = static_cast<parkway_slot*>(p);
}

SchedExtLink::~SchedExtLink() {
  if (!slots_) return;
  for (unsigned i = 0; i < nworkers_; ++i) release(i);  // workers that did not unregister
  ::munmap(slots_, kMapBytes);
  ::close(tids_fd_);
}

void SchedExtLink::register_worker(unsigned index) noexcept {
  if (!slots_ || index >= nworkers_ || slot_of_[index] >= 0) return;
  const auto pid = static_cast<std::uint32_t>(::getpid());
  const auto tid = static_cast<std::uint32_t>(::gettid());
  const unsigned start = (pid * 31u + index) % PARKWAY_MAX_SLOTS;
  for (unsigned i = 0; i < PARKWAY_MAX_SLOTS; ++i) {
    const unsigned k = (start + i) % PARKWAY_MAX_SLOTS;
    parkway_slot& s = slots_[k];
    std::atomic_ref<std::uint32_t> owner(s.owner);
    std::uint32_t cur = owner.load(std::memory_order_relaxed);
    if (cur != 0 && (cur == pid || !process_dead(cur))) continue;
    // acq_rel: pairs with the release in release() of the previous owner,
    // so our writes below are not overtaken by its late ones.
    if (!owner.compare_exchange_strong(cur, pid, std::memory_order_acq_rel)) continue;
    std::atomic_ref<std::uint32_t>(s.state).store(PARKWAY_W_OFF, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(s.tag).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(s.index).store(index, std::memory_order_relaxed);
    std::atomic_ref<__u64>(s.claims).fetch_add(1, std::memory_order_relaxed);
    // release: orders the fields above before tid for another process's
    // reader (`parkway sched status`); the scheduler itself only trusts the
    // slot once the bpf(2) update below has made tid -> slot visible, and
    // the syscall orders these stores before that.
    std::atomic_ref<std::uint32_t>(s.tid).store(tid, std::memory_order_release);
    if (tids_update(tids_fd_, tid, k, false) != 0) {  // map full or gone: stay unknown
      std::atomic_ref<std::uint32_t>(s.tid).store(0, std::memory_order_relaxed);
      owner.store(0, std::memory_order_release);
      return;
    }
    slot_of_[index] = static_cast<int>(k);
    tid_of_[index] = tid;
    return;
  }
}

void SchedExtLink::unregister_worker(unsigned index) noexcept {
  if (slots_ && index < nworkers_) release(index);
}

void SchedExtLink::release(unsigned index) noexcept {
  int k = slot_of_[index];
  if (k < 0) return;
  slot_of_[index] = -1;
  parkway_slot& s = slots_[k];
  std::atomic_ref<std::uint32_t>(s.state).store(PARKWAY_W_OFF, std::memory_order_relaxed);
  tids_update(tids_fd_, tid_of_[index], 0, true);
  // The scheduler may have freed the slot already (thread exit); only free
  // it if it is still this thread's.
  if (std::atomic_ref<std::uint32_t>(s.tid).load(std::memory_order_relaxed) != tid_of_[index]) return;
  std::atomic_ref<std::uint32_t>(s.tid).store(0, std::memory_order_relaxed);
  std::uint32_t pid = static_cast<std::uint32_t>(::getpid());
  // release: pairs with the acq_rel CAS of the next claimer.
  std::atomic_ref<std::uint32_t>(s.owner).compare_exchange_strong(pid, 0, std::memory_order_release,
                                                                  std::memory_order_relaxed);
}

}  // namespace parkway::detail
