// http_parser.hpp -- incremental HTTP/1.1 request-head parser and the two
// request-body framings (Content-Length, chunked).
//
// RequestParser reads the request line and the header section from a buffer
// that grows as bytes arrive: each call to parse() is given everything
// received for this request so far (the earlier bytes unchanged, the buffer
// may have moved), resumes where the last call stopped, and answers NeedMore,
// Done (with the size of the head) or Error (with the status to answer and a
// short reason). It never reads past the view it is given. Header names and
// values are kept as offsets, so the accessors return views into the buffer
// last passed to parse(): it must stay alive and unchanged while they are used.
//
// Limits: request line, header section bytes, header count and body size
// (Limits below). The header slots are allocated once, when the parser is
// built; parse() and reset() do not allocate.
//
// Not handled here: obs-fold (rejected with 400), HTTP/0.9 (400), HTTP/2
// (505), CONNECT's authority-form target (400), transfer codings other than
// chunked (501). Which methods the server implements is the server's choice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace httpd {

inline constexpr std::size_t kDefaultMaxRequestLine = 8 * 1024;   // with its line end
inline constexpr std::size_t kDefaultMaxHeaderBytes = 16 * 1024;  // with the empty line
inline constexpr std::size_t kDefaultMaxHeaderCount = 100;
inline constexpr std::uint64_t kDefaultMaxBody = 1024 * 1024;

struct Limits {
  std::size_t max_request_line = kDefaultMaxRequestLine;  // over it: 414
  std::size_t max_header_bytes = kDefaultMaxHeaderBytes;  // over it: 431 (trailers too)
  std::size_t max_header_count = kDefaultMaxHeaderCount;  // over it: 431
  std::uint64_t max_body = kDefaultMaxBody;               // over it: 413
};

enum class ParseStatus : std::uint8_t { NeedMore, Done, Error };

struct ParseResult {
  ParseStatus status = ParseStatus::NeedMore;
  std::size_t consumed = 0;  // Done: bytes of the head, leading empty lines included
  int http_status = 0;       // Error: the status to answer with (400, 413, 414, 431, 501,
                             // 505; 500 when given fewer bytes than the call before)
  std::string_view reason;   // Error: short static text
};

enum class Method : std::uint8_t { Get, Head, Post, Put, Delete, Options, Other };
enum class TargetForm : std::uint8_t { Origin, Absolute, Asterisk };
enum class BodyKind : std::uint8_t { None, Length, Chunked };

struct Header {
  std::string_view name;
  std::string_view value;  // optional whitespace around it removed
};

// ASCII case-insensitive equality.
bool iequals(std::string_view a, std::string_view b) noexcept;

class RequestParser {
 public:
  explicit RequestParser(const Limits& limits = {});

  // `buffered`: every byte received for this request so far, starting at its
  // first byte. Once Done or Error, the same answer is given until reset().
  ParseResult parse(std::string_view buffered);

  // Ready for the next request; keeps the limits and the header slots. The
  // next request's bytes start `consumed` (of the Done result) plus the body
  // into the old buffer: pass parse() the view starting there.
  void reset() noexcept;

  const Limits& limits() const noexcept { return limits_; }

  // Valid after Done.
  std::string_view method() const noexcept { return view(method_off_, method_len_); }
  Method method_id() const noexcept { return method_id_; }
  std::string_view target() const noexcept { return view(target_off_, target_len_); }
  TargetForm target_form() const noexcept { return form_; }
  // Origin-form: the target. Absolute-form: what follows the authority ("/"
  // when nothing, or only a query, does). Asterisk-form: "*".
  std::string_view path() const noexcept;
  // Absolute-form: the target's authority (RFC 9112 3.2.2), else the Host
  // field ("" when an HTTP/1.0 request has none).
  std::string_view host() const noexcept;
  int version() const noexcept { return version_; }  // 10 or 11
  bool keep_alive() const noexcept { return keep_alive_; }
  BodyKind body_kind() const noexcept { return body_; }
  std::uint64_t content_length() const noexcept { return content_length_; }
  bool expect_continue() const noexcept { return expect_continue_; }

  std::size_t header_count() const noexcept { return header_count_; }
  Header header_at(std::size_t i) const noexcept;
  // The first field named `name` (any case), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const noexcept;
  // The field named `name` when exactly one line has it; nullopt when
  // none does or several do (a field of one value, such as a date, given
  // twice is invalid: RFC 9110 5.3, 13.1.3, 13.1.4).
  std::optional<std::string_view> only_header(std::string_view name) const noexcept;

 private:
  enum class State : std::uint8_t {
    Start, StartLF, Method, Target, Version, RequestLF,  // request line
    FieldStart, EndLF, Name, ValueOWS, Value, ValueLF,   // header section
    Done, Error,
  };
  struct Slot {  // offsets into the head, which the limits keep under 4 GiB
    std::uint32_t name_off, name_len, value_off, value_len;
  };

