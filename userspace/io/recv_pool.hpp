// recv_pool.hpp -- one ring's pool of receive buffers that the kernel
// picks from when bytes arrive (an io_uring provided-buffer ring), for the
// receives that own their result (io::recv_owned; docs/design/io.md,
// "Receives that take memory when bytes arrive").
//
// A receive armed with IOSQE_BUFFER_SELECT holds no memory while it waits;
// the kernel takes a buffer from this pool only when it has bytes to copy.
// The ring's owner copies them out into a block of the caller's size when
// it reaps the completion and gives the buffer back at once, so a buffer
// is out of the pool only between the kernel's copy and that reap: the
// pool's size bounds the completions that may wait to be reaped, not the
// receives in flight. A receive that finds the pool empty fails with
// ENOBUFS, and the reaper submits it again (ring.cpp).
//
// Only the owning worker's thread touches the pool, like the ring.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>

namespace parkway::io::detail {

class RecvPool {
 public:
  static constexpr std::uint16_t kGroup = 0;  // the ring's only buffer group

  RecvPool() = default;
  RecvPool(const RecvPool&) = delete;
  RecvPool& operator=(const RecvPool&) = delete;

  // Registers `entries` buffers (a power of two) of `bytes` each with the
  // ring, the first time it is asked; true once they are registered.
  // False if the kernel has no provided-buffer rings (Linux < 5.19) or
  // memory ran out: the receives then take their block before they wait.
  bool ensure(io_uring* ring, unsigned entries, unsigned bytes) noexcept;
  const std::byte* buffer(unsigned bid) const noexcept { return mem_ + std::size_t(bid) * bytes_; }
  unsigned buffer_bytes() const noexcept { return bytes_; }
  // Hands buffer bid back to the kernel.
  void give_back(unsigned bid) noexcept;
  // Unregisters the pool and frees its memory (the ring's destructor).
  void destroy(io_uring* ring) noexcept;
  // destroy() in a forked child: the registration is the parent's (the
  // ring is shared), so only this process's mappings go.
  void forget() noexcept;

 private:
  enum class State : std::uint8_t { kUntried, kReady, kUnavailable };
  State state_ = State::kUntried;
  io_uring_buf_ring* br_ = nullptr;
  std::byte* mem_ = nullptr;
  std::size_t ring_bytes_ = 0, mem_bytes_ = 0;
  unsigned entries_ = 0, bytes_ = 0;
};

}  // namespace parkway::io::detail
