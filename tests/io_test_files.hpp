// io_test_files.hpp -- what the tests of files sent over sockets share
// (test_io_send_file.cpp, test_io_contract.cpp): a file of known bytes,
// a connected loopback pair, and a reader that checks the bytes.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "parkway/io.hpp"
#include "parkway/parkway.hpp"

namespace pwtest {

// The byte at offset i of every test file.
inline std::byte pattern(std::uint64_t i) { return std::byte((i * 0x9E3779B97F4A7C15ull) >> 56); }

// A file of `size` pattern bytes in the build directory (a disk file
// system, where pages can be evicted) or else /tmp; unlinked at the end.
struct TempFile {
  std::string path;
  int fd = -1;
  explicit TempFile(std::size_t size) {
    path = "build/parkway-test-file-XXXXXX";
    fd = ::mkstemp(path.data());
    if (fd < 0) {
      path = "/tmp/parkway-test-file-XXXXXX";
      fd = ::mkstemp(path.data());
    }
    if (fd < 0) std::abort();
    std::vector<std::byte> b(size);
    for (std::size_t i = 0; i < size; ++i) b[i] = pattern(i);
    if (::write(fd, b.data(), size) != ssize_t(size)) std::abort();
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

// A connected pair of TCP sockets over loopback: `out` (a parkway
// Socket, non-blocking) and the raw peer `in`.
struct TcpPair {
  parkway::io::Socket out;
  int in = -1;
  // small_buffers: 64 KiB of socket buffer each way (fixed: no
  // autotuning), so that a send of a few MiB waits for the reader many
  // times.
  explicit TcpPair(parkway::Runtime& rt, bool small_buffers = false) {
    auto l = parkway::io::Listener::bind(parkway::io::Address::loopback(0));
    if (!l) std::abort();
    auto c = parkway::sync_wait(rt, parkway::io::Socket::connect(l->local_address()));
    if (!c) std::abort();
    out = std::move(*c);
    in = ::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (in < 0) std::abort();
    if (small_buffers) {
      const int b = 64 * 1024;
      ::setsockopt(out.fd(), SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
      ::setsockopt(in, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
    }
  }
  ~TcpPair() {
    if (in >= 0) ::close(in);
  }
};

// Reads n bytes from fd and counts those that are not pattern(first + i);
// -1 on EOF or an error first (a receive timeout set on fd included).
inline long read_and_check(int fd, std::size_t n, std::uint64_t first = 0) {
  std::vector<std::byte> b(64 * 1024);
  std::size_t got = 0;
  long bad = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, b.data(), std::min(b.size(), n - got), 0);
    if (r <= 0) return -1;
    for (ssize_t i = 0; i < r; ++i) bad += b[std::size_t(i)] != pattern(first + got + std::size_t(i));
    got += std::size_t(r);
  }
  return bad;
}

}  // namespace pwtest
