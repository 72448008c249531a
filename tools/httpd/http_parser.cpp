// http_parser.cpp -- the request-head state machine, the header semantics
// checked once the head is complete (Host, Content-Length,
// Transfer-Encoding, Connection, Expect) and the two body decoders.
//
// One byte at a time through a small state machine, with tight loops for the
// long runs (target, field name, field value). Every loop stops at the end of
// the input or at the limit of the part being read, whichever is first.
#include "http_parser.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <new>
#include <stdexcept>

namespace httpd {
namespace {

constexpr std::array<bool, 256> make_token_table() {
  std::array<bool, 256> t{};
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kToken = make_token_table();

bool is_token(unsigned char c) noexcept { return kToken[c]; }
bool is_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
bool is_alpha(unsigned char c) noexcept { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool is_ows(unsigned char c) noexcept { return c == ' ' || c == '\t'; }
// A byte a field value may hold: VCHAR, obs-text, SP, HTAB.
bool is_field_byte(unsigned char c) noexcept { return c >= 0x20 ? c != 0x7f : c == '\t'; }

int hex_value(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Calls f(element) for each non-empty element of a comma-separated list
// (RFC 9110 5.6.1), OWS trimmed; stops early when f returns false.
template <class F>
void for_each_element(std::string_view list, F&& f) {
  while (true) {
    std::size_t comma = list.find(',');
    std::string_view e = trim_ows(list.substr(0, comma));
    if (!e.empty() && !f(e)) return;
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

bool is_unreserved_or_sub_delim(unsigned char c) noexcept {
  return is_alpha(c) || is_digit(c) || std::string_view("-._~!$&'()*+,;=").find(static_cast<char>(c)) != std::string_view::npos;
}

// Host = uri-host [ ":" port ] (RFC 9112 3.2, RFC 3986 3.2.2-3.2.3):
// uri-host an IP-literal ("[" IPv6address / IPvFuture "]") or a reg-name
// (unreserved, pct-encoded, sub-delims; an IPv4 address is one), port
// *DIGIT; no userinfo; no port without a host (":80"). The IPv6 address is
// checked for its characters only.
bool valid_host(std::string_view h) noexcept {
  std::string_view port;
  if (!h.empty() && h.front() == '[') {
    const std::size_t close = h.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    const std::string_view lit = h.substr(1, close - 1);
    const std::string_view rest = h.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
    }
    if ((lit.front() | 0x20) == 'v') {  // IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
      const std::size_t dot = lit.find('.');
      if (dot == std::string_view::npos || dot < 2 || dot + 1 == lit.size()) return false;
      for (std::size_t i = 1; i < dot; ++i)
        if (hex_value(static_cast<unsigned char>(lit[i])) < 0) return false;
      for (unsigned char c : lit.substr(dot + 1))
        if (!is_unreserved_or_sub_delim(c) && c != ':') return false;
    } else {
      if (lit.find(':') == std::string_view::npos) return false;
      for (unsigned char c : lit)
        if (hex_value(c) < 0 && c != ':' && c != '.') return false;
    }
  } else {
    const std::size_t colon = h.find(':');
    if (colon != std::string_view::npos) {
      port = h.substr(colon + 1);
      h = h.substr(0, colon);
      // ":80": no host. An "http" URI with an empty host is invalid (RFC
      // 9110 4.2.1), and a Host field is the target's authority or empty
      // (7.2), never a port alone.
      if (h.empty()) return false;
    }
    for (std::size_t i = 0; i < h.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(h[i]);
      if (c == '%') {
        if (h.size() - i < 3 || hex_value(static_cast<unsigned char>(h[i + 1])) < 0 ||
            hex_value(static_cast<unsigned char>(h[i + 2])) < 0)
          return false;
        i += 2;
      } else if (!is_unreserved_or_sub_delim(c)) {
        return false;
      }
    }
  }
  for (unsigned char c : port)
    if (!is_digit(c)) return false;
  return true;
}

Method classify_method(std::string_view m) noexcept {
  if (m == "GET") return Method::Get;
  if (m == "HEAD") return Method::Head;
  if (m == "POST") return Method::Post;
  if (m == "PUT") return Method::Put;
  if (m == "DELETE") return Method::Delete;
  if (m == "OPTIONS") return Method::Options;
  return Method::Other;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    if ((x | 0x20) != (y | 0x20) || !is_alpha(x)) return false;
  }
  return true;
}

// ---- RequestParser -------------------------------------------------------

RequestParser::RequestParser(const Limits& limits) : limits_(limits) {
  // Slots hold 32-bit offsets into the head.
  constexpr std::size_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (limits.max_request_line > kMax || limits.max_header_bytes > kMax - limits.max_request_line)
    throw std::invalid_argument("http parser: max_request_line + max_header_bytes must be under 4 GiB");
}

void RequestParser::reset() noexcept {
  data_ = {};
  state_ = State::Start;
  pos_ = line_start_ = fields_start_ = 0;
  name_off_ = name_end_ = value_off_ = value_end_ = 0;
  vpos_ = major_ = minor_ = 0;
  header_count_ = 0;
  result_ = {};
  method_off_ = method_len_ = target_off_ = target_len_ = 0;
  path_off_ = path_len_ = authority_off_ = authority_len_ = host_off_ = host_len_ = 0;
  method_id_ = Method::Other;
  form_ = TargetForm::Origin;
  path_is_root_ = false;
  version_ = 11;
  keep_alive_ = false;
  body_ = BodyKind::None;
  content_length_ = 0;
  expect_continue_ = false;
}

ParseResult RequestParser::fail(int status, std::string_view reason) noexcept {
  state_ = State::Error;
  result_ = {ParseStatus::Error, 0, status, reason};
  return result_;
}

bool RequestParser::reject(int status, std::string_view reason) noexcept {
  fail(status, reason);
  return false;
}

ParseResult RequestParser::limit_error() noexcept {
  switch (state_) {
    case State::Start:
    case State::StartLF:
      return fail(400, "too many empty lines before the request");
    case State::Method:  // longer than any method this server knows (RFC 9112 3)
      return fail(501, "method not implemented");
    case State::Target:
    case State::Version:
    case State::RequestLF:
      return fail(414, "request line too long");
    default:
      return fail(431, "header section too large");
  }
}

ParseResult RequestParser::parse(std::string_view buffered) {
  if (buffered.size() < pos_) return fail(500, "buffer shorter than the bytes already parsed");
  data_ = buffered;
  if (state_ == State::Done || state_ == State::Error) return result_;

  const auto* p = reinterpret_cast<const unsigned char*>(buffered.data());
  const std::size_t n = buffered.size();
  std::size_t i = pos_;
  for (;;) {
    // Every state reads within the limit of its part of the head.
    const bool in_fields = state_ >= State::FieldStart;
    const std::size_t base = in_fields ? fields_start_ : line_start_;
    const std::size_t limit = in_fields ? limits_.max_header_bytes : limits_.max_request_line;
    const std::size_t stop = n - base > limit ? base + limit : n;
    if (i >= stop) {
      pos_ = i;
      if (stop < n) return limit_error();
      return {};
    }
    const unsigned char c = p[i];
    switch (state_) {
      case State::Start:  // RFC 9112 2.2: empty lines before the request line
        if (c == '\r') {
          state_ = State::StartLF;
          ++i;
        } else if (c == '\n') {
          ++i;
        } else {
          line_start_ = method_off_ = i;
          state_ = State::Method;
        }
        break;
      case State::StartLF:
        if (c != '\n') return fail(400, "bare CR");
        state_ = State::Start;
        ++i;
        break;
      case State::Method:
        while (i < stop && is_token(p[i])) ++i;
        if (i == stop) break;
        if (p[i] != ' ' || i == method_off_) return fail(400, "invalid method");
        method_len_ = i - method_off_;
        target_off_ = ++i;
        state_ = State::Target;
        break;
      case State::Target:
        while (i < stop && p[i] > 0x20 && p[i] < 0x7f) ++i;
        if (i == stop) break;
        if (p[i] != ' ' || i == target_off_) return fail(400, "invalid request-target");
        target_len_ = i - target_off_;
        ++i;
        vpos_ = 0;
        state_ = State::Version;
        break;
      case State::Version:  // "HTTP/" DIGIT "." DIGIT, then the line end
        if (vpos_ < 5) {
          if (c != "HTTP/"[vpos_]) return fail(400, "invalid HTTP version");
        } else if (vpos_ == 5 || vpos_ == 7) {
          if (!is_digit(c)) return fail(400, "invalid HTTP version");
          (vpos_ == 5 ? major_ : minor_) = c - '0';
        } else if (vpos_ == 6) {
          if (c != '.') return fail(400, "invalid HTTP version");
        } else if (c == '\r') {
          state_ = State::RequestLF;
          ++i;
          break;
        } else if (c == '\n') {
          ++i;
          if (!finish_request_line(i)) return result_;
          break;
        } else {
          return fail(400, "invalid HTTP version");
        }
        ++vpos_;
        ++i;
        break;
      case State::RequestLF:
        if (c != '\n') return fail(400, "bare CR");
        ++i;
        if (!finish_request_line(i)) return result_;
        break;
      case State::FieldStart:
        if (c == '\r') {
          state_ = State::EndLF;
          ++i;
        } else if (c == '\n') {
          pos_ = ++i;
          finish_head();
          return result_;
        } else if (is_ows(c)) {
          return fail(400, "obs-fold or whitespace before a field name");
        } else if (!is_token(c)) {
          return fail(400, "invalid field name");
        } else {
          name_off_ = i++;
          state_ = State::Name;
        }
        break;
      case State::EndLF:
        if (c != '\n') return fail(400, "bare CR");
        pos_ = ++i;
        finish_head();
        return result_;
      case State::Name:
        while (i < stop && is_token(p[i])) ++i;
        if (i == stop) break;
        if (p[i] != ':') return fail(400, "invalid field name");
        name_end_ = i++;
        state_ = State::ValueOWS;
        break;
      case State::ValueOWS:
        if (is_ows(c)) {
          ++i;
        } else {
          value_off_ = value_end_ = i;
          state_ = State::Value;
        }
        break;
      case State::Value:
        while (i < stop) {
          const unsigned char v = p[i];
          if (v > 0x20 && v != 0x7f) {
            value_end_ = ++i;
          } else if (is_ows(v)) {
            ++i;
          } else {
            break;
          }
        }
        if (i == stop) break;
        if (p[i] == '\r') {
          state_ = State::ValueLF;
          ++i;
        } else if (p[i] == '\n') {
          ++i;
          if (!store_field()) return result_;
        } else {
          return fail(400, "control character in a field value");
        }
        break;
      case State::ValueLF:
        if (c != '\n') return fail(400, "bare CR");
        ++i;
        if (!store_field()) return result_;
        break;
      case State::Done:
      case State::Error:
        return result_;
    }
  }
}

bool RequestParser::finish_request_line(std::size_t end) noexcept {
  if (major_ != 1) {
    return reject(505, "HTTP version not supported");
  }
  // RFC 9110 2.5: a higher minor version of a major version we implement is
  // handled as the highest minor version we know.
  version_ = minor_ == 0 ? 10 : 11;
  method_id_ = classify_method(method());

  const std::string_view t = target();
  if (t == "*") {
    if (method_id_ != Method::Options) {
      return reject(400, "asterisk-form target outside OPTIONS");
    }
    form_ = TargetForm::Asterisk;
    path_off_ = target_off_;
    path_len_ = 1;
  } else if (t.front() == '/') {
    form_ = TargetForm::Origin;
    path_off_ = target_off_;
    path_len_ = target_len_;
  } else {
    // absolute-form: scheme "://" authority [ path-abempty [ "?" query ] ]
    std::size_t k = 0;
    if (!is_alpha(static_cast<unsigned char>(t[0]))) {
      return reject(400, "invalid request-target");
    }
    while (k < t.size() && (is_alpha(static_cast<unsigned char>(t[k])) ||
                            is_digit(static_cast<unsigned char>(t[k])) || t[k] == '+' ||
                            t[k] == '-' || t[k] == '.'))
      ++k;
    if (t.substr(k, 3) != "://") {
      return reject(400, "invalid request-target");
    }
    k += 3;
    const std::size_t auth = k;
    while (k < t.size() && t[k] != '/' && t[k] != '?' && t[k] != '#') ++k;
    if (k == auth || !valid_host(t.substr(auth, k - auth))) {
      return reject(400, "invalid authority in request-target");
    }
    form_ = TargetForm::Absolute;
    authority_off_ = target_off_ + auth;
    authority_len_ = k - auth;
    if (k < t.size() && t[k] == '/') {
      path_off_ = target_off_ + k;
      path_len_ = t.size() - k;
    } else {
      path_is_root_ = true;
    }
  }
  fields_start_ = end;
  state_ = State::FieldStart;
  return true;
}

bool RequestParser::store_field() noexcept {
  if (header_count_ >= limits_.max_header_count) {
    return reject(431, "too many header fields");
  }
  const Slot s{std::uint32_t(name_off_), std::uint32_t(name_end_ - name_off_),
               std::uint32_t(value_off_), std::uint32_t(value_end_ - value_off_)};
  if (header_count_ < kInlineSlots) {
    inline_slots_[header_count_] = s;
  } else {
    const std::size_t spill = header_count_ - kInlineSlots;
    if (spill == more_slots_.size()) {
      try {
        more_slots_.push_back(s);
      } catch (const std::bad_alloc&) {
        return reject(431, "header fields: out of memory");
      }
    } else {
      more_slots_[spill] = s;
    }
  }
  ++header_count_;
  state_ = State::FieldStart;
  return true;
}

Header RequestParser::header_at(std::size_t i) const noexcept {
  if (i >= header_count_) return {};
  const Slot& s = slot(i);
  return {view(s.name_off, s.name_len), view(s.value_off, s.value_len)};
}

std::optional<std::string_view> RequestParser::header(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < header_count_; ++i) {
    const Slot& s = slot(i);
    if (s.name_len == name.size() && iequals(view(s.name_off, s.name_len), name))
      return view(s.value_off, s.value_len);
  }
  return std::nullopt;
}

std::optional<std::string_view> RequestParser::only_header(std::string_view name) const noexcept {
  std::optional<std::string_view> found;
  for (std::size_t i = 0; i < header_count_; ++i) {
    const Slot& s = slot(i);
    if (s.name_len == name.size() && iequals(view(s.name_off, s.name_len), name)) {
      if (found) return std::nullopt;
      found = view(s.value_off, s.value_len);
    }
  }
  return found;
}

std::string_view RequestParser::path() const noexcept {
  if (path_is_root_) return "/";
  return view(path_off_, path_len_);
}

std::string_view RequestParser::host() const noexcept {
  if (form_ == TargetForm::Absolute) return view(authority_off_, authority_len_);
  return view(host_off_, host_len_);
}

// The header semantics, once every field is in.
bool RequestParser::finish_head() noexcept {
  std::size_t hosts = 0;
  bool have_length = false, length_bad = false;
  std::uint64_t length = 0;
  bool have_te = false, te_chunked = false, te_chunked_last = false, te_twice = false,
       te_unknown = false;
  bool conn_close = false, conn_keep_alive = false;

  for (std::size_t h = 0; h < header_count_; ++h) {
    const Header f = header_at(h);
    switch (f.name.size()) {
      case 4:
        if (iequals(f.name, "host")) {
          if (hosts++ == 0) {
            host_off_ = slot(h).value_off;
            host_len_ = slot(h).value_len;
          }
        }
        break;
      case 6:
        if (iequals(f.name, "expect")) {
          for_each_element(f.value, [&](std::string_view e) {
            if (iequals(e, "100-continue")) expect_continue_ = true;
            return true;
          });
        }
        break;
      case 10:
        if (iequals(f.name, "connection")) {
          for_each_element(f.value, [&](std::string_view e) {
            if (iequals(e, "close")) conn_close = true;
            else if (iequals(e, "keep-alive")) conn_keep_alive = true;
            return true;
          });
        }
        break;
      case 14:
        if (iequals(f.name, "content-length")) {
          // Digits only; a list or repeated field of one same value is that
          // value (RFC 9110 8.6), differing values are an error.
          bool any = false;
          for_each_element(f.value, [&](std::string_view e) {
            any = true;
            std::uint64_t v = 0;
            for (unsigned char c : e) {
              if (!is_digit(c) || v > (UINT64_MAX - (c - '0')) / 10) {
                length_bad = true;
                return false;
              }
              v = v * 10 + (c - '0');
            }
            if (have_length && v != length) length_bad = true;
            have_length = true;
            length = v;
            return !length_bad;
          });
          if (!any) length_bad = true;
          have_length = true;
        }
        break;
      case 17:
        if (iequals(f.name, "transfer-encoding")) {
          have_te = true;
          for_each_element(f.value, [&](std::string_view e) {
            if (iequals(e, "chunked")) {
              if (te_chunked) te_twice = true;
              te_chunked = te_chunked_last = true;
            } else {
              te_unknown = true;
              te_chunked_last = false;
            }
            return true;
          });
        }
        break;
      default:
        break;
    }
  }

  if (hosts > 1) return reject(400, "more than one Host field");
  if (hosts == 0 && version_ == 11) return reject(400, "HTTP/1.1 request without Host");
  if (hosts == 1 && !valid_host(view(host_off_, host_len_)))
    return reject(400, "invalid Host field");

  if (have_te) {
    // RFC 9112 6.1 and 6.3: both framings, or chunked not last, cannot be
    // trusted; an HTTP/1.0 message with Transfer-Encoding is faulty.
    if (have_length) return reject(400, "both Content-Length and Transfer-Encoding");
    if (version_ == 10) return reject(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (!te_chunked && !te_unknown) return reject(400, "empty Transfer-Encoding");
    if (te_twice || (te_chunked && !te_chunked_last))
      return reject(400, "chunked is not the final transfer coding");
    if (te_unknown) return reject(501, "transfer coding not implemented");
    body_ = BodyKind::Chunked;
  } else if (have_length) {
    if (length_bad) return reject(400, "invalid Content-Length");
    if (length > limits_.max_body) return reject(413, "request body too large");
    content_length_ = length;
    body_ = length ? BodyKind::Length : BodyKind::None;
  }

  if (version_ == 10) expect_continue_ = false;  // RFC 9110 10.1.1
  keep_alive_ = version_ == 11 ? !conn_close : (conn_keep_alive && !conn_close);
  state_ = State::Done;
  result_ = {ParseStatus::Done, pos_, 0, {}};
  return true;
}

// ---- bodies --------------------------------------------------------------

BodyStep ContentLengthBody::step(std::string_view in) noexcept {
  if (remaining_ == 0) return {BodyStatus::Done, 0, {}, 0, {}};
  if (in.empty()) return {};
  const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size()));
  remaining_ -= k;
  return {BodyStatus::Data, k, in.substr(0, k), 0, {}};
}

void ChunkedBody::reset() noexcept {
  state_ = State::Size;
  size_ = total_ = 0;
  line_bytes_ = trailer_bytes_ = 0;
  error_ = {};
}

BodyStep ChunkedBody::fail(int status, std::string_view reason, std::size_t at) noexcept {
  state_ = State::Error;
  error_ = {BodyStatus::Error, 0, {}, status, reason};
  BodyStep s = error_;
  s.consumed = at;
  return s;
}

// The chunk-size line is over: data follows, or the trailer section.
void ChunkedBody::end_size_line() noexcept {
  line_bytes_ = 0;
  state_ = size_ == 0 ? State::TrailerStart : State::Data;
}

// Every line of a chunked body ends in CRLF (RFC 9112 7.1). The bare LF
// that a head's lines may end in (2.2) is refused here: a proxy in front
// that reads such a line differently (as part of a chunk extension, say)
// would frame the body, and so the next request, unlike this server.
constexpr const char* kBareLF = "bare LF in a chunked body (its lines end in CRLF)";

BodyStep ChunkedBody::step(std::string_view in) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const std::size_t n = in.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    // Chunk-size lines (with their extensions) and trailer lines are bounded.
    if (state_ <= State::SizeLF && ++line_bytes_ > limits_.max_request_line)
      return fail(400, "chunk-size line too long", i);
    if (state_ >= State::TrailerStart && state_ <= State::TrailerLF &&
        ++trailer_bytes_ > limits_.max_header_bytes)
      return fail(431, "trailer section too large", i);
    switch (state_) {
      case State::Size:
      case State::SizeMore: {
        const int d = hex_value(c);
        if (d >= 0) {
          if (size_ > (UINT64_MAX >> 4)) return fail(400, "chunk size overflows", i);
          size_ = size_ << 4 | static_cast<unsigned>(d);
          if (size_ > limits_.max_body - total_) return fail(413, "request body too large", i);
          state_ = State::SizeMore;
          ++i;
          break;
        }
        if (state_ == State::Size) return fail(400, "invalid chunk size", i);
        if (is_ows(c)) {
          state_ = State::SizeBWS;
        } else if (c == ';') {
          state_ = State::ExtPreName;
        } else if (c == '\r') {
          state_ = State::SizeLF;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else {
          return fail(400, "invalid chunk size", i);
        }
        ++i;
        break;
      }
      // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ), value a
      // token or a quoted-string (RFC 9112 7.1.1): whitespace only around
      // ';' and '=', each extension named, a value after each '='; read
      // and ignored.
      case State::SizeBWS:
      case State::ExtPostName:
      case State::ExtPostValue:
        if (c == ';') {
          state_ = State::ExtPreName;
        } else if (c == '=' && state_ == State::ExtPostName) {
          state_ = State::ExtPreValue;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else if (!is_ows(c)) {
          return fail(400, "whitespace in a chunk-size line, not around a ';' or '='", i);
        }
        ++i;
        break;
      case State::ExtPreName:
      case State::ExtPreValue:
        if (is_token(c)) {
          state_ = state_ == State::ExtPreName ? State::ExtName : State::ExtValue;
        } else if (c == '"' && state_ == State::ExtPreValue) {
          state_ = State::ExtQuoted;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else if (!is_ows(c)) {
          return fail(400, state_ == State::ExtPreName ? "chunk extension without a name" : "chunk extension without a value after '='", i);
        }
        ++i;
        break;
      case State::ExtName:
      case State::ExtValue:
      case State::ExtEndQuoted:
        if (is_token(c) && state_ != State::ExtEndQuoted) {
          // more of the name or the value
        } else if (c == '=' && state_ == State::ExtName) {
          state_ = State::ExtPreValue;
        } else if (c == ';') {
          state_ = State::ExtPreName;
        } else if (c == '\r') {
          state_ = State::SizeLF;
        } else if (is_ows(c)) {
          state_ = state_ == State::ExtName ? State::ExtPostName : State::ExtPostValue;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else {
          return fail(400, "invalid chunk extension", i);
        }
        ++i;
        break;
      case State::ExtQuoted:  // a ';' in here is not the next extension
        if (c == '"') {
          state_ = State::ExtEndQuoted;
        } else if (c == '\\') {
          state_ = State::ExtQuotedEsc;
        } else if (!is_field_byte(c)) {
          return fail(400, c == '\n' ? kBareLF : "control character in a chunk extension", i);
        }
        ++i;
        break;
      case State::ExtQuotedEsc:
        if (!is_field_byte(c)) return fail(400, c == '\n' ? kBareLF : "control character in a chunk extension", i);
        state_ = State::ExtQuoted;
        ++i;
        break;
      case State::SizeLF:
        if (c != '\n') return fail(400, "bare CR", i);
        end_size_line();
        ++i;
        break;
      case State::Data: {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(size_, n - i));
        size_ -= k;
        total_ += k;
        if (size_ == 0) state_ = State::DataEnd;
        return {BodyStatus::Data, i + k, in.substr(i, k), 0, {}};
      }
      case State::DataEnd:
        if (c == '\r') {
          state_ = State::DataLF;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else {
          return fail(400, "chunk data longer than its size", i);
        }
        ++i;
        break;
      case State::DataLF:
        if (c != '\n') return fail(400, "bare CR", i);
        state_ = State::Size;
        ++i;
        break;
      case State::TrailerStart:
        if (c == '\r') {
          state_ = State::TrailerEndLF;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else if (is_ows(c)) {
          return fail(400, "obs-fold in the trailer section", i);
        } else if (!is_token(c)) {
          return fail(400, "invalid trailer field", i);
        } else {
          state_ = State::TrailerName;
        }
        ++i;
        break;
      case State::TrailerName:  // a field line: name ":" value (RFC 9112 7.1.2, 5)
        if (c == ':') {
          state_ = State::Trailer;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else if (!is_token(c)) {
          return fail(400, "trailer field without a name and ':'", i);
        }
        ++i;
        break;
      case State::TrailerEndLF:
        if (c != '\n') return fail(400, "bare CR", i);
        state_ = State::Done;
        return {BodyStatus::Done, i + 1, {}, 0, {}};
      case State::Trailer:  // skipped, but no bare CR or control bytes
        if (c == '\r') {
          state_ = State::TrailerLF;
        } else if (c == '\n') {
          return fail(400, kBareLF, i);
        } else if (!is_field_byte(c)) {
          return fail(400, "control character in a trailer field", i);
        }
        ++i;
        break;
      case State::TrailerLF:
        if (c != '\n') return fail(400, "bare CR", i);
        state_ = State::TrailerStart;
        ++i;
        break;
      case State::Done:
        return {BodyStatus::Done, 0, {}, 0, {}};
      case State::Error:
        return error_;
    }
  }
  if (state_ == State::Done) return {BodyStatus::Done, 0, {}, 0, {}};
  if (state_ == State::Error) return error_;
  return {BodyStatus::NeedMore, i, {}, 0, {}};
}

}  // namespace httpd
