// handlers.cpp -- routing and the three kinds of resource parkway-httpd serves.
#include "handlers.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <atomic>
#include <charconv>
#include <ctime>
#include <optional>
#include <string_view>

#include "http_path.hpp"
#include "http_response.hpp"
#include "open_file_cache.hpp"
#include "parkway/task_group.hpp"

namespace httpd {
namespace io = parkway::io;
using parkway::Task;

namespace {

std::string_view strip_query(std::string_view path) {
  return path.substr(0, path.find_first_of("?#"));
}

// The head of a response whose body is `body_length` bytes (sent or not).
Response head_only(ResponseHead h, std::uint64_t body_length) {
  Response r;
  r.status = h.status;
  h.content_length = body_length;
  append_response_fields(h, r.fields);
  return r;
}

Response text_response(int status, std::string_view body, bool head, std::string_view extra = {}) {
  ResponseHead h;
  h.status = status;
  h.content_type = "text/plain; charset=utf-8";
  h.extra = extra;
  Response r = head_only(h, body.size());
  if (!head) r.body = body;
  return r;
}

std::uint64_t serial_fib(int n) { return n < 2 ? std::uint64_t(n) : serial_fib(n - 1) + serial_fib(n - 2); }

// N of /fib/N, or -1 when it is not an integer from 0 to 40 written in
// one or two digits (from_chars alone would take "-0").
int fib_argument(std::string_view arg) {
  if (arg.find_first_not_of("0123456789") != std::string_view::npos) return -1;
  int n = -1;
  auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
  if (arg.empty() || arg.size() > 2 || ec != std::errc() || end != arg.data() + arg.size() || n < 0 || n > 40)
    return -1;
  return n;
}

Task<Response> fib_response(std::string_view arg, bool head, const HandlerConfig& cfg) {
  const int n = fib_argument(arg);
  if (n < 0) co_return text_response(400, "fib: N must be an integer from 0 to 40\n", head);
  std::uint64_t v = 0;
  if (cfg.fib_pool != nullptr) {
    co_await parkway::resume_on(*cfg.fib_pool);
    v = parallel_fib(n, cfg.abort);
    co_await parkway::resume_on(*cfg.server);
  } else {
    v = parallel_fib(n, cfg.abort);
  }
  if (cfg.abort != nullptr && cfg.abort->cancelled()) {  // v may be short: the computation stopped early
    Response r = text_response(503, "shutting down\n", head);
    r.closes = true;
    co_return r;
  }
  co_return text_response(200, std::to_string(v), head);
}

// fstat of a file open_beneath just opened. Synchronous like the open:
// the inode is in memory once the file is open, so no device is waited
// for, and IORING_OP_STATX would hand it to a kernel worker thread and
// back (one more trip through the ring for each file request).
io::Result<io::FileInfo> stat_open_file(int fd) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return io::Error(errno, "stat");
  return io::FileInfo{std::uint64_t(sb.st_size), std::int64_t(sb.st_mtim.tv_sec), std::uint32_t(sb.st_mode)};
}

// Whether a field `name` (If-Match, If-None-Match) is present, and then
// whether it is "*". Its value is "*" or a list of entity tags (RFC 9110
// 13.1.1, 13.1.2), whose quotes may hold commas and '*': so the field is
// "*" only when its value, all of its lines taken together (5.3), is "*"
// alone. Anything else is a list of tags, none of which matches (this
// server sends none). nullopt when no line has it.
std::optional<bool> field_is_star(const RequestParser& req, std::string_view name) {
  bool present = false;
  int lines = 0;  // with a value (an empty line adds no member)
  bool star = false;
  for (std::size_t i = 0; i < req.header_count(); ++i) {
    const Header h = req.header_at(i);
    if (!iequals(h.name, name)) continue;
    present = true;
    std::string_view v = h.value;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    if (v.empty()) continue;
    ++lines;
    star = v == "*";
  }
  if (!present) return std::nullopt;
  return lines == 1 && star;
}

// RFC 9110 13.2.2 steps 1-2: If-Match, or If-Unmodified-Since when there
// is none, says whether to answer 412. This server sends no entity tags,
// so If-Match holds only as "*" (the file exists); an If-Unmodified-Since
// that is not one date (given twice, or no date) is ignored.
bool precondition_failed(const RequestParser& req, std::time_t last_modified) {
  if (auto im = field_is_star(req, "If-Match")) return !*im;
  if (auto ius = req.only_header("If-Unmodified-Since")) {
    const auto t = parse_http_date(*ius);
    return t && last_modified > *t;
  }
  return false;
}

// Steps 3-4, for GET and HEAD: If-None-Match, or If-Modified-Since when
// there is none (one date: given twice it is ignored), says whether to
// answer 304. If-None-Match matches only as "*" here.
bool not_modified(const RequestParser& req, std::time_t last_modified) {
  if (auto inm = field_is_star(req, "If-None-Match")) return *inm;
  if (auto ims = req.only_header("If-Modified-Since")) return not_modified_since(*ims, last_modified);
  return false;
}

// The Range field to honour, if any (RFC 9110 14.2, 13.1.5): GET only,
// and only when If-Range, if present, is the Last-Modified date exactly
// and that date is a strong validator, at least a second before now (a
// file changed twice within its Last-Modified second would match
// otherwise; 8.8.2.2); an entity tag never matches here (none is sent).
// Otherwise the whole file is the answer.
std::optional<std::string_view> ranges_apply(const RequestParser& req, bool head, std::time_t last_modified,
                                             std::time_t now) {
  auto range = req.only_header("Range");  // given twice: invalid, the whole file
  if (!range || head) return std::nullopt;
  if (req.header("If-Range")) {
    const auto ir = req.only_header("If-Range");
    const auto t = ir ? parse_http_date(*ir) : std::nullopt;
    if (!t || *t != last_modified || last_modified >= now) return std::nullopt;
  }
  return range;
}

// The Location of a directory named without its final slash: the
// normalised path, percent-encoded but for unreserved bytes and '/', with
// the slash and the request's query, whose bytes outside RFC 3986's query
// characters (a '%' not followed by two hex digits among them) are
// percent-encoded too, so that Location is a URI-reference (RFC 9110
// 10.2.2). It starts with one '/' (the path has no empty segment), so it
// names this server, never another host.
std::string directory_location(std::string_view relative, std::string_view target) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  auto unreserved = [](unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' || c == '.' ||
           c == '_' || c == '~';
  };
  std::string loc = "/";
  auto encode = [&loc](unsigned char c) {
    loc += '%';
    loc += kHex[c >> 4];
    loc += kHex[c & 15];
  };
  for (const char ch : relative) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c) || c == '/')
      loc += ch;
    else
      encode(c);
  }
  loc += '/';
  const std::size_t q = target.find_first_of("?#");  // a query only before any fragment
  if (q != std::string_view::npos && target[q] == '?') {
    const std::string_view query = target.substr(q, target.find('#', q) - q);
    static constexpr std::string_view kQueryChars = "!$&'()*+,;=:@/?";  // sub-delims, ':', '@', '/', '?'
    for (std::size_t i = 0; i < query.size(); ++i) {
      const auto c = static_cast<unsigned char>(query[i]);
      if (unreserved(c) || kQueryChars.find(char(c)) != std::string_view::npos ||
          (c == '%' && i + 2 < query.size() && is_hex(query[i + 1]) && is_hex(query[i + 2])))
        loc += char(c);
      else
        encode(c);
    }
  }
  return loc;
}

