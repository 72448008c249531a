// http_response.cpp -- response head writer, Date cache, MIME table,
// HTTP-date formatting and parsing, single byte-range parsing.
#include "http_response.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "http_parser.hpp"  // iequals

namespace httpd {
namespace {

constexpr std::string_view kDays[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::string_view kLongDays[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                           "Thursday", "Friday", "Saturday"};
constexpr std::string_view kMonths[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool is_leap(std::int64_t y) noexcept { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int days_in_month(std::int64_t y, int m) noexcept {
  static constexpr int kLen[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kLen[m - 1];
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar, counted
// in 400-year eras of 146097 days with the year starting in March.
std::int64_t days_from_civil(std::int64_t y, int m, int d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;                                  // [0, 399]
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;          // [0, 146096]
  return era * 146097 + doe - 719468;
}

// Reads the fixed layouts of the three date formats.
class DateReader {
 public:
  explicit DateReader(std::string_view s) : s_(s) {}
  bool lit(std::string_view t) noexcept {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }
  // Exactly `n` digits.
  bool digits(int n, int& v) noexcept {
    v = 0;
    for (int k = 0; k < n; ++k, ++i_) {
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') return false;
      v = v * 10 + (s_[i_] - '0');
    }
    return true;
  }
  template <std::size_t N>
  bool one_of(const std::string_view (&names)[N], int& idx) noexcept {
    for (std::size_t k = 0; k < N; ++k)
      if (lit(names[k])) {
        idx = static_cast<int>(k);
        return true;
      }
    return false;
  }
  bool time_of_day(int& h, int& m, int& s) noexcept {
    return digits(2, h) && lit(":") && digits(2, m) && lit(":") && digits(2, s);
  }
  bool at_end() const noexcept { return i_ == s_.size(); }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

std::optional<std::time_t> make_time(int year, int month, int day, int h, int m, int s) noexcept {
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return std::nullopt;
  if (h > 23 || m > 59 || s > 60) return std::nullopt;  // 60: a leap second
  const std::int64_t t = days_from_civil(year, month, day) * 86400 + h * 3600 + m * 60 + s;
  return static_cast<std::time_t>(t);
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Decimal digits, at least one, saturating at UINT64_MAX.
bool read_saturating(std::string_view s, std::uint64_t& v) noexcept {
  if (s.empty()) return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const unsigned d = static_cast<unsigned>(c - '0');
    v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
  }
  return true;
}

struct MimeEntry {
  std::string_view suffix, type;
};
constexpr MimeEntry kMime[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"bmp", "image/bmp"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    // Media a browser plays in place (and HLS/DASH streaming, subtitles):
    // served as application/octet-stream they are downloaded instead.
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"ts", "video/mp2t"},
    {"mpd", "application/dash+xml"},
    {"m4s", "video/iso.segment"},
    {"vtt", "text/vtt; charset=utf-8"},
    {"mov", "video/quicktime"},
    {"m4v", "video/mp4"},
    {"m4a", "audio/mp4"},
    {"aac", "audio/aac"},
    {"flac", "audio/flac"},
    {"opus", "audio/ogg"},
    {"oga", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"weba", "audio/webm"},
    {"mkv", "video/x-matroska"},
    {"avi", "video/x-msvideo"},
    {"mpeg", "video/mpeg"},
    {"mpg", "video/mpeg"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"apng", "image/apng"},
    {"jxl", "image/jxl"},
    {"xhtml", "application/xhtml+xml"},
    {"rss", "application/rss+xml"},
    {"atom", "application/atom+xml"},
    {"webmanifest", "application/manifest+json"},
    {"ics", "text/calendar; charset=utf-8"},
    {"eot", "application/vnd.ms-fontobject"},
    {"epub", "application/epub+zip"},
    {"rtf", "application/rtf"},
    {"doc", "application/msword"},
    {"xls", "application/vnd.ms-excel"},
    {"ppt", "application/vnd.ms-powerpoint"},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
    {"7z", "application/x-7z-compressed"},
    {"bz2", "application/x-bzip2"},
    {"xz", "application/x-xz"},
    {"zst", "application/zstd"},
    {"jar", "application/java-archive"},
};

// Bounded writes into the caller's buffer; ok() is false once one did not fit.
class HeadWriter {
 public:
  HeadWriter(char* out, std::size_t cap) : out_(out), cap_(cap) {}
  void put(std::string_view s) noexcept {
    if (s.empty()) return;  // memcpy may not be given a null pointer
    if (!ok_ || s.size() > cap_ - len_) {
      ok_ = false;
      return;
    }
    std::memcpy(out_ + len_, s.data(), s.size());
    len_ += s.size();
  }
  void num(std::uint64_t v) noexcept {
    char b[24];
    const auto r = std::to_chars(b, b + sizeof b, v);
    put(std::string_view(b, static_cast<std::size_t>(r.ptr - b)));
  }
  void field(std::string_view name, std::string_view value) noexcept {
    put(name);
    put(": ");
    put(value);
    put("\r\n");
  }
  bool ok() const noexcept { return ok_; }
  std::size_t size() const noexcept { return len_; }

 private:
  char* out_;
  std::size_t cap_;
  std::size_t len_ = 0;
  bool ok_ = true;
};

}  // namespace

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string_view mime_type(std::string_view path) noexcept {
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::size_t dot = name.rfind('.');
  if (dot != std::string_view::npos && dot > 0) {  // ".profile" has no suffix
    const std::string_view suffix = name.substr(dot + 1);
    for (const MimeEntry& e : kMime)
      if (iequals(suffix, e.suffix)) return e.type;
  }
  return "application/octet-stream";
}

void format_http_date(std::time_t t, char out[kHttpDateLength]) noexcept {
  std::tm tm{};
  gmtime_r(&t, &tm);
  auto two = [](char* p, int v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
  };
  std::memcpy(out, kDays[tm.tm_wday].data(), 3);
  out[3] = ',';
  out[4] = ' ';
  two(out + 5, tm.tm_mday);
  out[7] = ' ';
  std::memcpy(out + 8, kMonths[tm.tm_mon].data(), 3);
  out[11] = ' ';
  const int year = std::clamp(tm.tm_year + 1900, 0, 9999);  // the format has four digits
  two(out + 12, year / 100);
  two(out + 14, year % 100);
  out[16] = ' ';
  two(out + 17, tm.tm_hour);
  out[19] = ':';
  two(out + 20, tm.tm_min);
  out[22] = ':';
  two(out + 23, tm.tm_sec);
  std::memcpy(out + 25, " GMT", 4);
}

std::string format_http_date(std::time_t t) {
  char b[kHttpDateLength];
  format_http_date(t, b);
  return std::string(b, kHttpDateLength);
}

std::optional<std::time_t> parse_http_date(std::string_view s, std::time_t now) noexcept {
  DateReader r(s);
  int wday, day, month, year, h, m, sec;
  if (s.size() > 3 && s[3] == ',') {  // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
    if (r.one_of(kDays, wday) && r.lit(", ") && r.digits(2, day) && r.lit(" ") &&
        r.one_of(kMonths, month) && r.lit(" ") && r.digits(4, year) && r.lit(" ") &&
        r.time_of_day(h, m, sec) && r.lit(" GMT") && r.at_end())
      return make_time(year, month + 1, day, h, m, sec);
    return std::nullopt;
  }
  if (s.size() > 3 && s[3] == ' ') {  // asctime: Sun Nov  6 08:49:37 1994
    if (!(r.one_of(kDays, wday) && r.lit(" ") && r.one_of(kMonths, month) && r.lit(" ")))
      return std::nullopt;
    if (!(r.lit(" ") ? r.digits(1, day) : r.digits(2, day))) return std::nullopt;
    if (r.lit(" ") && r.time_of_day(h, m, sec) && r.lit(" ") && r.digits(4, year) && r.at_end())
      return make_time(year, month + 1, day, h, m, sec);
    return std::nullopt;
  }
  // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
  int yy;
  if (!(r.one_of(kLongDays, wday) && r.lit(", ") && r.digits(2, day) && r.lit("-") &&
        r.one_of(kMonths, month) && r.lit("-") && r.digits(2, yy) && r.lit(" ") &&
        r.time_of_day(h, m, sec) && r.lit(" GMT") && r.at_end()))
    return std::nullopt;
  std::tm tm{};
  gmtime_r(&now, &tm);
  const int this_year = tm.tm_year + 1900;
  year = this_year - this_year % 100 + yy;
  if (year <= this_year - 50) year += 100;  // the nearest: from 49 years back to 50 on
  auto t = make_time(year, month + 1, day, h, m, sec);
  if (!t) return std::nullopt;
  // "More than 50 years in the future" (RFC 9110 5.6.7) is measured from
  // now to the timestamp, not between the years: now, 50 years on.
  const std::int64_t fifty_years_on = days_from_civil(this_year + 50, tm.tm_mon + 1, tm.tm_mday) * 86400 +
                                      tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
  if (*t > fifty_years_on) return make_time(year - 100, month + 1, day, h, m, sec);
  return t;
}

std::optional<std::time_t> parse_http_date(std::string_view s) noexcept {
  return parse_http_date(s, std::time(nullptr));
}

bool not_modified_since(std::string_view ims, std::time_t mtime) noexcept {
  const auto t = parse_http_date(trim_ows(ims));
  return t && mtime <= *t;
}

std::string_view DateCache::get(std::time_t now) noexcept {
  if (!valid_ || now != second_) {
    format_http_date(now, buf_);
    second_ = now;
    valid_ = true;
  }
  return std::string_view(buf_, kHttpDateLength);
}

std::string_view cached_http_date() noexcept {
  thread_local DateCache cache;
  return cache.now();
}

ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept {
  value = trim_ows(value);
  if (value.size() < 6 || !iequals(value.substr(0, 6), "bytes=")) return {};
  value.remove_prefix(6);

  // Exactly one non-empty list element.
  std::string_view spec;
  int count = 0;
  for (;;) {
    const std::size_t comma = value.find(',');
    const std::string_view e = trim_ows(value.substr(0, comma));
    if (!e.empty()) {
      spec = e;
      ++count;
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  if (count != 1) return {};

  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return {};
  std::uint64_t a = 0, b = 0;
  if (dash == 0) {  // suffix range: the last n bytes
    if (!read_saturating(spec.substr(1), b)) return {};
    if (b == 0) return {RangeKind::Unsatisfiable};
    // An empty representation's only satisfiable range is such a suffix
    // (RFC 9110 14.1.1), and a 206 cannot describe no bytes: the whole,
    // empty, as a 200 (14.2 lets a server ignore Range).
    if (size == 0) return {};
    return {RangeKind::Satisfiable, b >= size ? 0 : size - b, size - 1};
  }
  if (!read_saturating(spec.substr(0, dash), a)) return {};
  const std::string_view last = spec.substr(dash + 1);
  if (last.empty()) {
    b = UINT64_MAX;
  } else if (!read_saturating(last, b) || b < a) {
    return {};
  }
  if (a >= size) return {RangeKind::Unsatisfiable};
  return {RangeKind::Satisfiable, a, std::min(b, size - 1)};
}

std::size_t write_response_fields(const ResponseHead& head, char* out, std::size_t cap) noexcept {
  HeadWriter w(out, cap);
  w.put("HTTP/1.1 ");
  w.num(static_cast<std::uint64_t>(head.status));
  w.put(" ");
  w.put(reason_phrase(head.status));
  w.put("\r\n");
  w.field("Date", head.date.empty() ? cached_http_date() : head.date);
  if (!head.server.empty()) w.field("Server", head.server);
  if (!head.content_type.empty()) w.field("Content-Type", head.content_type);
  if (head.content_length && head.status >= 200 && head.status != 204) {
    w.put("Content-Length: ");
    w.num(*head.content_length);
    w.put("\r\n");
  }
  if (head.last_modified) {
    char d[kHttpDateLength];
    format_http_date(*head.last_modified, d);
    w.field("Last-Modified", std::string_view(d, kHttpDateLength));
  }
  if (head.accept_ranges) w.field("Accept-Ranges", "bytes");
  if (head.content_range && head.content_range->kind != RangeKind::None) {
    w.put("Content-Range: bytes ");
    if (head.content_range->kind == RangeKind::Satisfiable) {
      w.num(head.content_range->first);
      w.put("-");
      w.num(head.content_range->last);
    } else {
      w.put("*");
    }
    w.put("/");
    w.num(head.complete_length);
    w.put("\r\n");
  }
  w.put(head.extra);
  return w.ok() ? w.size() : 0;
}

void append_response_fields(const ResponseHead& head, std::string& out) {
  // Every field but the caller's strings fits in 512 bytes.
  const std::size_t bound = 512 + head.date.size() + head.server.size() +
                            head.content_type.size() + head.extra.size();
  const std::size_t old = out.size();
  out.resize(old + bound);
  out.resize(old + write_response_fields(head, out.data() + old, bound));
}

std::string_view response_head_end(bool keep_alive) noexcept {
  return keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
}

}  // namespace httpd
