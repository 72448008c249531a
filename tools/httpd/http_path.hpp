// http_path.hpp -- from a request-target to a file under the document root.
//
// resolve_target_path() percent-decodes the target's path (query and
// fragment dropped) and resolves its dot segments, giving a path relative to
// the root that never leaves it: a ".." above the root, encoded or not, is a
// 400, as are bad escapes and control bytes (NUL included). A decoded "%2F"
// is a separator like '/'; backslashes are ordinary bytes. Empty segments
// ("//") are dropped. Whether a trailing '/' means "index.html" is the
// server's choice: the result says whether the path ended in one.
//
// open_beneath() then opens that path relative to a directory fd with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): a relative symlink
// that stays inside the root is followed; one that leads outside fails
// (404), and so does every absolute one, even one naming a path inside. Where
// openat2 is missing it walks the path one component at a time with
// O_NOFOLLOW, so there every symlink fails.
#pragma once

#include <fcntl.h>

#include <string>
#include <string_view>

namespace httpd {

struct PathResult {
  int status = 200;         // 200, or 400 with `reason`
  std::string_view reason;  // static text
  // "a/c" for "/a/./b/../c"; "" for the root. No leading '/', no empty,
  // "." or ".." segment, no NUL or other control byte.
  std::string relative;
  bool trailing_slash = false;  // the path ended in '/' (or "/." or "/.."), the root included
  bool ok() const noexcept { return status == 200; }
};

// `target`: origin-form ("/a/b?q") or absolute-form ("http://h/a/b").
// Reuses the capacity of out.relative.
void resolve_target_path(std::string_view target, PathResult& out);
PathResult resolve_target_path(std::string_view target);

// Opens `relative` (as from resolve_target_path; "" is the root itself)
// beneath the directory `root_fd` with open(2) `flags` (O_CLOEXEC is added).
// Returns the fd, or -errno: -EXDEV or -ELOOP for a way out of the root.
int open_beneath(int root_fd, std::string_view relative, int flags = O_RDONLY) noexcept;

// open_beneath's fallback, callable on its own: every component opened with
// O_NOFOLLOW, ".." and absolute paths refused (-EXDEV).
int open_beneath_walk(int root_fd, std::string_view relative, int flags = O_RDONLY) noexcept;

// The status to answer for open_beneath's -errno: 404 for a missing file or
// a way out of the root, 403 for a permission error, 500 otherwise.
int open_error_status(int neg_errno) noexcept;

}  // namespace httpd