// Whether `relative` names a directory under the root, opened as a path
// only (O_PATH needs no permission on the directory itself).
bool is_directory_beneath(int root_fd, std::string_view relative) {
  const int fd = open_beneath(root_fd, relative, O_PATH | O_DIRECTORY);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Opens a file or directory beneath the root without waiting on it: a
// FIFO or device opened plainly would block the worker until a writer
// came. A small cached body is read with the flag on (read_cached); for
// send_file, O_NONBLOCK comes off again (one fcntl), since its reads on
// the ring could otherwise fail with EAGAIN rather than wait for the
// device (on a file system without non-blocking reads).
int open_for_serving(int root_fd, std::string_view relative) {
  return open_beneath(root_fd, relative, O_RDONLY | O_NONBLOCK);
}

// The answer to a failed open (-errno `fd`). A 503 (out of descriptors or
// memory) says when to try again.
Response open_error_response(int fd, bool head) {
  const int st = open_error_status(fd);
  return text_response(st, std::string(reason_phrase(st)) + "\n", head, st == 503 ? "Retry-After: 1\r\n" : "");
}

// Bodies up to this size are read into the answer when their pages are
// cached, and go out in the answer's one send (with the answers
// pipelined beside it): five system calls for a file answer (openat2,
// fstat, preadv2, close, and the send) where send_file's path takes
// eight (an fcntl, the head's send, send_file's fcntl and cachestat,
// sendfile), but two copies of the body that sendfile does not make.
// Pinned, wrk -c64, three interleaved rounds against send_file's path:
// 4 KiB 70.6-74.4k req/s against 63.9-66.5k, 8 KiB 56.5-67.3k against
// 58.5-67.2k, 16 KiB 58.1-61.1k against 65.0-66.3k.
constexpr std::uint64_t kInlineBodyMax = 8 * 1024;

// RWF_NOWAIT unsupported by the file system of a file served before
// (EOPNOTSUPP): send_file's path from then on, without asking again.
std::atomic<bool> g_nowait_unsupported{false};

// Reads [first, first + length) of fd into `body` if every byte of it is
// in the page cache: preadv2 with RWF_NOWAIT fails with EAGAIN (or reads
// short) rather than wait for the device, so a worker never blocks on a
// disk here. False, with `body` empty, when it cannot: a page not
// cached, a file that shrank, a file system without RWF_NOWAIT.
bool read_cached(int fd, std::uint64_t first, std::uint64_t length, std::string& body) {
  if (g_nowait_unsupported.load(std::memory_order_relaxed)) return false;
  body.resize(std::size_t(length));
  iovec v{body.data(), body.size()};
  const ssize_t n = ::preadv2(fd, &v, 1, off_t(first), RWF_NOWAIT);
  if (n == ssize_t(length)) return true;
  if (n < 0 && errno == EOPNOTSUPP) g_nowait_unsupported.store(true, std::memory_order_relaxed);
  body.clear();
  return false;
}

// The open in file_response: an open that fails for want of descriptors
// closes the open-file cache's first (every worker's) and is tried again.
int open_serving_retry(int root_fd, std::string_view relative, bool cache_on) {
  int fd = open_for_serving(root_fd, relative);
  if (cache_on && (fd == -EMFILE || fd == -ENFILE)) {
    OpenFileCache::out_of_descriptors();
    fd = open_for_serving(root_fd, relative);
  }
  return fd;
}

std::int64_t monotonic_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// A file (or a directory's index.html) under the root.
// `p`: the target's path, resolved (and valid).
Task<Response> file_response(const RequestParser& req, PathResult p, bool head,
                             const HandlerConfig& cfg) {
  // The root as it is now: every lookup under it comes before this
  // coroutine's first co_await (RootDir::fd), and so does every use of
  // the calling worker's open-file cache.
  std::uint64_t root_generation = 0;
  const int root_fd = cfg.root_dir ? cfg.root_dir->fd(&root_generation) : cfg.root_fd;
  const bool cache_on = cfg.file_cache != 0;
  const RootKey root_key{cfg.root_dir, root_fd, root_generation};
  thread_local std::string key;  // the path with its trailing slash: "/sub/" is not "/sub"
  std::int64_t now_ns = 0;
  io::File f;  // a file opened here and not cached
  int fd = -1;  // the file served: f's, or the cache's
  std::string_view resolved = p.relative;  // what the file was opened by
  io::Result<io::FileInfo> info = io::FileInfo{};
  const OpenFileCache::Entry* cached = nullptr;
  if (cache_on) {
    key.assign(p.relative);
    if (p.trailing_slash) key += '/';
    now_ns = monotonic_ns();
    cached = OpenFileCache::find(root_key, key, now_ns);
  }
  if (cached) {
    fd = cached->fd;
    resolved = cached->resolved;
    info = stat_open_file(fd);
    if (!info) co_return text_response(500, "stat failed\n", head);
  } else {
    // openat2 is synchronous (the ring has no RESOLVE_BENEATH open): a path
    // lookup under the root, no wait on a peer.
    fd = open_serving_retry(root_fd, p.relative, cache_on);
    // A directory one may search but not list (mode 711) does not open for
    // reading; its index.html may still be served.
    const bool searchable_dir = fd == -EACCES && is_directory_beneath(root_fd, p.relative);
    if (fd < 0 && !searchable_dir) {
      co_return open_error_response(fd, head);
    }
    info = io::FileInfo{.mode = S_IFDIR};
    if (!searchable_dir) {
      f = io::File(fd);
      info = stat_open_file(f.fd());
    }
    const std::uint32_t first_mode = info ? info->mode : 0;
    if (info && S_ISDIR(info->mode)) {
      // "/sub" is answered by a redirect to "/sub/", as other servers do: a
      // page served at "/sub" would have its relative links resolved
      // against "/" by the browser.
      if (!p.trailing_slash && !p.relative.empty()) {
        const std::string extra = "Location: " + directory_location(p.relative, req.target()) + "\r\n";
        co_return text_response(301, "Moved Permanently\n", head, extra);
      }
      p.relative += p.relative.empty() ? "index.html" : "/index.html";
      resolved = p.relative;
      fd = open_serving_retry(root_fd, p.relative, cache_on);
      if (fd < 0) {
        co_return open_error_response(fd, head);
      }
      f = io::File(fd);
      info = stat_open_file(f.fd());
    }
    if (!info) co_return text_response(500, "stat failed\n", head);
    // "/a.txt/" names a directory that is not there (a file before a slash).
    if (!S_ISREG(info->mode) || (p.trailing_slash && !S_ISDIR(first_mode)))
      co_return text_response(404, "Not Found\n", head);
    fd = f.fd();
    // A regular file: cached without O_NONBLOCK (it only kept an open of
    // a FIFO from waiting), as send_file's reads on the ring need.
    if (cache_on && ::fcntl(fd, F_SETFL, 0) == 0) {
      if (const auto* e = OpenFileCache::put(root_key, key, fd, p.relative, now_ns, cfg.file_cache)) {
        (void)f.release();  // the cache's now
        resolved = e->resolved;
      }
    }
  }

  const std::uint64_t size = info->size;
  // A modification time in the future is announced as now (RFC 9110
  // 8.8.2.1), and the conditions below compare with what is announced.
  const std::time_t now = std::time(nullptr);
  const std::time_t last_modified = std::min(std::time_t(info->mtime_sec), now);
  ResponseHead h;
  h.content_type = mime_type(resolved);
  h.last_modified = last_modified;
  h.accept_ranges = true;
  if (precondition_failed(req, last_modified))
    co_return text_response(412, "Precondition Failed\n", head);
  if (not_modified(req, last_modified)) {
    // Only the fields a 200 would have sent that describe no
    // representation (RFC 9110 15.4.5): no Content-Type, no Accept-Ranges.
    h.status = 304;
    h.content_type = {};
    h.accept_ranges = false;
    Response r;
    r.status = 304;
    append_response_fields(h, r.fields);  // no Content-Length: 304 has no body
    co_return r;
  }
  std::uint64_t first = 0, length = size;
  if (auto range = ranges_apply(req, head, last_modified, now)) {
    ByteRange br = parse_range(*range, size);
    if (br.kind == RangeKind::Unsatisfiable) {
      h.status = 416;
      h.content_type = "text/plain; charset=utf-8";
      h.content_range = br;
      h.complete_length = size;
      co_return head_only(h, 0);
    }
    if (br.kind == RangeKind::Satisfiable) {
      h.status = 206;
      h.content_range = br;
      h.complete_length = size;
      first = br.first;
      length = br.length();
    }
  }
  Response r = head_only(h, length);
  if (head || length == 0) co_return r;
  if (length <= kInlineBodyMax && read_cached(fd, first, length, r.body)) co_return r;
  if (f.fd() >= 0) {
    if (::fcntl(f.fd(), F_SETFL, 0) != 0) co_return text_response(500, "fcntl failed\n", head);
    r.file = std::move(f);
  } else {  // the cache's descriptor: the answer sends from a copy of it
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) co_return open_error_response(-errno, head);
    r.file = io::File(copy);
  }
  r.file_offset = first;
  r.file_length = length;
  co_return r;
}

