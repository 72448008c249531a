// http_response.hpp -- what a response head needs: the status line and
// header fields written into a caller's buffer, a per-thread cache of the
// Date value, MIME types by file suffix, HTTP-date formatting and parsing,
// and the one-range subset of the Range header field.
//
// Limits: the writer always answers HTTP/1.1 and emits a fixed set of fields
// (plus raw extra lines from the caller); Range handles a single byte range
// (a request for several is answered with the whole representation, which
// RFC 9110 14.2 allows); HTTP-dates are read in the three RFC 9110 5.6.7
// formats, case-sensitively, with no trailing text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace httpd {

inline constexpr std::size_t kHttpDateLength = 29;  // "Sun, 06 Nov 1994 08:49:37 GMT"
inline constexpr std::string_view kServerName = "parkway-httpd";
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

// "OK", "Not Found", ...; "Unknown" for a status it does not list.
std::string_view reason_phrase(int status) noexcept;

// Content-Type for a file by its suffix (any case); text types carry
// "; charset=utf-8". Unknown or no suffix: "application/octet-stream".
std::string_view mime_type(std::string_view path) noexcept;

// IMF-fixdate of `t` (UTC) into out[0..29).
void format_http_date(std::time_t t, char out[kHttpDateLength]) noexcept;
std::string format_http_date(std::time_t t);

// An IMF-fixdate, RFC 850 or asctime date. An RFC 850 date with a
// two-digit year that would be more than 50 years after `now` is taken in
// the century before (RFC 9110 5.6.7). nullopt when the text is none of
// the three or names no real date.
std::optional<std::time_t> parse_http_date(std::string_view s, std::time_t now) noexcept;
std::optional<std::time_t> parse_http_date(std::string_view s) noexcept;  // now = time(nullptr)

// True when If-Modified-Since `ims` is a date no older than `mtime`, i.e. a
// GET may be answered 304. An unparsable value is ignored (false).
bool not_modified_since(std::string_view ims, std::time_t mtime) noexcept;

// The formatted current date, formatted again only when the second changes.
// One per thread (cached_http_date()) or one per worker. The view is into
// the cache: copy it before the second can change or the calling task can
// move to another thread (write_response_fields copies it at once).
class DateCache {
 public:
  std::string_view get(std::time_t now) noexcept;
  std::string_view now() noexcept { return get(std::time(nullptr)); }

 private:
  std::time_t second_ = 0;
  bool valid_ = false;
  char buf_[kHttpDateLength] = {};
};
std::string_view cached_http_date() noexcept;  // this thread's DateCache, now

// ---- Range ---------------------------------------------------------------

enum class RangeKind : std::uint8_t {
  None,           // no usable Range (absent, another unit, invalid, several ranges): 200
  Satisfiable,    // 206 with [first, last]
  Unsatisfiable,  // 416 with Content-Range: bytes */size
};

struct ByteRange {
  RangeKind kind = RangeKind::None;
  std::uint64_t first = 0;  // inclusive
  std::uint64_t last = 0;   // inclusive
  std::uint64_t length() const noexcept { return last - first + 1; }
};

// The Range field value `value` for a representation of `size` bytes:
// "bytes=a-b" (b clipped to size-1), "bytes=a-", "bytes=-n" (the last n).
ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept;

// ---- response head -------------------------------------------------------

struct ResponseHead {
  int status = 200;
  std::string_view date;          // empty: cached_http_date()
  std::string_view server = kServerName;  // empty: no Server field
  std::string_view content_type;  // empty: no Content-Type field
  std::optional<std::uint64_t> content_length;  // never sent with 1xx or 204
  std::optional<std::time_t> last_modified;
  bool accept_ranges = false;     // "Accept-Ranges: bytes"
  // 206: "Content-Range: bytes first-last/size"; 416: "bytes */size".
  std::optional<ByteRange> content_range;
  std::uint64_t complete_length = 0;  // the size in Content-Range
  std::string_view extra;         // raw field lines, each ending in CRLF, written as they are
};

// Writes the status line and the fields into out[0..cap): all of the head
// but its Connection field and the empty line that ends it, which
// response_head_end() gives when the answer is sent (whether it is the
// connection's last is known only then). Returns the length, or 0 when it
// does not fit (nothing useful written).
std::size_t write_response_fields(const ResponseHead& head, char* out, std::size_t cap) noexcept;
// Appends them to `out`.
void append_response_fields(const ResponseHead& head, std::string& out);
// "Connection: keep-alive" or "Connection: close", and the empty line.
std::string_view response_head_end(bool keep_alive) noexcept;

}  // namespace httpd
