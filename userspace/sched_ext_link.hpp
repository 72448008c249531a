// sched_ext_link.hpp -- tells the parkway sched_ext scheduler
// (bpf/scx_parkway.bpf.c), when it is loaded, which threads are this
// runtime's workers and what each is doing.
//
// Protocol (bpf/parkway_sched.h, docs/design/sched-ext.md):
//  - construction, with plain reads and no bpf(2) call: sched_ext must run
//    the "parkway" ops, this process must be in the root pid namespace (the
//    scheduler sees global ids), may open the pinned registration program
//    (faccessat) and must not run under a seccomp filter (unless
//    PARKWAY_SCHED_EXT=on says the filter allows bpf(2)). Only then
//    BPF_OBJ_GET on the program, checked to be ours. Otherwise: inactive,
//    every call below is a no-op, and status() says why.
//  - register_worker (on the worker thread): one bpf(2) call runs the
//    program, which registers the calling thread (the kernel's `current`)
//    with the address of its state word in this object. The scheduler caps
//    the workers per program; a refusal is kept for status().
//  - publish: a relaxed store into the worker's own cache line of this
//    process's memory; the scheduler reads it while that worker is on a
//    CPU. No syscall, no fence: a stale read costs one scheduling decision.
//  - unregister_worker (on the worker thread): the program again; thread
//    exit does the same in the scheduler.
// No libbpf: raw bpf(2), so the runtime has no new dependency.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "../bpf/parkway_sched.h"
#include "parkway/stats.hpp"

namespace parkway::detail {

enum class WorkerState : std::uint32_t { Off = 0, Busy = 1, Searching = 2, Parked = 3 };

static_assert(static_cast<std::uint32_t>(WorkerState::Busy) == PARKWAY_W_BUSY &&
              static_cast<std::uint32_t>(WorkerState::Searching) == PARKWAY_W_SEARCHING &&
              static_cast<std::uint32_t>(WorkerState::Parked) == PARKWAY_W_PARKED,
              "WorkerState must match parkway_worker_state");

// True when the sched_ext directory `sysfs_dir` (/sys/kernel/sched_ext)
// says a scheduler is enabled in switch-all mode (`state` "enabled",
// `switch_all` "1"): every fair-class thread runs under it
// (in_fair_class, kernel_slice.hpp). False when it is absent.
bool sched_ext_runs_fair_tasks(const char* sysfs_dir) noexcept;

class SchedExtLink {
 public:
  // Looks for the scheduler (see above); inactive if absent. Never throws
  // for absence. PARKWAY_SCHED_EXT=0 (or off, false, no) keeps it inactive;
  // =1 (or on, true, yes) lets it register under a seccomp filter.
  explicit SchedExtLink(unsigned nworkers);
  ~SchedExtLink();
  SchedExtLink(const SchedExtLink&) = delete;
  SchedExtLink& operator=(const SchedExtLink&) = delete;

  // True in a child pid namespace (NSpid in /proc/self/status lists more
  // than one pid), where the link stays inactive.
  static bool in_child_pid_namespace();
  // True when a seccomp filter (or strict mode) applies to this thread
  // (Seccomp in /proc/self/status is not 0).
  static bool under_seccomp();

  bool active() const noexcept { return prog_fd_ >= 0; }

  // Called on the worker thread when it starts / before it exits.
  void register_worker(unsigned index) noexcept;
  void unregister_worker(unsigned index) noexcept;

  // A relaxed store into the worker's state word; skipped when unchanged,
  // so the line is only dirtied on a transition.
  void publish(unsigned index, WorkerState s) noexcept {
    if (!words_ || index >= nworkers_) return;
    auto v = static_cast<std::uint32_t>(s);
    std::atomic<std::uint32_t>& st = words_[index].state;
    if (st.load(std::memory_order_relaxed) != v) st.store(v, std::memory_order_relaxed);
  }

  // How many workers the scheduler knows, and why not the others.
  SchedExtStatus status() const noexcept;

 private:
  // One cache line per worker: the scheduler reads `state`, the worker
  // writes it; `registered` is this process's own bookkeeping.
  struct alignas(64) Word {
    std::atomic<std::uint32_t> state{PARKWAY_W_OFF};
    std::atomic<bool> registered{false};
  };

  int prog_fd_ = -1;  // the pinned pw_register program
  unsigned nworkers_ = 0;
  std::unique_ptr<Word[]> words_;
  const char* inactive_ = nullptr;                   // why the link is inactive
  std::atomic<const char*> refused_{nullptr};        // why the scheduler refused a worker, last seen
  std::atomic<unsigned> registered_{0};
};

}  // namespace parkway::detail