// Where a request leads: handle_request answers by it, and computes_long
// reads it, so the two cannot disagree.
struct Route {
  enum Kind { OtherScheme, OtherMethod, Plaintext, Fib, Path };
  Kind kind = Path;
  std::string fib_arg;  // Fib: the text after "/fib/" ("/" for "/fib/" and "/fib/N/": a 400)
  PathResult path;      // Path: the target's resolved path, or why it has none
};

Route route(const RequestParser& req) {
  Route r;
  // RFC 9110 7.4: a target of another scheme ("https" over this plain
  // connection, "ftp") is not this server's to answer: 421.
  if (req.target_form() == TargetForm::Absolute) {
    const std::string_view t = req.target();
    if (!iequals(t.substr(0, t.find(':')), "http")) {
      r.kind = Route::OtherScheme;
      return r;
    }
  }
  const Method m = req.method_id();
  if (m != Method::Get && m != Method::Head) {
    r.kind = Route::OtherMethod;
    return r;
  }
  // The routes' own spellings first, with no decoding (the benchmarks'
  // requests); any other spelling of the same path (/plain%74ext,
  // //plaintext, /x/../plaintext, an absolute-form target) reaches them
  // too, through the decoded and normalized path the files are found by,
  // as nginx matches its locations.
  const std::string_view path = strip_query(req.path());
  if (path == "/plaintext") {
    r.kind = Route::Plaintext;
  } else if (path.starts_with("/fib/") && fib_argument(path.substr(5)) >= 0) {
    r.kind = Route::Fib;
    r.fib_arg = path.substr(5);
  } else {
    resolve_target_path(req.target(), r.path);
    const PathResult& p = r.path;
    if (!p.ok()) return r;
    if (p.relative == "plaintext" && !p.trailing_slash) {
      r.kind = Route::Plaintext;
    } else if (p.relative.starts_with("fib/") || (p.relative == "fib" && p.trailing_slash)) {
      r.kind = Route::Fib;  // "/fib" itself is a file's name
      r.fib_arg = p.relative.size() > 4 && !p.trailing_slash ? p.relative.substr(4) : "/";
    }
  }
  return r;
}

}  // namespace

