// http_path.cpp -- percent-decoding and dot-segment resolution of request
// paths, and opening a resolved path beneath a root directory fd.
#include "http_path.hpp"

#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

namespace httpd {
namespace {

int hex_value(char ch) noexcept {
  const unsigned char c = static_cast<unsigned char>(ch);
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

bool is_control(unsigned char c) noexcept { return c < 0x20 || c == 0x7f; }

void reject(PathResult& out, std::string_view reason) {
  out.status = 400;
  out.reason = reason;
  out.relative.clear();
  out.trailing_slash = false;
}

// The path of an origin-form or absolute-form target, or "" for any other.
std::string_view target_path(std::string_view target) noexcept {
  if (!target.empty() && target.front() == '/') return target;
  const std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) return {};
  const std::size_t path = target.find_first_of("/?#", scheme_end + 3);
  if (path == std::string_view::npos || target[path] != '/') return "/";
  return target.substr(path);
}

std::atomic<bool> g_no_openat2{false};

}  // namespace

void resolve_target_path(std::string_view target, PathResult& out) {
  out.status = 200;
  out.reason = {};
  out.trailing_slash = false;
  std::string& r = out.relative;
  r.clear();

  std::string_view path = target_path(target);
  if (path.empty()) return reject(out, "request-target is not a path");
  path = path.substr(0, path.find_first_of("?#"));

  // Decode all of it first, so that encoded dots and slashes are resolved
  // exactly like plain ones below.
  r.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%') {
      if (path.size() - i < 3) return reject(out, "invalid percent-encoding");
      const int hi = hex_value(path[i + 1]), lo = hex_value(path[i + 2]);
      if (hi < 0 || lo < 0) return reject(out, "invalid percent-encoding");
      c = static_cast<char>(hi << 4 | lo);
      i += 2;
    }
    if (c == '\0') return reject(out, "NUL in path");
    if (is_control(static_cast<unsigned char>(c))) return reject(out, "control character in path");
    r.push_back(c);
  }

  // Resolve the segments in place: the written part (r[0, w)) never passes
  // the part still to read (r[rd, n)).
  const std::size_t n = r.size();
  std::size_t rd = 1, w = 0;  // r[0] is the leading '/'
  bool trailing = true;
  while (rd <= n) {
    std::size_t end = r.find('/', rd);
    if (end == std::string::npos) end = n;
    const std::size_t len = end - rd;
    const std::string_view seg(r.data() + rd, len);
    if (seg.empty() || seg == ".") {
      trailing = true;
    } else if (seg == "..") {
      if (w == 0) return reject(out, "path leaves the root");
      const std::size_t slash = r.rfind('/', w - 1);
      w = slash == std::string::npos ? 0 : slash;
      trailing = true;
    } else {
      if (w != 0) r[w++] = '/';
      std::memmove(r.data() + w, r.data() + rd, len);
      w += len;
      trailing = false;
    }
    rd = end + 1;
  }
  r.resize(w);
  out.trailing_slash = trailing;
}

PathResult resolve_target_path(std::string_view target) {
  PathResult out;
  resolve_target_path(target, out);
  return out;
}

int open_beneath(int root_fd, std::string_view relative, int flags) noexcept {
  if (g_no_openat2.load(std::memory_order_relaxed)) return open_beneath_walk(root_fd, relative, flags);
  char path[PATH_MAX];
  if (relative.size() >= sizeof path) return -ENAMETOOLONG;
  if (relative.find('\0') != std::string_view::npos) return -EINVAL;
  if (relative.empty()) relative = ".";
  std::memcpy(path, relative.data(), relative.size());
  path[relative.size()] = '\0';

  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    const long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    const int err = errno;
    // EAGAIN: a rename raced with the walk; EINTR: a signal.
    if ((err == EAGAIN || err == EINTR) && attempt < 4) continue;
    // ENOSYS: an older kernel. EPERM: a seccomp filter that denies system
    // calls it does not know with EPERM; the walk gives the real answer.
    if (err == ENOSYS || err == EPERM) {
      if (err == ENOSYS) g_no_openat2.store(true, std::memory_order_relaxed);
      return open_beneath_walk(root_fd, relative, flags);
    }
    return -err;
  }
}

int open_beneath_walk(int root_fd, std::string_view relative, int flags) noexcept {
  if (!relative.empty() && relative.front() == '/') return -EXDEV;
  if (relative.find('\0') != std::string_view::npos) return -EINVAL;

  // The components that name something: empty and "." ones are skipped.
  auto next = [&relative](std::string_view& seg) {
    while (!relative.empty()) {
      const std::size_t slash = relative.find('/');
      seg = relative.substr(0, slash);
      relative.remove_prefix(slash == std::string_view::npos ? relative.size() : slash + 1);
      if (!seg.empty() && seg != ".") return true;
    }
    return false;
  };

  int dir = root_fd;
  auto close_dir = [&] {
    if (dir != root_fd) close(dir);
  };
  std::string_view seg;
  if (!next(seg)) {  // the root itself
    const int fd = openat(root_fd, ".", flags | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
  }
  for (;;) {
    if (seg == "..") {
      close_dir();
      return -EXDEV;
    }
    char name[NAME_MAX + 1];
    if (seg.size() > NAME_MAX) {
      close_dir();
      return -ENAMETOOLONG;
    }
    std::memcpy(name, seg.data(), seg.size());
    name[seg.size()] = '\0';
    std::string_view following;
    const bool last = !next(following);
    const int fd = last ? openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC)
                        : openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    close_dir();
    if (fd < 0) return -err;
    if (last) return fd;
    dir = fd;
    seg = following;
  }
}

int open_error_status(int neg_errno) noexcept {
  switch (-neg_errno) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EXDEV:
    case ENAMETOOLONG:
    case EINVAL:
    case ENXIO:   // a Unix socket (or a device with nothing behind it) under the root
    case ENODEV:
      return 404;
    case EACCES:
    case EPERM:
      return 403;
    case EMFILE:  // out of descriptors or memory: a passing state, try again later
    case ENFILE:
    case ENOMEM:
      return 503;
    default:
      return 500;
  }
}

}  // namespace httpd
