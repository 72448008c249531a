// sched_ext_link.hpp -- publishes worker states to the parkway sched_ext
// scheduler (bpf/scx_parkway.bpf.c), when it is loaded.
//
// Protocol (bpf/parkway_sched.h, docs/design/sched-ext.md):
//  - construction: sched_ext must run the "parkway" ops (read from sysfs
//    first, so that without it no bpf(2) call is made) and this process
//    must be in the root pid namespace (the scheduler sees global ids);
//    then BPF_OBJ_GET on the pinned worker map (its directory names the
//    layout version), check it is ours, mmap it. Otherwise: inactive, and
//    every call below is a no-op.
//  - register_worker (on the worker thread): CAS a free slot's owner from 0
//    to our tgid (or from a dead process's tgid), write tid and index, then
//    one bpf(2) call adds tid -> slot to the pinned tids hash.
//  - publish: a relaxed store of the state into the worker's own cache
//    line; the scheduler reads it when it decides. No syscall, no fence:
//    a stale read only costs one scheduling decision.
//  - unregister_worker: state Off, tids entry deleted, owner released.
// No libbpf: raw bpf(2), so the runtime has no new dependency.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "../bpf/parkway_sched.h"

namespace parkway::detail {

enum class WorkerState : std::uint32_t { Off = 0, Busy = 1, Searching = 2, Parked = 3 };

static_assert(static_cast<std::uint32_t>(WorkerState::Busy) == PARKWAY_W_BUSY &&
              static_cast<std::uint32_t>(WorkerState::Searching) == PARKWAY_W_SEARCHING &&
              static_cast<std::uint32_t>(WorkerState::Parked) == PARKWAY_W_PARKED,
              "WorkerState must match parkway_worker_state");
static_assert(sizeof(parkway_slot) == 64, "one cache line per worker slot");

class SchedExtLink {
 public:
  // Tries the pin path; inactive if absent. Never throws for absence.
  // PARKWAY_SCHED_EXT=0 (or off, false, no) keeps it inactive.
  explicit SchedExtLink(unsigned nworkers);

  // True in a child pid namespace (NSpid in /proc/self/status lists more
  // than one pid), where the link stays inactive.
  static bool in_child_pid_namespace();
  ~SchedExtLink();
  SchedExtLink(const SchedExtLink&) = delete;
  SchedExtLink& operator=(const SchedExtLink&) = delete;

  bool active() const noexcept { return slots_ != nullptr; }

  // Called on the worker thread when it starts / before it exits.
  void register_worker(unsigned index) noexcept;
  void unregister_worker(unsigned index) noexcept;

  // A relaxed store into the worker's slot; skipped when unchanged, so the
  // line is only dirtied on a transition.
  void publish(unsigned index, WorkerState s) noexcept {
    if (!slots_ || index >= nworkers_) return;
    int k = slot_of_[index];
    if (k < 0) return;
    std::atomic_ref<std::uint32_t> st(slots_[k].state);
    auto v = static_cast<std::uint32_t>(s);
    if (st.load(std::memory_order_relaxed) != v) st.store(v, std::memory_order_relaxed);
  }

 private:
  void release(unsigned index) noexcept;

  parkway_slot* slots_ = nullptr;  // the mmapped map, PARKWAY_MAX_SLOTS slots
  int tids_fd_ = -1;               // the pinned tid -> slot hash
  unsigned nworkers_ = 0;
  std::unique_ptr<int[]> slot_of_;           // worker index -> slot, -1 = none
  std::unique_ptr<std::uint32_t[]> tid_of_;  // worker index -> its tid
};

}  // namespace parkway::detail