int open_root(const char* path) {
  int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && errno == EACCES && ::faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0)
    fd = ::open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fd;
}

namespace {
std::shared_ptr<const int> fd_handle(int fd) {
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}
}  // namespace

RootDir::RootDir(std::string path, int fd) : path_(std::move(path)), fd_(fd_handle(fd)) {
  struct stat sb;
  if (::fstat(fd, &sb) == 0) {
    dev_ = sb.st_dev;
    ino_ = sb.st_ino;
  }
  next_check_ns_.store(monotonic_ns() + 1'000'000'000, std::memory_order_relaxed);
}

int RootDir::fd(std::uint64_t* generation) {
  const std::int64_t now = monotonic_ns();
  if (now >= next_check_ns_.load(std::memory_order_relaxed) && !checking_.exchange(true, std::memory_order_acquire)) {
    refresh(now);
    checking_.store(false, std::memory_order_release);
  }
  thread_local const RootDir* owner = nullptr;
  thread_local std::uint64_t held_generation = 0;
  thread_local std::shared_ptr<const int> held;
  const std::uint64_t g = generation_.load(std::memory_order_acquire);
  if (owner != this || held_generation != g || !held) {
    held = fd_.load(std::memory_order_acquire);
    held_generation = g;
    owner = this;
  }
  if (generation) *generation = held_generation;
  return *held;
}

// One worker at a time (checking_): a stat of the path (a cached lookup,
// once a second), and an open only when it names another directory. A
// path that is gone or not a directory for now keeps the root served.
void RootDir::refresh(std::int64_t now) {
  next_check_ns_.store(now + 1'000'000'000, std::memory_order_relaxed);
  struct stat sb;
  if (::stat(path_.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) return;
  if (sb.st_dev == dev_ && sb.st_ino == ino_) return;
  const int fd = open_root(path_.c_str());
  if (fd < 0) return;
  struct stat now_sb;
  if (::fstat(fd, &now_sb) != 0) {
    ::close(fd);
    return;
  }
  dev_ = now_sb.st_dev;
  ino_ = now_sb.st_ino;
  fd_.store(fd_handle(fd), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_release);
}

std::uint64_t parallel_fib(int n, const io::CancelSource* stop) {
  if (n < kParallelFibMin) return serial_fib(n);
  if (stop != nullptr && stop->cancelled()) [[unlikely]]
    return 0;
  std::uint64_t a = 0;
  parkway::TaskGroup g;
  g.spawn([&] { a = parallel_fib(n - 1, stop); });
  std::uint64_t b = parallel_fib(n - 2, stop);
  g.wait();
  return a + b;
}

bool computes_long(const RequestParser& req) {
  // Only a path with "fib" or an escape in it leads to /fib: the others
  // (files, /plaintext) are spared route()'s decoding here.
  const std::string_view path = strip_query(req.path());
  if (path.find("fib") == std::string_view::npos && path.find('%') == std::string_view::npos) return false;
  const Route r = route(req);
  return r.kind == Route::Fib && fib_argument(r.fib_arg) >= kParallelFibMin;
}

Response simple_response(int status, bool head, std::string_view extra) {
  return text_response(status, std::string(reason_phrase(status)) + "\n", head, extra);
}

Task<Response> handle_request(const RequestParser& req, const HandlerConfig& cfg) {
  const Method m = req.method_id();
  const bool head = m == Method::Head;
  Route r = route(req);
  switch (r.kind) {
    case Route::OtherScheme: co_return simple_response(421, head);
    case Route::OtherMethod:
      if (m == Method::Other) co_return simple_response(501);
      co_return simple_response(405, false, "Allow: GET, HEAD\r\n");
    case Route::Plaintext: co_return text_response(200, "Hello, World!", head);
    case Route::Fib: co_return co_await fib_response(r.fib_arg, head, cfg);
    case Route::Path: break;
  }
  if (!r.path.ok()) co_return text_response(r.path.status, std::string(r.path.reason) + "\n", head);
  if (cfg.root_fd >= 0) co_return co_await file_response(req, std::move(r.path), head, cfg);
  co_return simple_response(404, head);
}

}  // namespace httpd
