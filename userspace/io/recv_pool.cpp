// recv_pool.cpp -- registering, refilling and freeing a ring's pool of
// receive buffers (recv_pool.hpp).
#include "io/recv_pool.hpp"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>

namespace parkway::io::detail {

namespace {

void* map_anonymous(std::size_t bytes) noexcept {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

bool RecvPool::ensure(io_uring* ring, unsigned entries, unsigned bytes) noexcept {
  if (state_ != State::kUntried) return state_ == State::kReady;
  state_ = State::kUnavailable;
  // The ring's entries are page-aligned for the kernel; the buffers' pages
  // are touched only as the kernel fills them.
  ring_bytes_ = std::size_t(entries) * sizeof(io_uring_buf);
  mem_bytes_ = std::size_t(entries) * bytes;
  br_ = static_cast<io_uring_buf_ring*>(map_anonymous(ring_bytes_));
  mem_ = static_cast<std::byte*>(map_anonymous(mem_bytes_));
  int rc = -ENOMEM;
  if (br_ && mem_) {
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(br_);
    reg.ring_entries = entries;
    reg.bgid = kGroup;
    rc = io_uring_register_buf_ring(ring, &reg, 0);
  }
  if (rc < 0) {
    if (rc != -EINVAL)  // EINVAL: no provided-buffer rings here, as documented
      std::fprintf(stderr, "parkway: io_uring receive buffer pool unavailable (%s); receives allocate up front\n",
                   std::strerror(-rc));
    if (br_) munmap(br_, ring_bytes_);
    if (mem_) munmap(mem_, mem_bytes_);
    br_ = nullptr;
    mem_ = nullptr;
    return false;
  }
  entries_ = entries;
  bytes_ = bytes;
  io_uring_buf_ring_init(br_);
  const int mask = io_uring_buf_ring_mask(entries);
  for (unsigned i = 0; i < entries; ++i)
    io_uring_buf_ring_add(br_, mem_ + std::size_t(i) * bytes, bytes, static_cast<unsigned short>(i), mask, int(i));
  io_uring_buf_ring_advance(br_, int(entries));
  state_ = State::kReady;
  return true;
}

void RecvPool::give_back(unsigned bid) noexcept {
  io_uring_buf_ring_add(br_, mem_ + std::size_t(bid) * bytes_, bytes_, static_cast<unsigned short>(bid),
                        io_uring_buf_ring_mask(entries_), 0);
  io_uring_buf_ring_advance(br_, 1);
}

void RecvPool::destroy(io_uring* ring) noexcept {
  if (state_ != State::kReady) return;
  (void)io_uring_unregister_buf_ring(ring, kGroup);
  forget();
}

void RecvPool::forget() noexcept {
  if (state_ != State::kReady) return;
  munmap(br_, ring_bytes_);
  munmap(mem_, mem_bytes_);
  br_ = nullptr;
  mem_ = nullptr;
  state_ = State::kUntried;
}

}  // namespace parkway::io::detail