  std::string_view view(std::size_t off, std::size_t len) const noexcept {
    return data_.substr(off, len);
  }
  ParseResult fail(int status, std::string_view reason) noexcept;
  bool reject(int status, std::string_view reason) noexcept;  // fail(), then false
  bool finish_request_line(std::size_t end) noexcept;
  bool store_field() noexcept;
  bool finish_head() noexcept;
  ParseResult limit_error() noexcept;

  Limits limits_;
  const Slot& slot(std::size_t i) const noexcept {
    return i < kInlineSlots ? inline_slots_[i] : more_slots_[i - kInlineSlots];
  }

  // The first fields' slots live in the parser; a head with more fields
  // (up to max_header_count) spills into more_slots_.
  static constexpr std::size_t kInlineSlots = 16;
  std::array<Slot, kInlineSlots> inline_slots_{};
  std::vector<Slot> more_slots_;
  std::string_view data_;
  State state_ = State::Start;
  std::size_t pos_ = 0;         // next byte to look at
  std::size_t line_start_ = 0;  // request line start (limit base)
  std::size_t fields_start_ = 0;
  std::size_t name_off_ = 0, name_end_ = 0, value_off_ = 0, value_end_ = 0;
  unsigned vpos_ = 0, major_ = 0, minor_ = 0;
  std::size_t header_count_ = 0;
  ParseResult result_;  // the Done or Error answer, repeated

  std::size_t method_off_ = 0, method_len_ = 0, target_off_ = 0, target_len_ = 0;
  std::size_t path_off_ = 0, path_len_ = 0, authority_off_ = 0, authority_len_ = 0;
  std::size_t host_off_ = 0, host_len_ = 0;
  Method method_id_ = Method::Other;
  TargetForm form_ = TargetForm::Origin;
  bool path_is_root_ = false;  // absolute-form without a path
  int version_ = 11;
  bool keep_alive_ = false;
  BodyKind body_ = BodyKind::None;
  std::uint64_t content_length_ = 0;
  bool expect_continue_ = false;
};

// ---- request bodies ------------------------------------------------------

enum class BodyStatus : std::uint8_t { Data, NeedMore, Done, Error };

// One step of a body decoder over `in`, the bytes not yet given to it.
struct BodyStep {
  BodyStatus status = BodyStatus::NeedMore;
  std::size_t consumed = 0;  // bytes of `in` used by this step (the data included)
  std::string_view data;     // Data: payload bytes, a view into `in`
  int http_status = 0;       // Error: 400, 413 or 431
  std::string_view reason;
};

// What decode_body() did over a whole input.
struct BodyResult {
  BodyStatus status = BodyStatus::NeedMore;  // NeedMore, Done or Error
  std::size_t consumed = 0;  // Done: the next request starts here in `in`
  int http_status = 0;
  std::string_view reason;
};

// The body of a request with Content-Length: exactly `length` bytes.
class ContentLengthBody {
 public:
  explicit ContentLengthBody(std::uint64_t length = 0) noexcept : remaining_(length) {}
  void reset(std::uint64_t length) noexcept { remaining_ = length; }
  BodyStep step(std::string_view in) noexcept;
  std::uint64_t remaining() const noexcept { return remaining_; }

 private:
  std::uint64_t remaining_;
};

// A chunked body (RFC 9112 7.1): chunk-size in hex (overflow checked),
// extensions ignored, trailer fields skipped, every line ended by CRLF (a
// bare LF is a 400). The payload is bounded by
// Limits::max_body (413), each chunk-size line by max_request_line (400),
// the trailer section by max_header_bytes (431). Input may arrive in any
// pieces: the decoder keeps its place byte by byte and buffers nothing.
class ChunkedBody {
 public:
  explicit ChunkedBody(const Limits& limits = {}) noexcept : limits_(limits) {}
  void reset() noexcept;
  BodyStep step(std::string_view in) noexcept;
  std::uint64_t body_size() const noexcept { return total_; }  // payload so far

 private:
  enum class State : std::uint8_t {
    Size, SizeMore, SizeBWS, ExtPreName, ExtName, ExtPostName, ExtPreValue, ExtValue, ExtQuoted, ExtQuotedEsc,
    ExtEndQuoted, ExtPostValue, SizeLF, Data, DataEnd, DataLF,
    TrailerStart, TrailerEndLF, TrailerName, Trailer, TrailerLF, Done, Error,
  };
  BodyStep fail(int status, std::string_view reason, std::size_t at) noexcept;
  void end_size_line() noexcept;

  Limits limits_;
  State state_ = State::Size;
  std::uint64_t size_ = 0;  // current chunk: size, then what is left of it
  std::uint64_t total_ = 0;
  std::size_t line_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;
  BodyStep error_;
};

// Runs a decoder over `in`, passing each piece of payload to sink(string_view).
template <class Decoder, class Sink>
BodyResult decode_body(Decoder& decoder, std::string_view in, Sink&& sink) {
  std::size_t used = 0;
  for (;;) {
    BodyStep s = decoder.step(in.substr(used));
    used += s.consumed;
    if (s.status == BodyStatus::Data) {
      sink(s.data);
      continue;
    }
    return {s.status, used, s.http_status, s.reason};
  }
}

}  // namespace httpd
