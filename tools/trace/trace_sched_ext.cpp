// trace_sched_ext.cpp -- SchedExtEvents: the ring buffer's consumer side
// (the kernel's layout, include/uapi/linux/bpf.h: a consumer position page,
// a producer position page, then the data mapped twice; each record has an
// 8-byte header whose length word carries a busy and a discard bit).
#include "trace_sched_ext.hpp"

#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../../bpf/parkway_sched.h"

namespace parkway::tracetool {

namespace {

long bpf(int cmd, union bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

}  // namespace

bool SchedExtEvents::open(std::string* why) {
  union bpf_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.pathname = reinterpret_cast<std::uint64_t>(PARKWAY_PIN_EVENTS);
  fd_ = int(bpf(BPF_OBJ_GET, &attr));
  if (fd_ < 0) {
    *why = std::string(PARKWAY_PIN_EVENTS) + ": " + std::strerror(errno) +
           (errno == ENOENT ? " (the scheduler is not loaded: parkway sched load)" : "");
    return false;
  }
  bpf_map_info info;
  std::memset(&info, 0, sizeof info);
  std::memset(&attr, 0, sizeof attr);
  attr.info.bpf_fd = std::uint32_t(fd_);
  attr.info.info_len = sizeof info;
  attr.info.info = reinterpret_cast<std::uint64_t>(&info);
  if (bpf(BPF_OBJ_GET_INFO_BY_FD, &attr) != 0 || info.type != BPF_MAP_TYPE_RINGBUF) {
    *why = std::string(PARKWAY_PIN_EVENTS) + " is not a ring buffer";
    return false;
  }
  size_ = info.max_entries;
  page_ = std::size_t(sysconf(_SC_PAGESIZE));
  consumer_ = mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  producer_ = mmap(nullptr, page_ + 2 * size_, PROT_READ, MAP_SHARED, fd_, off_t(page_));
  if (consumer_ == MAP_FAILED || producer_ == MAP_FAILED) {
    *why = std::string("cannot map ") + PARKWAY_PIN_EVENTS + ": " + std::strerror(errno);
    if (consumer_ != MAP_FAILED) munmap(consumer_, page_);
    if (producer_ != MAP_FAILED) munmap(producer_, page_ + 2 * size_);
    consumer_ = producer_ = nullptr;
    return false;
  }
  return true;
}

SchedExtEvents::~SchedExtEvents() {
  if (consumer_) munmap(consumer_, page_);
  if (producer_) munmap(producer_, page_ + 2 * size_);
  if (fd_ >= 0) close(fd_);
}

void SchedExtEvents::drain(std::vector<SchedExtRecord>* out) {
  if (!consumer_) return;
  auto* cons_pos = static_cast<unsigned long*>(consumer_);
  const auto* prod_pos = static_cast<const unsigned long*>(producer_);
  const auto* data = static_cast<const unsigned char*>(producer_) + page_;
  unsigned long cons = __atomic_load_n(cons_pos, __ATOMIC_ACQUIRE);
  // Acquire: pairs with the kernel's release of the producer position and
  // of each record's length word (its busy bit cleared on submit).
  const unsigned long prod = __atomic_load_n(prod_pos, __ATOMIC_ACQUIRE);
  while (cons < prod) {
    const auto* hdr = reinterpret_cast<const std::uint32_t*>(data + (cons & (size_ - 1)));
    std::uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
    if (len & BPF_RINGBUF_BUSY_BIT) break;  // reserved, not yet submitted
    const bool discarded = len & BPF_RINGBUF_DISCARD_BIT;
    len &= ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
    if (!discarded && len >= sizeof(parkway_sched_event)) {
      parkway_sched_event e;
      std::memcpy(&e, reinterpret_cast<const unsigned char*>(hdr) + BPF_RINGBUF_HDR_SZ, sizeof e);
      out->push_back({e.ns, e.tgid, e.tid, e.kind, e.worker, e.cpu});
    }
    cons += (len + BPF_RINGBUF_HDR_SZ + 7) & ~7ul;
    // Release: the kernel may reuse the space once it sees the new position.
    __atomic_store_n(cons_pos, cons, __ATOMIC_RELEASE);
  }
}

trace_format::Event sched_ext_event(const SchedExtRecord& r) {
  trace_format::Event e{};
  e.ticks = r.ns;
  e.type = std::uint8_t(trace_format::EventType::kSchedExt);
  e.a8 = std::uint8_t(r.kind < 256 ? r.kind : 0);
  e.a16 = std::uint16_t(r.cpu);
  return e;
}

}  // namespace parkway::tracetool
