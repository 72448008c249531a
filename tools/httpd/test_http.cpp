// test_http.cpp -- GoogleTest tests of the request parser and body decoders
// (http_parser), the response head, dates, MIME types and ranges
// (http_response), and request paths and opening beneath a root (http_path),
// ending with a fixed-seed fuzz loop over all three.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <random>
#include <string>
#include <vector>

#include "http_parser.hpp"
#include "http_path.hpp"
#include "http_response.hpp"

using namespace httpd;
using namespace std::literals;

namespace {

// ---- helpers ---------------------------------------------------------------

// Everything a parse produced, copied out of the buffer.
struct Outcome {
  ParseStatus status = ParseStatus::NeedMore;
  std::size_t consumed = 0;
  int http_status = 0;
  std::string method, target, path, host;
  int version = 0;
  bool keep_alive = false;
  BodyKind body = BodyKind::None;
  std::uint64_t content_length = 0;
  bool expect_continue = false;
  std::vector<std::pair<std::string, std::string>> headers;

  bool operator==(const Outcome&) const = default;
};

Outcome capture(const RequestParser& p, const ParseResult& r) {
  Outcome o;
  o.status = r.status;
  o.consumed = r.consumed;
  o.http_status = r.http_status;
  if (r.status == ParseStatus::Done) {
    o.method = p.method();
    o.target = p.target();
    o.path = p.path();
    o.host = p.host();
    o.version = p.version();
    o.keep_alive = p.keep_alive();
    o.body = p.body_kind();
    o.content_length = p.content_length();
    o.expect_continue = p.expect_continue();
    for (std::size_t i = 0; i < p.header_count(); ++i) {
      const Header h = p.header_at(i);
      o.headers.emplace_back(h.name, h.value);
    }
  }
  return o;
}

// Parses `req` whole, from an exactly sized heap copy (so a read past it is
// caught by AddressSanitizer).
Outcome parse_whole(std::string_view req, const Limits& limits = {}) {
  RequestParser p(limits);
  auto buf = std::make_unique<char[]>(req.size());
  std::memcpy(buf.get(), req.data(), req.size());
  const ParseResult r = p.parse(std::string_view(buf.get(), req.size()));
  if (r.status == ParseStatus::Error) {
    EXPECT_FALSE(r.reason.empty());
  }
  return capture(p, r);
}

// Feeds `req` as growing prefixes ending at each of `cuts` and then at its
// end, each prefix in a fresh buffer of its own (the buffer moves between
// calls), and stops at the first answer that is not NeedMore.
Outcome parse_pieces(std::string_view req, const std::vector<std::size_t>& cuts,
                     const Limits& limits = {}) {
  RequestParser p(limits);
  std::vector<std::size_t> ends = cuts;
  ends.push_back(req.size());
  std::unique_ptr<char[]> buf;
  for (std::size_t end : ends) {
    buf = std::make_unique<char[]>(end);
    std::memcpy(buf.get(), req.data(), end);
    const ParseResult r = p.parse(std::string_view(buf.get(), end));
    if (r.status != ParseStatus::NeedMore) return capture(p, r);
  }
  return capture(p, ParseResult{});
}

// One byte more per call.
Outcome parse_bytewise(std::string_view req, const Limits& limits = {}) {
  std::vector<std::size_t> cuts;
  for (std::size_t k = 0; k < req.size(); ++k) cuts.push_back(k);
  return parse_pieces(req, cuts, limits);
}

int error_of(std::string_view req, const Limits& limits = {}) {
  const Outcome o = parse_whole(req, limits);
  EXPECT_EQ(o.status, ParseStatus::Error) << req;
  return o.http_status;
}

Outcome done(std::string_view req, const Limits& limits = {}) {
  const Outcome o = parse_whole(req, limits);
  EXPECT_EQ(o.status, ParseStatus::Done) << req << " -> " << o.http_status;
  return o;
}

std::string get(std::string_view extra = "") {
  return "GET /x HTTP/1.1\r\nHost: h\r\n"s + std::string(extra) + "\r\n";
}

// The whole payload of a chunked body fed in the pieces ending at `cuts`.
struct Decoded {
  BodyStatus status = BodyStatus::NeedMore;
  std::size_t consumed = 0;
  int http_status = 0;
  std::string body;
  bool operator==(const Decoded&) const = default;
};

template <class Decoder>
Decoded decode_pieces(Decoder& d, std::string_view in, std::vector<std::size_t> cuts) {
  Decoded out;
  cuts.push_back(in.size());
  std::size_t from = 0;
  for (std::size_t end : cuts) {
    if (end < from) continue;
    const std::string piece(in.substr(from, end - from));  // its own buffer
    auto buf = std::make_unique<char[]>(piece.size());
    std::memcpy(buf.get(), piece.data(), piece.size());
    const BodyResult r = decode_body(d, std::string_view(buf.get(), piece.size()),
                                     [&](std::string_view s) { out.body.append(s); });
    out.status = r.status;
    out.http_status = r.http_status;
    out.consumed += r.consumed;
    if (r.status != BodyStatus::NeedMore) return out;
    EXPECT_EQ(r.consumed, piece.size());
    from = end;
  }
  return out;
}

Decoded dechunk(std::string_view in, const Limits& limits = {}, std::vector<std::size_t> cuts = {}) {
  ChunkedBody d(limits);
  return decode_pieces(d, in, std::move(cuts));
}

const std::vector<std::string>& sample_requests() {
  static const std::vector<std::string> v = {
      "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
      "GET /index.html?q=1&r=%20 HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: curl/8.0\r\n"
      "Accept: */*\r\nConnection: keep-alive\r\n\r\n",
      "HEAD /a/b HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
      "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\nhello world",
      "PUT /f HTTP/1.1\nHost: h\nTransfer-Encoding: chunked\n\n5\r\nhello\r\n0\r\n\r\n",
      "\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET http://example.com/p?x HTTP/1.1\r\nHost: other\r\nX-Empty:\r\nX-Tab:\tv\t \r\n\r\n",
      "DELETE /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-Obs: caf\xc3\xa9\r\n\r\n",
      "PROPFIND /dav HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n",
      "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\n Folded: x\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
  };
  return v;
}

// ---- request line ------------------------------------------------------------

TEST(Parser, SimpleGet) {
  const std::string req = "GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
  RequestParser p;
  const ParseResult r = p.parse(req);
  ASSERT_EQ(r.status, ParseStatus::Done);
  EXPECT_EQ(r.consumed, req.size());
  EXPECT_EQ(p.method(), "GET");
  EXPECT_EQ(p.method_id(), Method::Get);
  EXPECT_EQ(p.target(), "/index.html");
  EXPECT_EQ(p.path(), "/index.html");
  EXPECT_EQ(p.target_form(), TargetForm::Origin);
  EXPECT_EQ(p.version(), 11);
  EXPECT_EQ(p.host(), "example.com");
  EXPECT_TRUE(p.keep_alive());
  EXPECT_EQ(p.body_kind(), BodyKind::None);
  EXPECT_FALSE(p.expect_continue());
  ASSERT_EQ(p.header_count(), 2u);
  EXPECT_EQ(p.header_at(0).name, "Host");
  EXPECT_EQ(p.header_at(1).value, "*/*");
  EXPECT_EQ(p.header_at(2).name, "");
}

TEST(Parser, NeedMoreUntilTheEmptyLine) {
  const std::string req = get();
  RequestParser p;
  for (std::size_t k = 0; k < req.size(); ++k) {
    const ParseResult r = p.parse(std::string_view(req).substr(0, k));
    ASSERT_EQ(r.status, ParseStatus::NeedMore) << k;
  }
  EXPECT_EQ(p.parse(req).status, ParseStatus::Done);
}

TEST(Parser, HeaderLookupAndTrimming) {
  const Outcome o = done(get("X-A:   spaced value \t\r\nx-b:v\r\nEmpty:\r\nTabs:\t\tin\tside\t\r\n"));
  RequestParser p;
  const std::string req = get("X-A:   spaced value \t\r\nx-b:v\r\nEmpty:\r\nTabs:\t\tin\tside\t\r\n");
  ASSERT_EQ(p.parse(req).status, ParseStatus::Done);
  EXPECT_EQ(p.header("x-a").value(), "spaced value");
  EXPECT_EQ(p.header("X-B").value(), "v");
  EXPECT_EQ(p.header("HOST").value(), "h");
  ASSERT_TRUE(p.header("empty").has_value());
  EXPECT_EQ(p.header("empty").value(), "");
  EXPECT_EQ(p.header("tabs").value(), "in\tside");
  EXPECT_FALSE(p.header("missing").has_value());
  EXPECT_FALSE(p.header("x-").has_value());
  EXPECT_EQ(o.headers.size(), 5u);
}

TEST(Parser, FirstOfRepeatedFields) {
  RequestParser p;
  const std::string req = get("Accept: a\r\naccept: b\r\n");
  ASSERT_EQ(p.parse(req).status, ParseStatus::Done);
  EXPECT_EQ(p.header("Accept").value(), "a");
}

TEST(Parser, BareLFLineEnds) {
  const Outcome o = done("GET /a HTTP/1.1\nHost: h\nX: y\n\n");
  EXPECT_EQ(o.target, "/a");
  EXPECT_EQ(o.headers.size(), 2u);
  EXPECT_EQ(o.headers[1].second, "y");
  EXPECT_EQ(o.consumed, 30u);
}

TEST(Parser, MixedLineEnds) {
  const Outcome o = done("GET /a HTTP/1.1\r\nHost: h\nX: y\r\n\n");
  EXPECT_EQ(o.headers.size(), 2u);
}

TEST(Parser, LeadingEmptyLinesSkipped) {
  const std::string req = "\r\n\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  const Outcome o = done(req);
  EXPECT_EQ(o.method, "GET");
  EXPECT_EQ(o.consumed, req.size());
}

TEST(Parser, TooManyLeadingEmptyLines) {
  Limits l;
  l.max_request_line = 64;
  EXPECT_EQ(error_of(std::string(100, '\n') + get(), l), 400);
  EXPECT_EQ(done(std::string(10, '\n') + get(), l).method, "GET");
}

TEST(Parser, Methods) {
  const std::pair<const char*, Method> cases[] = {
      {"GET", Method::Get},          {"HEAD", Method::Head},       {"POST", Method::Post},
      {"PUT", Method::Put},          {"DELETE", Method::Delete},   {"OPTIONS", Method::Options},
      {"PROPFIND", Method::Other},   {"get", Method::Other},       {"M-SEARCH", Method::Other},
      {"X!#$%&'*+-.^_`|~1", Method::Other},
  };
  for (const auto& [name, id] : cases) {
    RequestParser p;
    const std::string req = name + " /x HTTP/1.1\r\nHost: h\r\n\r\n"s;
    ASSERT_EQ(p.parse(req).status, ParseStatus::Done) << name;
    EXPECT_EQ(p.method(), name);
    EXPECT_EQ(p.method_id(), id) << name;
  }
}

TEST(Parser, BadMethods) {
  EXPECT_EQ(error_of("G(ET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of(" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("G\xc3\x89T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET\r\n\r\n"), 400);
}

TEST(Parser, RequestTargets) {
  EXPECT_EQ(error_of("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);       // empty target
  EXPECT_EQ(error_of("GET /  HTTP/1.1\r\nHost: h\r\n\r\n"), 400);       // two spaces
  EXPECT_EQ(error_of("GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);   // control byte
  EXPECT_EQ(error_of("GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n"), 400);   // DEL
  EXPECT_EQ(error_of("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);  // raw UTF-8
  EXPECT_EQ(error_of("GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET a/b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);      // not a form
  EXPECT_EQ(error_of("GET / \r\nHost: h\r\n\r\n"), 400);                // no version
  EXPECT_EQ(error_of("GET /\r\n\r\n"), 400);                            // HTTP/0.9
  EXPECT_EQ(error_of("CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(done(get()).target, "/x");
  EXPECT_EQ(done("GET /a%20b?c=d&e=/f#g HTTP/1.1\r\nHost: h\r\n\r\n").target, "/a%20b?c=d&e=/f#g");
}

TEST(Parser, AbsoluteForm) {
  RequestParser p;
  std::string req = "GET http://example.com:81/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n";
  ASSERT_EQ(p.parse(req).status, ParseStatus::Done);
  EXPECT_EQ(p.target_form(), TargetForm::Absolute);
  EXPECT_EQ(p.path(), "/p/q?x=1");
  EXPECT_EQ(p.host(), "example.com:81");  // the target's authority wins over Host
  EXPECT_EQ(p.header("host").value(), "other");

  const Outcome bare = done("GET https://h HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(bare.path, "/");
  EXPECT_EQ(done("GET https://h?q HTTP/1.1\r\nHost: h\r\n\r\n").path, "/");
  EXPECT_EQ(error_of("GET http:/x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);       // no authority
  EXPECT_EQ(error_of("GET http://u@h/x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);    // userinfo
  EXPECT_EQ(error_of("GET 1http://h/x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET http://h/x HTTP/1.1\r\n\r\n"), 400);  // Host still required
}

TEST(Parser, AsteriskOnlyForOptions) {
  RequestParser p;
  const std::string req = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
  ASSERT_EQ(p.parse(req).status, ParseStatus::Done);
  EXPECT_EQ(p.target_form(), TargetForm::Asterisk);
  EXPECT_EQ(p.path(), "*");
  EXPECT_EQ(error_of("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("options * HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("OPTIONS ** HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(Parser, Versions) {
  EXPECT_EQ(done("GET / HTTP/1.0\r\n\r\n").version, 10);
  EXPECT_EQ(done("GET / HTTP/1.1\r\nHost: h\r\n\r\n").version, 11);
  EXPECT_EQ(done("GET / HTTP/1.9\r\nHost: h\r\n\r\n").version, 11);  // RFC 9110 2.5
  EXPECT_EQ(error_of("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(error_of("GET / HTTP/0.9\r\n\r\n"), 505);
  EXPECT_EQ(error_of("GET / HTTP/3.1\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(error_of("GET / HTTP/1.10\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/11\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / http/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTPS/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.x\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/\r\nHost: h\r\n\r\n"), 400);
}

TEST(Parser, BareCR) {
  EXPECT_EQ(error_of("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\n\rx"), 400);
}

TEST(Parser, FieldSyntax) {
  EXPECT_EQ(error_of(get(" Lead: x\r\n")), 400);                      // obs-fold
  EXPECT_EQ(error_of(get("X: a\r\n\tcontinued\r\n")), 400);           // obs-fold
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), 400);     // space before first field
  EXPECT_EQ(error_of(get("Name : x\r\n")), 400);                     // space before colon
  EXPECT_EQ(error_of(get(": x\r\n")), 400);                          // empty name
  EXPECT_EQ(error_of(get("Na(me: x\r\n")), 400);
  EXPECT_EQ(error_of(get("Na\xc3\xa9: x\r\n")), 400);
  EXPECT_EQ(error_of(get("NoColon\r\n")), 400);
  EXPECT_EQ(error_of(get("X: a\x00 b\r\n"s)), 400);                   // NUL
  EXPECT_EQ(error_of(get("X: a\x01\r\n")), 400);
  EXPECT_EQ(error_of(get("X: a\x7f\r\n")), 400);
  EXPECT_EQ(error_of(get("X: a\x1b[31m\r\n")), 400);
  const Outcome ok = done(get("X: a\tb \xff\x80 c\r\nY:\r\nZ: \t \r\n"));
  EXPECT_EQ(ok.headers[1].second, "a\tb \xff\x80 c");
  EXPECT_EQ(ok.headers[2].second, "");
  EXPECT_EQ(ok.headers[3].second, "");
}

// ---- limits ------------------------------------------------------------------

TEST(Parser, RequestLineLimit) {
  const std::string head = "GET /";
  const std::string tail = " HTTP/1.1\r\n";
  const std::size_t fill = kDefaultMaxRequestLine - head.size() - tail.size();
  const std::string at_limit = head + std::string(fill, 'a') + tail + "Host: h\r\n\r\n";
  EXPECT_EQ(done(at_limit).target.size(), fill + 1);
  const std::string over = head + std::string(fill + 1, 'a') + tail + "Host: h\r\n\r\n";
  EXPECT_EQ(error_of(over), 414);
  // Known to be too long before the line ends.
  EXPECT_EQ(error_of("GET /" + std::string(kDefaultMaxRequestLine, 'a')), 414);
  // A method that long is none this server implements (RFC 9112 3): 501.
  EXPECT_EQ(error_of(std::string(kDefaultMaxRequestLine + 1, 'G')), 501);
  Limits l;
  l.max_request_line = 32;
  EXPECT_EQ(error_of("GET /" + std::string(40, 'x') + " HTTP/1.1\r\nHost: h\r\n\r\n", l), 414);
  EXPECT_EQ(done("GET /" + std::string(10, 'x') + " HTTP/1.1\r\nHost: h\r\n\r\n", l).version, 11);
}

TEST(Parser, HeaderBytesLimit) {
  // The header section counts from the first field line through the empty line.
  const std::string start = "GET / HTTP/1.1\r\n";
  const std::string host = "Host: h\r\n";
  const std::string name = "X: ";
  const std::size_t fill = kDefaultMaxHeaderBytes - host.size() - name.size() - 2 - 2;
  const std::string at_limit = start + host + name + std::string(fill, 'v') + "\r\n\r\n";
  EXPECT_EQ(done(at_limit).consumed, at_limit.size());
  const std::string over = start + host + name + std::string(fill + 1, 'v') + "\r\n\r\n";
  EXPECT_EQ(error_of(over), 431);
  EXPECT_EQ(error_of(start + host + "X: " + std::string(kDefaultMaxHeaderBytes, 'v')), 431);
  Limits l;
  l.max_header_bytes = 64;
  EXPECT_EQ(error_of(get("A: " + std::string(30, 'a') + "\r\nB: " + std::string(30, 'b') + "\r\n"), l), 431);
}

// Fields past the parser's inline slots, and a parser reused for a request
// with fewer fields than the one before, keep every name and value.
TEST(Parser, ManyFieldsKeepTheirValuesAcrossRequests) {
  RequestParser p(Limits{});
  for (int fields : {40, 20, 17, 3, 60}) {
    std::string req = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < fields; ++i)
      req += "F" + std::to_string(i) + ": value-" + std::to_string(fields * 1000 + i) + "\r\n";
    req += "Host: h\r\n\r\n";
    const ParseResult r = p.parse(req);
    ASSERT_EQ(r.status, ParseStatus::Done) << fields << ": " << r.reason;
    ASSERT_EQ(p.header_count(), std::size_t(fields) + 1);
    EXPECT_EQ(p.host(), "h");
    for (int i = 0; i < fields; ++i) {
      const std::string name = "F" + std::to_string(i), value = "value-" + std::to_string(fields * 1000 + i);
      EXPECT_EQ(p.header_at(i).name, name);
      EXPECT_EQ(p.header_at(i).value, value);
      EXPECT_EQ(p.header(name).value_or("missing"), value);
    }
    EXPECT_FALSE(p.header("F" + std::to_string(fields)).has_value());
    p.reset();
  }
}

// The parser keeps 32-bit offsets: limits beyond them are refused by name.
TEST(Parser, LimitsBeyondOffsetsAreRefused) {
  Limits l;
  l.max_header_bytes = std::size_t(1) << 33;
  try {
    RequestParser p(l);
    FAIL() << "a parser accepted max_header_bytes of 8 GiB";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_header_bytes"), std::string::npos) << e.what();
  }
  l.max_header_bytes = std::numeric_limits<std::size_t>::max();  // no overflow in the check
  EXPECT_THROW(RequestParser{l}, std::invalid_argument);
}

TEST(Parser, HeaderCountLimit) {
  std::string fields;
  for (std::size_t i = 1; i < kDefaultMaxHeaderCount; ++i) fields += "X" + std::to_string(i) + ": v\r\n";
  const Outcome ok = done(get(fields));  // Host + 99 = 100
  EXPECT_EQ(ok.headers.size(), kDefaultMaxHeaderCount);
  EXPECT_EQ(error_of(get(fields + "One-More: v\r\n")), 431);
  Limits l;
  l.max_header_count = 2;
  EXPECT_EQ(done(get("A: 1\r\n"), l).headers.size(), 2u);
  EXPECT_EQ(error_of(get("A: 1\r\nB: 2\r\n"), l), 431);
}

// ---- header semantics --------------------------------------------------------

TEST(Parser, Host) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nX: y\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: u@h\r\n\r\n"), 400);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h/x\r\n\r\n"), 400);
  EXPECT_EQ(done("GET / HTTP/1.0\r\n\r\n").host, "");
  EXPECT_EQ(done("GET / HTTP/1.1\r\nHOST:  [::1]:8080 \r\n\r\n").host, "[::1]:8080");
  EXPECT_EQ(done("GET / HTTP/1.1\r\nHost:\r\n\r\n").host, "");
}

// RFC 9112 3.2: a Host field whose value is not uri-host [ ":" port ] is
// a 400, and so is such an absolute-form authority.
TEST(Parser, HostSyntax) {
  for (const char* h : {"a:b:c", "x:port", "x:80:80", "[::1", "a]b[", "[::1]x", "[]", "[v1]", "[zz::1]", "x%zz", "x%4",
                        "h[1]", "[::1]:8x",
                        // an empty host with a port: an "http" URI's host may
                        // not be empty (RFC 9110 4.2.1), and a Host field is
                        // that authority or empty (7.2)
                        ":80", ":"}) {
    EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: "s + h + "\r\n\r\n"), 400) << h;
    EXPECT_EQ(error_of("GET http://"s + h + "/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400) << h;
  }
  for (const char* h : {"h", "h:", "h:8080", "127.0.0.1:80", "[::1]", "[::1]:443", "[::ffff:1.2.3.4]",
                        "[v1.x:y]", "ex%41mple.com", "a-b.c_d~e!$&'()*+,;="}) {
    EXPECT_EQ(done("GET / HTTP/1.1\r\nHost: "s + h + "\r\n\r\n").host, h);
    EXPECT_EQ(done("GET http://"s + h + "/ HTTP/1.1\r\nHost: h\r\n\r\n").host, h);
  }
}

TEST(Parser, ContentLength) {
  Outcome o = done(get("Content-Length: 42\r\n"));
  EXPECT_EQ(o.body, BodyKind::Length);
  EXPECT_EQ(o.content_length, 42u);
  o = done(get("Content-Length: 0\r\n"));
  EXPECT_EQ(o.body, BodyKind::None);
  EXPECT_EQ(o.content_length, 0u);
  EXPECT_EQ(done(get("Content-Length: 007\r\n")).content_length, 7u);
  EXPECT_EQ(done(get("Content-Length: 5\r\ncontent-length: 5\r\n")).content_length, 5u);
  EXPECT_EQ(done(get("Content-Length: 5, 5,5\r\n")).content_length, 5u);
  EXPECT_EQ(done(get("Content-Length: " + std::to_string(kDefaultMaxBody) + "\r\n")).content_length,
            kDefaultMaxBody);

  EXPECT_EQ(error_of(get("Content-Length: +5\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: -1\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 5 5\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 0x10\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 1e3\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length:\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: ,\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 5, 6\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 5\r\nContent-Length: 6\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 18446744073709551616\r\n")), 400);  // 2^64
  EXPECT_EQ(error_of(get("Content-Length: 99999999999999999999999999\r\n")), 400);
  EXPECT_EQ(error_of(get("Content-Length: 18446744073709551615\r\n")), 413);
  EXPECT_EQ(error_of(get("Content-Length: " + std::to_string(kDefaultMaxBody + 1) + "\r\n")), 413);
  Limits l;
  l.max_body = 10;
  EXPECT_EQ(error_of(get("Content-Length: 11\r\n"), l), 413);
  EXPECT_EQ(done(get("Content-Length: 10\r\n"), l).content_length, 10u);
}

TEST(Parser, TransferEncoding) {
  EXPECT_EQ(done(get("Transfer-Encoding: chunked\r\n")).body, BodyKind::Chunked);
  EXPECT_EQ(done(get("transfer-encoding: CHUNKED\r\n")).body, BodyKind::Chunked);
  EXPECT_EQ(done(get("Transfer-Encoding: ,chunked ,\r\n")).body, BodyKind::Chunked);
  EXPECT_EQ(error_of(get("Transfer-Encoding: gzip, chunked\r\n")), 501);
  EXPECT_EQ(error_of(get("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")), 501);
  EXPECT_EQ(error_of(get("Transfer-Encoding: gzip\r\n")), 501);
  EXPECT_EQ(error_of(get("Transfer-Encoding: identity\r\n")), 501);
  EXPECT_EQ(error_of(get("Transfer-Encoding: chunked;q=1\r\n")), 501);
  EXPECT_EQ(error_of(get("Transfer-Encoding: chunked, gzip\r\n")), 400);
  EXPECT_EQ(error_of(get("Transfer-Encoding: chunked, chunked\r\n")), 400);
  EXPECT_EQ(error_of(get("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(error_of(get("Transfer-Encoding:\r\n")), 400);
  // Request smuggling guards (RFC 9112 6.1, 6.3).
  EXPECT_EQ(error_of(get("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")), 400);
  EXPECT_EQ(error_of(get("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n")), 400);
  EXPECT_EQ(error_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  EXPECT_EQ(error_of(get("Transfer-Encoding: xchunked\r\n")), 501);
}

TEST(Parser, KeepAlive) {
  EXPECT_TRUE(done(get()).keep_alive);
  EXPECT_FALSE(done(get("Connection: close\r\n")).keep_alive);
  EXPECT_FALSE(done(get("Connection: Keep-Alive, CLOSE\r\n")).keep_alive);
  EXPECT_FALSE(done(get("Connection: upgrade\r\nConnection: close\r\n")).keep_alive);
  EXPECT_TRUE(done(get("Connection: closed\r\n")).keep_alive);
  EXPECT_TRUE(done(get("Connection: upgrade, keep-alive\r\n")).keep_alive);
  EXPECT_FALSE(done("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(done("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
  EXPECT_TRUE(done("GET / HTTP/1.0\r\nConnection: te ,  KEEP-ALIVE\r\n\r\n").keep_alive);
  EXPECT_FALSE(done("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
  EXPECT_FALSE(done("GET / HTTP/1.0\r\nConnection: keep-alives\r\n\r\n").keep_alive);
}

TEST(Parser, ExpectContinue) {
  EXPECT_TRUE(done(get("Expect: 100-continue\r\nContent-Length: 3\r\n")).expect_continue);
  EXPECT_TRUE(done(get("Expect: 100-Continue\r\n")).expect_continue);
  EXPECT_FALSE(done(get("Expect: 100-continued\r\n")).expect_continue);
  EXPECT_FALSE(done(get()).expect_continue);
  EXPECT_FALSE(done("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").expect_continue);
}

// ---- call protocol -------------------------------------------------------------

TEST(Parser, AnswersRepeatUntilReset) {
  RequestParser p;
  const std::string req = get();
  const ParseResult a = p.parse(req);
  const ParseResult b = p.parse(req + "GET /next");
  EXPECT_EQ(a.status, ParseStatus::Done);
  EXPECT_EQ(b.status, ParseStatus::Done);
  EXPECT_EQ(a.consumed, b.consumed);

  RequestParser e;
  const ParseResult x = e.parse("GET / HTTP/9.9\r\n"s);
  const ParseResult y = e.parse("GET / HTTP/9.9\r\nHost: h\r\n\r\n"s);
  EXPECT_EQ(x.status, ParseStatus::Error);
  EXPECT_EQ(y.status, ParseStatus::Error);
  EXPECT_EQ(x.http_status, 505);
  EXPECT_EQ(y.http_status, 505);
  e.reset();
  EXPECT_EQ(e.parse(req).status, ParseStatus::Done);
  EXPECT_EQ(e.target(), "/x");
}

TEST(Parser, ShrunkenBufferIsAnError) {
  RequestParser p;
  const std::string req = get();
  ASSERT_EQ(p.parse(std::string_view(req).substr(0, 10)).status, ParseStatus::NeedMore);
  EXPECT_EQ(p.parse(std::string_view(req).substr(0, 5)).status, ParseStatus::Error);
}

TEST(Parser, BufferMayMoveBetweenCalls) {
  RequestParser p;
  std::string buf = "GET /moved HTTP/1.1\r\nHo";
  ASSERT_EQ(p.parse(buf).status, ParseStatus::NeedMore);
  std::string bigger = buf;
  bigger.reserve(4096);
  bigger += "st: there\r\nX: 1\r\n\r\n";
  buf.assign(buf.size(), '#');  // the old buffer no longer holds the request
  ASSERT_EQ(p.parse(bigger).status, ParseStatus::Done);
  EXPECT_EQ(p.target(), "/moved");
  EXPECT_EQ(p.host(), "there");
  EXPECT_EQ(p.header("x").value(), "1");
}

TEST(Parser, SplitAtEveryByteGivesTheSameAnswer) {
  for (const std::string& req : sample_requests()) {
    const Outcome whole = parse_whole(req);
    EXPECT_NE(whole.status, ParseStatus::NeedMore) << req;
    for (std::size_t k = 0; k <= req.size(); ++k)
      ASSERT_EQ(parse_pieces(req, {k}), whole) << "split at " << k << " of " << req;
    ASSERT_EQ(parse_bytewise(req), whole) << req;
  }
}

TEST(Parser, SplitAtEveryByteWithLimits) {
  Limits l;
  l.max_request_line = 20;
  l.max_header_bytes = 40;
  l.max_header_count = 3;
  const std::string reqs[] = {
      "GET /aaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX: 0123456789012345678901234567890\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n",
  };
  const int expected[] = {414, 431, 431, 0};
  for (std::size_t c = 0; c < std::size(reqs); ++c) {
    const Outcome whole = parse_whole(reqs[c], l);
    EXPECT_EQ(whole.http_status, expected[c]) << reqs[c];
    for (std::size_t k = 0; k <= reqs[c].size(); ++k)
      ASSERT_EQ(parse_pieces(reqs[c], {k}, l), whole) << k;
    ASSERT_EQ(parse_bytewise(reqs[c], l), whole);
  }
}

// Parses every request of `stream` in turn with one parser, decoding bodies,
// and returns "METHOD target body" per request.
std::vector<std::string> run_pipeline(std::string_view stream, std::size_t* left = nullptr) {
  std::vector<std::string> out;
  RequestParser p;
  std::string_view rest = stream;
  while (!rest.empty()) {
    p.reset();
    const ParseResult r = p.parse(rest);
    if (r.status != ParseStatus::Done) break;
    std::string line = std::string(p.method()) + " " + std::string(p.target());
    std::string body;
    std::size_t body_used = 0;
    if (p.body_kind() == BodyKind::Length) {
      ContentLengthBody b(p.content_length());
      const BodyResult br = decode_body(b, rest.substr(r.consumed), [&](std::string_view s) { body += s; });
      if (br.status != BodyStatus::Done) break;
      body_used = br.consumed;
    } else if (p.body_kind() == BodyKind::Chunked) {
      ChunkedBody b(p.limits());
      const BodyResult br = decode_body(b, rest.substr(r.consumed), [&](std::string_view s) { body += s; });
      if (br.status != BodyStatus::Done) break;
      body_used = br.consumed;
    }
    out.push_back(line + " " + body);
    rest.remove_prefix(r.consumed + body_used);
  }
  if (left) *left = rest.size();
  return out;
}

TEST(Parser, Pipelining) {
  const std::string stream =
      "GET /one HTTP/1.1\r\nHost: h\r\n\r\n"
      "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
      "PUT /three HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n"
      "\r\nHEAD /four HTTP/1.0\n\n"
      "GET /partial HTTP/1.1\r\nHo";
  std::size_t left = 0;
  const std::vector<std::string> got = run_pipeline(stream, &left);
  const std::vector<std::string> want = {"GET /one ", "POST /two hello", "PUT /three abcde",
                                         "HEAD /four "};
  EXPECT_EQ(got, want);
  EXPECT_EQ(left, std::string_view("GET /partial HTTP/1.1\r\nHo").size());
}

TEST(Parser, ResetKeepsLimitsAndClearsFields) {
  Limits l;
  l.max_header_count = 2;
  RequestParser p(l);
  ASSERT_EQ(p.parse(get("Content-Length: 3\r\n")).status, ParseStatus::Done);
  EXPECT_EQ(p.body_kind(), BodyKind::Length);
  p.reset();
  const std::string http10 = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(p.parse(http10).status, ParseStatus::Done);
  EXPECT_EQ(p.header_count(), 0u);
  EXPECT_EQ(p.body_kind(), BodyKind::None);
  EXPECT_EQ(p.version(), 10);
  EXPECT_FALSE(p.keep_alive());
  p.reset();
  EXPECT_EQ(p.parse(get("A: 1\r\nB: 2\r\n")).http_status, 431);
  EXPECT_EQ(p.limits().max_header_count, 2u);
}

// ---- bodies ------------------------------------------------------------------

TEST(Chunked, Valid) {
  const std::string body = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  const Decoded d = dechunk(body + "NEXT");
  EXPECT_EQ(d.status, BodyStatus::Done);
  EXPECT_EQ(d.body, "hello world");
  EXPECT_EQ(d.consumed, body.size());
}

TEST(Chunked, ExtensionsHexAndLineEnds) {
  EXPECT_EQ(dechunk("5;name=value;flag\r\nhello\r\n0\r\n\r\n").body, "hello");
  EXPECT_EQ(dechunk("5 ; a=\"q;uoted\"\r\nhello\r\n0\r\n\r\n").body, "hello");
  EXPECT_EQ(dechunk("5\t;x\r\nhello\r\n0\r\n\r\n").body, "hello");
  EXPECT_EQ(dechunk("5; x = \"a\\\"b;\" ;y=z\r\nhello\r\n0\r\n\r\n").body, "hello");  // BWS, quoted ';' and '"'
  EXPECT_EQ(dechunk("5;a=b;c ;d=\"\";e\r\nhello\r\n0\r\nX:\r\n\r\n").body, "hello");
  EXPECT_EQ(dechunk("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n").body,
            "0123456789abcdefghij");
  EXPECT_EQ(dechunk("00000003\r\nabc\r\n000\r\n\r\n").body, "abc");
  const Decoded t = dechunk("3\r\nabc\r\n0\r\nX-Sum: 1\r\nY: 2\r\n\r\nrest");
  EXPECT_EQ(t.status, BodyStatus::Done);
  EXPECT_EQ(t.consumed, std::string_view("3\r\nabc\r\n0\r\nX-Sum: 1\r\nY: 2\r\n\r\n").size());
  EXPECT_EQ(dechunk("0\r\n\r\n").status, BodyStatus::Done);
  EXPECT_EQ(dechunk("0\r\n\r\n").body, "");
}

TEST(Chunked, Errors) {
  EXPECT_EQ(dechunk("g\r\nx\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("\r\n").http_status, 400);
  EXPECT_EQ(dechunk(" 5\r\nhello\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("-5\r\nhello\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("0x5\r\nhello\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("5x\r\nhello\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("5 x\r\nhello\r\n0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("5\rhello\r\n0\r\n\r\n").http_status, 400);        // bare CR
  // A bare LF ends no line of a chunked body: not the size line, an
  // extension, the data, a trailer field or the trailer section.
  for (const char* bare_lf : {"3\nabc\n0\n\n", "3\r\nabc\n0\r\n\r\n", "2;\nAB\r\n0\r\n\r\n", "2 \nAB\r\n0\r\n\r\n",
                              "2;x=y\nAB\r\n0\r\n\r\n", "0\r\nT: 1\n\r\n", "0\r\n\n"})
    EXPECT_EQ(dechunk(bare_lf).http_status, 400) << bare_lf;
  EXPECT_EQ(dechunk("3\r\nhello\r\n0\r\n\r\n").http_status, 400);      // data longer than size
  EXPECT_EQ(dechunk("3\r\nabc\rX0\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("3;\x01\r\nabc\r\n0\r\n\r\n").http_status, 400);  // control in extension
  EXPECT_EQ(dechunk("0\r\n folded: x\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("0\r\nX: a\x01\r\n\r\n").http_status, 400);
  EXPECT_EQ(dechunk("0\r\nX: a\rb\r\n\r\n").http_status, 400);
  // RFC 9112 7.1.1: whitespace after the size only before a ';', every
  // extension named; 7.1.2: a trailer line is a field line, with its ':'.
  for (const char* loose : {"5 \r\nhello\r\n0\r\n\r\n", "5\t\r\nhello\r\n0\r\n\r\n", "5;\r\nhello\r\n0\r\n\r\n",
                            "5;=v\r\nhello\r\n0\r\n\r\n", "5;a;\r\nhello\r\n0\r\n\r\n", "5; ;a\r\nhello\r\n0\r\n\r\n",
                            "5;a=\"x\r\nhello\r\n0\r\n\r\n", "0\r\nfoo bar\r\n\r\n", "0\r\nfoo\r\n\r\n",
                            "0\r\nX : 1\r\n\r\n", "5;a b\r\nhello\r\n0\r\n\r\n", "5;a=\r\nhello\r\n0\r\n\r\n",
                            "5;a==b\r\nhello\r\n0\r\n\r\n", "5;a=b c\r\nhello\r\n0\r\n\r\n", "5;a\"q\"\r\nhello\r\n0\r\n\r\n",
                            "5;a=\"x\"y\r\nhello\r\n0\r\n\r\n", "5;a \r\nhello\r\n0\r\n\r\n", "5;a=b \r\nhello\r\n0\r\n\r\n"})
    EXPECT_EQ(dechunk(loose).http_status, 400) << loose;
  EXPECT_EQ(dechunk("0\r\n\rX").http_status, 400);
  const Decoded d = dechunk("3\r\nabc\r\nzz\r\n");
  EXPECT_EQ(d.status, BodyStatus::Error);
  EXPECT_EQ(d.body, "abc");  // what came before the error was handed out
}

TEST(Chunked, Overflow) {
  Limits unbounded;
  unbounded.max_body = UINT64_MAX;
  EXPECT_EQ(dechunk("fffffffffffffffff\r\n", unbounded).http_status, 400);    // 17 digits
  EXPECT_EQ(dechunk("10000000000000000\r\n", unbounded).http_status, 400);    // 2^64
  EXPECT_EQ(dechunk("ffffffffffffffff\r\n", unbounded).status, BodyStatus::NeedMore);
  EXPECT_EQ(dechunk("fffffffffffffffff\r\n").http_status, 413);
}

TEST(Chunked, BodyLimit) {
  Limits l;
  l.max_body = 8;
  EXPECT_EQ(dechunk("4\r\nabcd\r\n4\r\nefgh\r\n0\r\n\r\n", l).body, "abcdefgh");
  const Decoded over = dechunk("4\r\nabcd\r\n5\r\nefghi\r\n0\r\n\r\n", l);
  EXPECT_EQ(over.http_status, 413);
  EXPECT_EQ(over.body, "abcd");
  EXPECT_EQ(dechunk("9\r\n", l).http_status, 413);
  EXPECT_EQ(dechunk(std::string(1000, '0') + "1\r\nx\r\n0\r\n\r\n", {}).http_status, 0);  // leading zeros
  const std::string big = "100000\r\n" + std::string(0x100000, 'z') + "\r\n0\r\n\r\n";
  EXPECT_EQ(dechunk(big).body.size(), kDefaultMaxBody);
  EXPECT_EQ(dechunk("100001\r\n").http_status, 413);
}

TEST(Chunked, LineAndTrailerLimits) {
  Limits l;
  l.max_request_line = 16;
  l.max_header_bytes = 16;
  EXPECT_EQ(dechunk("1;" + std::string(20, 'e') + "\r\nx\r\n0\r\n\r\n", l).http_status, 400);
  EXPECT_EQ(dechunk("1;eeee\r\nx\r\n0\r\n\r\n", l).body, "x");
  EXPECT_EQ(dechunk("0\r\nX: " + std::string(20, 't') + "\r\n\r\n", l).http_status, 431);
  EXPECT_EQ(dechunk("0\r\nX: tt\r\n\r\n", l).status, BodyStatus::Done);
}

TEST(Chunked, SplitAtEveryByte) {
  const std::string bodies[] = {
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT",
      "1\nA\n10\n0123456789abcdef\n0\n\n",
      "3\r\nabc\r\nzz\r\n",
      "4\r\nabcd\r\n5\r\nefghi\r\n0\r\n\r\n",
  };
  Limits l;
  l.max_body = 8;
  for (const std::string& b : bodies) {
    const Decoded whole = dechunk(b, l);
    EXPECT_NE(whole.status, BodyStatus::NeedMore);
    for (std::size_t k = 0; k <= b.size(); ++k) ASSERT_EQ(dechunk(b, l, {k}), whole) << k << " " << b;
    std::vector<std::size_t> every;
    for (std::size_t k = 1; k < b.size(); ++k) every.push_back(k);
    ASSERT_EQ(dechunk(b, l, every), whole) << b;
  }
}

TEST(Chunked, DoneAndErrorRepeat) {
  ChunkedBody d;
  std::string sink;
  auto into = [&](std::string_view s) { sink += s; };
  EXPECT_EQ(decode_body(d, "0\r\n\r\n", into).status, BodyStatus::Done);
  const BodyResult again = decode_body(d, "more", into);
  EXPECT_EQ(again.status, BodyStatus::Done);
  EXPECT_EQ(again.consumed, 0u);
  EXPECT_EQ(d.body_size(), 0u);
  d.reset();
  EXPECT_EQ(decode_body(d, "z", into).http_status, 400);
  EXPECT_EQ(decode_body(d, "0\r\n\r\n", into).http_status, 400);
  d.reset();
  EXPECT_EQ(decode_body(d, "2\r\nok\r\n0\r\n\r\n", into).status, BodyStatus::Done);
  EXPECT_EQ(sink, "ok");
  EXPECT_EQ(d.body_size(), 2u);
}

TEST(ContentLengthBody, Tracks) {
  ContentLengthBody b(5);
  std::string got;
  auto into = [&](std::string_view s) { got += s; };
  BodyResult r = decode_body(b, "he", into);
  EXPECT_EQ(r.status, BodyStatus::NeedMore);
  EXPECT_EQ(r.consumed, 2u);
  EXPECT_EQ(b.remaining(), 3u);
  r = decode_body(b, "lloGET /", into);
  EXPECT_EQ(r.status, BodyStatus::Done);
  EXPECT_EQ(r.consumed, 3u);
  EXPECT_EQ(got, "hello");
  ContentLengthBody zero(0);
  EXPECT_EQ(decode_body(zero, "GET", into).status, BodyStatus::Done);
  EXPECT_EQ(decode_body(zero, "GET", into).consumed, 0u);
  ContentLengthBody big(10);
  EXPECT_EQ(decode_body(big, "", into).status, BodyStatus::NeedMore);
  std::vector<std::size_t> every = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const Decoded d = decode_pieces(big, "0123456789tail", every);
  EXPECT_EQ(d.body, "0123456789");
  EXPECT_EQ(d.consumed, 10u);
}

// ---- response ----------------------------------------------------------------

TEST(Response, ReasonPhrases) {
  EXPECT_EQ(reason_phrase(200), "OK");
  EXPECT_EQ(reason_phrase(206), "Partial Content");
  EXPECT_EQ(reason_phrase(304), "Not Modified");
  EXPECT_EQ(reason_phrase(404), "Not Found");
  EXPECT_EQ(reason_phrase(413), "Content Too Large");
  EXPECT_EQ(reason_phrase(414), "URI Too Long");
  EXPECT_EQ(reason_phrase(416), "Range Not Satisfiable");
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(501), "Not Implemented");
  EXPECT_EQ(reason_phrase(505), "HTTP Version Not Supported");
  EXPECT_EQ(reason_phrase(299), "Unknown");
}

TEST(Response, MimeTypes) {
  EXPECT_EQ(mime_type("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type("/a/b/STYLE.CSS"), "text/css; charset=utf-8");
  EXPECT_EQ(mime_type("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(mime_type("x.json"), "application/json");
  EXPECT_EQ(mime_type("img.PNG"), "image/png");
  EXPECT_EQ(mime_type("photo.jpeg"), "image/jpeg");
  EXPECT_EQ(mime_type("v.svg"), "image/svg+xml");
  EXPECT_EQ(mime_type("m.wasm"), "application/wasm");
  EXPECT_EQ(mime_type("f.woff2"), "font/woff2");
  EXPECT_EQ(mime_type("archive.tar.gz"), "application/gzip");
  EXPECT_EQ(mime_type("live/index.m3u8"), "application/vnd.apple.mpegurl");
  EXPECT_EQ(mime_type("seg001.ts"), "video/mp2t");
  EXPECT_EQ(mime_type("clip.MOV"), "video/quicktime");
  EXPECT_EQ(mime_type("subs.vtt"), "text/vtt; charset=utf-8");
  EXPECT_EQ(mime_type("song.m4a"), "audio/mp4");
  EXPECT_EQ(mime_type("README"), "application/octet-stream");
  EXPECT_EQ(mime_type(".bashrc"), "application/octet-stream");
  EXPECT_EQ(mime_type("dir.d/file"), "application/octet-stream");
  EXPECT_EQ(mime_type("trailing."), "application/octet-stream");
  EXPECT_EQ(mime_type("x.unknown"), "application/octet-stream");
  EXPECT_EQ(mime_type(""), "application/octet-stream");
}

constexpr std::time_t kRfcExample = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
constexpr std::time_t k2025 = 1748736000;       // 2025-06-01 00:00:00 UTC

TEST(Dates, Format) {
  EXPECT_EQ(format_http_date(kRfcExample), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(format_http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(format_http_date(4102444799), "Thu, 31 Dec 2099 23:59:59 GMT");
  char b[kHttpDateLength];
  format_http_date(k2025, b);
  EXPECT_EQ(std::string_view(b, kHttpDateLength), "Sun, 01 Jun 2025 00:00:00 GMT");
}

TEST(Dates, ParseAllThreeFormats) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", k2025), kRfcExample);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", k2025), kRfcExample);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", k2025), kRfcExample);
  EXPECT_EQ(parse_http_date("Wed Nov 16 08:49:37 1994", k2025), kRfcExample + 10 * 86400);
  EXPECT_EQ(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", k2025), 0);
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), kRfcExample);
}

TEST(Dates, Rfc850TwoDigitYears) {
  // Relative to 2025: up to 50 years ahead stays ahead, further is the past.
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT", k2025),
            parse_http_date("Tue, 01 Jan 2070 00:00:00 GMT", k2025));
  EXPECT_EQ(parse_http_date("Wednesday, 01-Jan-75 00:00:00 GMT", k2025),
            parse_http_date("Tue, 01 Jan 2075 00:00:00 GMT", k2025));
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-76 00:00:00 GMT", k2025),
            parse_http_date("Thu, 01 Jan 1976 00:00:00 GMT", k2025));
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-00 00:00:00 GMT", k2025),
            parse_http_date("Sat, 01 Jan 2000 00:00:00 GMT", k2025));
  EXPECT_EQ(parse_http_date("Friday, 01-Jan-99 00:00:00 GMT", k2025),
            parse_http_date("Fri, 01 Jan 1999 00:00:00 GMT", k2025));
  // "More than 50 years in the future" is a timestamp's distance, not a
  // year's (RFC 9110 5.6.7): from 2025-06-01, 2075-06-01 00:00:00 is 50
  // years ahead (kept), a second or a day later is more (the past).
  EXPECT_EQ(parse_http_date("Saturday, 01-Jun-75 00:00:00 GMT", k2025),
            parse_http_date("Sat, 01 Jun 2075 00:00:00 GMT", k2025));
  EXPECT_EQ(parse_http_date("Sunday, 01-Jun-75 00:00:01 GMT", k2025),
            parse_http_date("Sun, 01 Jun 1975 00:00:01 GMT", k2025));
  EXPECT_EQ(parse_http_date("Wednesday, 31-Dec-75 23:59:59 GMT", k2025),
            parse_http_date("Wed, 31 Dec 1975 23:59:59 GMT", k2025));
}

TEST(Dates, Rejects) {
  const char* bad[] = {
      "",
      "Sun, 06 Nov 1994 08:49:37 UTC",
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 nov 1994 08:49:37 GMT",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMT ",
      " Sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMT; length=12",
      "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT",
      "Sun, 06 Nov 1994 08:49:61 GMT",
      "Sun, 00 Nov 1994 08:49:37 GMT",
      "Sun, 31 Nov 1994 08:49:37 GMT",
      "Sun, 29 Feb 2023 08:49:37 GMT",
      "Sun, 29 Feb 1900 08:49:37 GMT",
      "Xyz, 06 Nov 1994 08:49:37 GMT",
      "Sunday, 06-Nov-1994 08:49:37 GMT",
      "Sunday, 06 Nov 94 08:49:37 GMT",
      "Sun, 06-Nov-94 08:49:37 GMT",
      "Sun Nov 6 08:49:37 1994",
      "Sun Nov  6 08:49:37 94",
      "Sun Nov  6 08:49:37 1994 GMT",
      "1994-11-06T08:49:37Z",
      "784111777",
  };
  for (const char* s : bad) EXPECT_FALSE(parse_http_date(s, k2025).has_value()) << s;
  EXPECT_TRUE(parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT", k2025).has_value());
  EXPECT_TRUE(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT", k2025).has_value());
  // Every proper prefix of a valid date is invalid.
  for (const std::string& full : {"Sun, 06 Nov 1994 08:49:37 GMT"s, "Sunday, 06-Nov-94 08:49:37 GMT"s,
                                 "Sun Nov  6 08:49:37 1994"s})
    for (std::size_t k = 0; k < full.size(); ++k)
      ASSERT_FALSE(parse_http_date(full.substr(0, k), k2025).has_value()) << full.substr(0, k);
}

TEST(Dates, RoundTrip) {
  std::mt19937_64 rng(1994);
  for (int i = 0; i < 20000; ++i) {
    const std::time_t t = static_cast<std::time_t>(rng() % 253402300800ULL);  // up to 9999-12-31
    const std::string s = format_http_date(t);
    ASSERT_EQ(parse_http_date(s, k2025), t) << s;
  }
  for (std::time_t t = 0; t < 4102444800; t += 86400 * 7 + 3607) ASSERT_EQ(parse_http_date(format_http_date(t), k2025), t);
}

TEST(Dates, NotModifiedSince) {
  EXPECT_TRUE(not_modified_since("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExample));
  EXPECT_TRUE(not_modified_since(" Sun, 06 Nov 1994 08:49:37 GMT ", kRfcExample - 1));
  EXPECT_FALSE(not_modified_since("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExample + 1));
  EXPECT_TRUE(not_modified_since("Sun Nov  6 08:49:37 1994", kRfcExample));
  EXPECT_FALSE(not_modified_since("garbage", 0));
}

TEST(Dates, Cache) {
  DateCache c;
  const std::string_view a = c.get(kRfcExample);
  EXPECT_EQ(a, "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(c.get(kRfcExample).data(), a.data());
  EXPECT_EQ(std::string(c.get(kRfcExample + 1)), "Sun, 06 Nov 1994 08:49:38 GMT");
  const std::string_view now = cached_http_date();
  ASSERT_EQ(now.size(), kHttpDateLength);
  const auto parsed = parse_http_date(now);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_LE(std::abs(static_cast<long>(*parsed - std::time(nullptr))), 2);
}

TEST(Range, OneRange) {
  auto r = parse_range("bytes=0-499", 1000);
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 499u);
  EXPECT_EQ(r.length(), 500u);
  r = parse_range("bytes=500-", 1000);
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  EXPECT_EQ(r.first, 500u);
  EXPECT_EQ(r.last, 999u);
  r = parse_range("bytes=-100", 1000);
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  EXPECT_EQ(r.first, 900u);
  EXPECT_EQ(r.last, 999u);
  r = parse_range("bytes=-5000", 1000);  // a suffix longer than the file: all of it
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 999u);
  r = parse_range("bytes=900-5000", 1000);  // clipped
  EXPECT_EQ(r.first, 900u);
  EXPECT_EQ(r.last, 999u);
  r = parse_range("bytes=999-999", 1000);
  EXPECT_EQ(r.length(), 1u);
  r = parse_range("Bytes=1-2", 1000);
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  r = parse_range(" bytes=1-2 , ", 1000);
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  EXPECT_EQ(r.last, 2u);
  r = parse_range("bytes=5-99999999999999999999999", 10);  // saturates, then clipped
  EXPECT_EQ(r.kind, RangeKind::Satisfiable);
  EXPECT_EQ(r.last, 9u);
}

TEST(Range, Unsatisfiable) {
  EXPECT_EQ(parse_range("bytes=1000-", 1000).kind, RangeKind::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=1000-2000", 1000).kind, RangeKind::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=-0", 1000).kind, RangeKind::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=0-", 0).kind, RangeKind::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=99999999999999999999999-", 10).kind, RangeKind::Unsatisfiable);
}

TEST(Range, IgnoredServesWhole) {
  const char* ignored[] = {
      "",
      "bytes=",
      "bytes=,",
      "items=0-1",
      "bytes 0-1",
      "bytes=0-1,5-6",       // several ranges
      "bytes=0-1, -5",
      "bytes=5-1",           // last before first
      "bytes=a-b",
      "bytes=1-2-3",
      "bytes=- 5",
      "bytes= 1 -2",
      "bytes=+1-2",
      "bytes=1",
      "bytes=-",
      "bytes=0x1-2",
  };
  for (const char* v : ignored) EXPECT_EQ(parse_range(v, 1000).kind, RangeKind::None) << v;
  // A suffix of an empty file is satisfiable (RFC 9110 14.1.1) but no
  // 206 can describe it: the whole, empty file.
  EXPECT_EQ(parse_range("bytes=-1", 0).kind, RangeKind::None);
}

TEST(Response, HeadFields) {
  ResponseHead h;
  h.status = 200;
  h.date = "Sun, 06 Nov 1994 08:49:37 GMT";
  h.content_type = mime_type("a.html");
  h.content_length = 1234;
  h.last_modified = kRfcExample;
  h.accept_ranges = true;
  char buf[512];
  const std::size_t n = write_response_fields(h, buf, sizeof buf);
  EXPECT_EQ(std::string_view(buf, n),
            "HTTP/1.1 200 OK\r\n"
            "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            "Server: parkway-httpd\r\n"
            "Content-Type: text/html; charset=utf-8\r\n"
            "Content-Length: 1234\r\n"
            "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
            "Accept-Ranges: bytes\r\n");
  std::string s = "prefix";
  append_response_fields(h, s);
  EXPECT_EQ(s, "prefix" + std::string(buf, n));
  // Too small: nothing.
  EXPECT_EQ(write_response_fields(h, buf, n - 1), 0u);
  EXPECT_EQ(write_response_fields(h, buf, n), n);
  // The head's end, written when the answer is sent.
  EXPECT_EQ(response_head_end(true), "Connection: keep-alive\r\n\r\n");
  EXPECT_EQ(response_head_end(false), "Connection: close\r\n\r\n");
}

TEST(Response, RangesAndSpecialStatuses) {
  ResponseHead h;
  h.date = "D";
  h.server = {};
  h.status = 206;
  h.content_length = 500;
  h.content_range = parse_range("bytes=500-", 1000);
  h.complete_length = 1000;
  std::string s;
  append_response_fields(h, s);
  EXPECT_EQ(s,
            "HTTP/1.1 206 Partial Content\r\nDate: D\r\nContent-Length: 500\r\n"
            "Content-Range: bytes 500-999/1000\r\n");

  h.status = 416;
  h.content_length = 0;
  h.content_range = parse_range("bytes=2000-", 1000);
  s.clear();
  append_response_fields(h, s);
  EXPECT_EQ(s,
            "HTTP/1.1 416 Range Not Satisfiable\r\nDate: D\r\nContent-Length: 0\r\n"
            "Content-Range: bytes */1000\r\n");

  ResponseHead nc;
  nc.date = "D";
  nc.status = 204;
  nc.content_length = 0;
  nc.extra = "Allow: GET, HEAD\r\n";
  s.clear();
  append_response_fields(nc, s);
  EXPECT_EQ(s, "HTTP/1.1 204 No Content\r\nDate: D\r\nServer: parkway-httpd\r\nAllow: GET, HEAD\r\n");

  ResponseHead dflt;  // the Date field from the cache
  s.clear();
  append_response_fields(dflt, s);
  ASSERT_EQ(s.rfind("HTTP/1.1 200 OK\r\nDate: ", 0), 0u);
  EXPECT_TRUE(parse_http_date(s.substr(23, kHttpDateLength)).has_value()) << s;
  EXPECT_EQ(kContinueResponse, "HTTP/1.1 100 Continue\r\n\r\n");
}

// ---- paths -------------------------------------------------------------------

void expect_path(std::string_view target, std::string_view relative, bool slash) {
  const PathResult r = resolve_target_path(target);
  EXPECT_TRUE(r.ok()) << target << ": " << r.reason;
  EXPECT_EQ(r.relative, relative) << target;
  EXPECT_EQ(r.trailing_slash, slash) << target;
}

void expect_bad_path(std::string_view target) {
  const PathResult r = resolve_target_path(target);
  EXPECT_EQ(r.status, 400) << target << " gave " << r.relative;
  EXPECT_FALSE(r.reason.empty());
  EXPECT_TRUE(r.relative.empty());
}

TEST(Path, Normalizes) {
  expect_path("/", "", true);
  expect_path("/index.html", "index.html", false);
  expect_path("/a/./b/../c", "a/c", false);
  expect_path("/a/b/", "a/b", true);
  expect_path("/a/b/.", "a/b", true);
  expect_path("/a/b/..", "a", true);
  expect_path("/a/..", "", true);
  expect_path("//a///b//", "a/b", true);
  expect_path("/./././x", "x", false);
  expect_path("/a/%2e%2e/b", "b", false);
  expect_path("/a/%2E/b", "a/b", false);
  expect_path("/a%2fb", "a/b", false);
  expect_path("/a%2Fb%2F", "a/b", true);
  expect_path("/.../x", ".../x", false);
  expect_path("/..a/b..", "..a/b..", false);
  expect_path("/a\\..\\b", "a\\..\\b", false);  // backslashes are plain bytes
  expect_path("/%5c..%5cetc", "\\..\\etc", false);
  expect_path("/%41%62c", "Abc", false);
  expect_path("/caf%C3%A9", "caf\xc3\xa9", false);
  expect_path("/a+b%20c", "a+b c", false);
  expect_path("/a/b?x=/../../etc", "a/b", false);
  expect_path("/a/b/?q", "a/b", true);
  expect_path("/a#frag/../..", "a", false);
  expect_path("/%3f", "?", false);
  expect_path("http://host/x/y", "x/y", false);
  expect_path("http://host", "", true);
  expect_path("http://host?q=1", "", true);
}

TEST(Path, Rejects) {
  expect_bad_path("/../etc/passwd");
  expect_bad_path("/..");
  expect_bad_path("/a/../../etc/passwd");
  expect_bad_path("/%2e%2e/x");
  expect_bad_path("/%2E%2e");
  expect_bad_path("/a/%2E%2e/%2e%2E/b");
  expect_bad_path("/.%2e/x");
  expect_bad_path("/a%2f..%2f..%2fetc");
  expect_bad_path("/%2f..");
  expect_bad_path("/%00");
  expect_bad_path("/a%00.html");
  expect_bad_path("/%zz");
  expect_bad_path("/a%2");
  expect_bad_path("/a%");
  expect_bad_path("/%g0");
  expect_bad_path("/%0a");
  expect_bad_path("/%7F");
  expect_bad_path("/a\tb");
  expect_bad_path("*");
  expect_bad_path("");
  expect_bad_path("relative/path");
  expect_bad_path("http://h/../x");
}

TEST(Path, ReusesOutput) {
  PathResult r;
  resolve_target_path("/a/long/path/with/segments", r);
  ASSERT_TRUE(r.ok());
  const std::size_t cap = r.relative.capacity();
  resolve_target_path("/%zz", r);
  EXPECT_EQ(r.status, 400);
  resolve_target_path("/short", r);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.relative, "short");
  EXPECT_EQ(r.relative.capacity(), cap);
}

// A temp dir: root/{file.txt, sub/inner.txt, links...}, outside/secret.txt.
class OpenBeneath : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/httpd-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    const std::string root = base_ + "/root", out = base_ + "/outside";
    ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root + "/sub").c_str(), 0755), 0);
    ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
    write_file(root + "/file.txt", "inside");
    write_file(root + "/sub/inner.txt", "inner");
    write_file(out + "/secret.txt", "secret");
    ASSERT_EQ(symlink("file.txt", (root + "/link_in").c_str()), 0);
    ASSERT_EQ(symlink("../file.txt", (root + "/sub/link_up_in").c_str()), 0);
    ASSERT_EQ(symlink("..", (root + "/sub/parent").c_str()), 0);
    ASSERT_EQ(symlink("../outside/secret.txt", (root + "/link_out").c_str()), 0);
    ASSERT_EQ(symlink("../../outside/secret.txt", (root + "/sub/link_out2").c_str()), 0);
    ASSERT_EQ(symlink((out + "/secret.txt").c_str(), (root + "/link_abs").c_str()), 0);
    ASSERT_EQ(symlink("../outside", (root + "/dir_out").c_str()), 0);
    ASSERT_EQ(symlink("/proc/self/root/etc/hostname", (root + "/magic").c_str()), 0);
    root_fd_ = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root_fd_, 0);
  }
  void TearDown() override {
    if (root_fd_ >= 0) close(root_fd_);
    std::system(("rm -rf '" + base_ + "'").c_str());
  }
  static void write_file(const std::string& path, std::string_view text) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  // The file's text, or "errno:N".
  static std::string read_fd(int fd) {
    if (fd < 0) return "errno:" + std::to_string(-fd);
    char b[64];
    const ssize_t n = read(fd, b, sizeof b);
    close(fd);
    return n < 0 ? "read error" : std::string(b, static_cast<std::size_t>(n));
  }
  static bool have_openat2() {
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC;
    const long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
    if (fd >= 0) close(static_cast<int>(fd));
    return fd >= 0;
  }
  std::string base_;
  int root_fd_ = -1;
};

TEST_F(OpenBeneath, PlainFiles) {
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "file.txt")), "inside");
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "sub/inner.txt")), "inner");
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "missing")), "errno:" + std::to_string(ENOENT));
  const int dir = open_beneath(root_fd_, "", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  struct stat st;
  ASSERT_EQ(fstat(dir, &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_NE(fcntl(dir, F_GETFD) & FD_CLOEXEC, 0);
  close(dir);
  EXPECT_EQ(open_error_status(open_beneath(root_fd_, "file.txt/x")), 404);  // ENOTDIR
}

TEST_F(OpenBeneath, SymlinksOutOfTheRootFail) {
  for (const char* p : {"link_out", "sub/link_out2", "link_abs", "dir_out/secret.txt", "magic",
                        "../outside/secret.txt", "sub/../../outside/secret.txt", "/etc/hostname"}) {
    const int fd = open_beneath(root_fd_, p);
    EXPECT_LT(fd, 0) << p << " opened: " << read_fd(fd);
    EXPECT_EQ(open_error_status(fd), 404) << p << " errno " << -fd;
  }
}

TEST_F(OpenBeneath, SymlinksInsideTheRootOpen) {
  if (!have_openat2()) GTEST_SKIP() << "no openat2 here: the fallback refuses every symlink";
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "link_in")), "inside");
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "sub/link_up_in")), "inside");
  EXPECT_EQ(read_fd(open_beneath(root_fd_, "sub/parent/file.txt")), "inside");
}

TEST_F(OpenBeneath, WalkFallback) {
  EXPECT_EQ(read_fd(open_beneath_walk(root_fd_, "file.txt")), "inside");
  EXPECT_EQ(read_fd(open_beneath_walk(root_fd_, "sub/inner.txt")), "inner");
  EXPECT_EQ(read_fd(open_beneath_walk(root_fd_, "./sub//inner.txt")), "inner");
  EXPECT_EQ(read_fd(open_beneath_walk(root_fd_, "missing/x")), "errno:" + std::to_string(ENOENT));
  for (const char* p : {"link_in", "link_out", "sub/link_out2", "link_abs", "dir_out/secret.txt",
                        "sub/parent/file.txt", "magic"}) {
    const int fd = open_beneath_walk(root_fd_, p);
    EXPECT_LT(fd, 0) << p << " opened: " << read_fd(fd);
    EXPECT_EQ(open_error_status(fd), 404) << p << " errno " << -fd;
  }
  EXPECT_EQ(open_beneath_walk(root_fd_, "../outside/secret.txt"), -EXDEV);
  EXPECT_EQ(open_beneath_walk(root_fd_, "sub/../file.txt"), -EXDEV);
  EXPECT_EQ(open_beneath_walk(root_fd_, "/etc/hostname"), -EXDEV);
  const int dir = open_beneath_walk(root_fd_, "", O_RDONLY | O_DIRECTORY);
  EXPECT_GE(dir, 0);
  if (dir >= 0) close(dir);
}

TEST_F(OpenBeneath, FromTargetToFile) {
  const PathResult r = resolve_target_path("/sub/./%69nner.txt?v=2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(read_fd(open_beneath(root_fd_, r.relative)), "inner");
  EXPECT_FALSE(resolve_target_path("/sub/%2e%2e/%2e%2e/outside/secret.txt").ok());
}

TEST(OpenErrors, Statuses) {
  EXPECT_EQ(open_error_status(-ENOENT), 404);
  EXPECT_EQ(open_error_status(-ENOTDIR), 404);
  EXPECT_EQ(open_error_status(-ELOOP), 404);
  EXPECT_EQ(open_error_status(-EXDEV), 404);
  EXPECT_EQ(open_error_status(-EACCES), 403);
  EXPECT_EQ(open_error_status(-EMFILE), 503);
  EXPECT_EQ(open_error_status(-ENFILE), 503);
  EXPECT_EQ(open_error_status(-EIO), 500);
}

// ---- fuzz --------------------------------------------------------------------

// Random and mutated requests, bodies and paths: no crash, no read past the
// input (each input is an exactly sized heap block, for AddressSanitizer),
// answers within their contract, and the same answer when fed in two pieces.
class Fuzz {
 public:
  explicit Fuzz(std::uint64_t seed) : rng_(seed) {}

  std::string random_bytes() {
    static const std::string_view kAlphabet[] = {
        "GET", "POST", "HTTP/1.1", "HTTP/1.0", "HTTP/", " ", "\r\n", "\n", "\r", ":", "/",
        "Host", "Content-Length", "Transfer-Encoding", "chunked", "Connection", "close",
        "keep-alive", "Expect", "100-continue", "0", "1", "9", ",", "\t", "%", "..", "*",
        "http://", "a", "Z", "\x00"sv, "\x7f", "\xff", "-", ";",
    };
    std::string s;
    const std::size_t parts = rng_() % 40;
    for (std::size_t i = 0; i < parts; ++i) {
      if (rng_() % 4 == 0)
        s.push_back(static_cast<char>(rng_()));
      else
        s += kAlphabet[rng_() % std::size(kAlphabet)];
    }
    return s;
  }

  std::string mutate(std::string s) {
    const int n = 1 + static_cast<int>(rng_() % 4);
    for (int k = 0; k < n; ++k) {
      const std::size_t at = s.empty() ? 0 : rng_() % (s.size() + 1);
      switch (rng_() % 7) {
        case 0:
          if (at < s.size()) s[at] = static_cast<char>(rng_());
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1 + rng_() % 4);
          break;
        case 2:
          s.insert(at, 1, "\r\n \t:\0,;"[rng_() % 8]);
          break;
        case 3: {
          const std::size_t from = s.empty() ? 0 : rng_() % s.size();
          s.insert(at, s.substr(from, rng_() % 16));
          break;
        }
        case 4:
          s.resize(at);
          break;
        case 5:
          s.insert(at, std::string(rng_() % 300, static_cast<char>('a' + rng_() % 26)));
          break;
        default:
          if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1 << (rng_() % 8)));
          break;
      }
    }
    return s;
  }

  std::size_t below(std::size_t n) { return n ? rng_() % n : 0; }
  std::uint64_t next() { return rng_(); }

 private:
  std::mt19937_64 rng_;
};

void check_path(const std::string& s) {
  const PathResult r = resolve_target_path(s);
  if (!r.ok()) {
    ASSERT_EQ(r.status, 400);
    return;
  }
  const std::string& rel = r.relative;
  ASSERT_TRUE(rel.empty() || rel.front() != '/') << s;
  ASSERT_TRUE(rel.empty() || rel.back() != '/') << s;
  std::size_t start = 0;
  while (start <= rel.size() && !rel.empty()) {
    std::size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    const std::string_view seg(rel.data() + start, end - start);
    ASSERT_FALSE(seg.empty() || seg == "." || seg == "..") << s << " -> " << rel;
    start = end + 1;
  }
  for (unsigned char c : rel) ASSERT_FALSE(c < 0x20 || c == 0x7f) << s;
}

void check_request(const std::string& s, const Limits& limits, Fuzz& f) {
  auto buf = std::make_unique<char[]>(s.size());
  if (!s.empty()) std::memcpy(buf.get(), s.data(), s.size());
  const std::string_view in(buf.get(), s.size());
  RequestParser p(limits);
  const ParseResult r = p.parse(in);
  switch (r.status) {
    case ParseStatus::NeedMore:
      break;
    case ParseStatus::Error:
      ASSERT_TRUE(r.http_status == 400 || r.http_status == 413 || r.http_status == 414 ||
                  r.http_status == 431 || r.http_status == 501 || r.http_status == 505)
          << r.http_status;
      ASSERT_FALSE(r.reason.empty());
      break;
    case ParseStatus::Done: {
      ASSERT_GT(r.consumed, 0u);
      ASSERT_LE(r.consumed, in.size());
      ASSERT_TRUE(p.version() == 10 || p.version() == 11);
      ASSERT_FALSE(p.method().empty());
      ASSERT_FALSE(p.target().empty());
      ASSERT_LE(p.header_count(), limits.max_header_count);
      const char* lo = in.data();
      const char* hi = in.data() + r.consumed;
      for (std::size_t i = 0; i < p.header_count(); ++i) {
        const Header h = p.header_at(i);
        ASSERT_FALSE(h.name.empty());
        ASSERT_TRUE(h.name.data() >= lo && h.name.data() + h.name.size() <= hi);
        ASSERT_TRUE(h.value.data() >= lo && h.value.data() + h.value.size() <= hi);
      }
      const std::string_view rest = in.substr(r.consumed);
      auto sink = [](std::string_view d) { ASSERT_FALSE(d.empty()); };
      if (p.body_kind() == BodyKind::Chunked) {
        ChunkedBody b(limits);
        const BodyResult br = decode_body(b, rest, sink);
        ASSERT_LE(br.consumed, rest.size());
        ASSERT_LE(b.body_size(), limits.max_body);
      } else if (p.body_kind() == BodyKind::Length) {
        ASSERT_LE(p.content_length(), limits.max_body);
        ContentLengthBody b(p.content_length());
        ASSERT_LE(decode_body(b, rest, sink).consumed, rest.size());
      }
      check_path(std::string(p.path()));
      break;
    }
  }
  // Two pieces give the same answer.
  if (f.below(4) == 0) {
    const std::size_t cut = f.below(s.size() + 1);
    ASSERT_EQ(parse_pieces(s, {cut}, limits), capture(p, r)) << "cut " << cut;
  }
}

TEST(Fuzz, ParserBodiesAndPaths) {
  Fuzz f(0x5eed);
  Limits small;
  small.max_request_line = 64;
  small.max_header_bytes = 128;
  small.max_header_count = 4;
  small.max_body = 64;
  std::vector<std::string> corpus = sample_requests();
  corpus.push_back(get("Transfer-Encoding: chunked\r\n") + "5\r\nhello\r\n0\r\nT: 1\r\n\r\n");
  corpus.push_back(get("Content-Length: 3\r\n") + "abc");
  const std::vector<std::string> bodies = {"5\r\nhello\r\n6;e=1\r\n world\r\n0\r\nT: x\r\n\r\n",
                                           "1\nA\n10\n0123456789abcdef\n0\n\n"};
  const std::vector<std::string> paths = {"/a/./b/../c", "/%2e%2e/x", "/a%2fb/%2E%2e/c?q#f",
                                          "http://h/x//y/", "/a\\b/%41"};

  const auto start = std::chrono::steady_clock::now();
  int iterations = 0;
  for (; iterations < 200000; ++iterations) {
    // Safety net: a slow (sanitizer) build stops early rather than hang CI.
    if ((iterations & 1023) == 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(20))
      break;
    const std::size_t kind = f.below(10);
    const Limits limits = f.below(3) == 0 ? small : Limits{};
    if (kind < 3) {
      check_request(f.random_bytes(), limits, f);
    } else if (kind < 8) {
      check_request(f.mutate(corpus[f.below(corpus.size())]), limits, f);
    } else if (kind == 8) {
      const std::string b = f.mutate(bodies[f.below(bodies.size())]);
      auto buf = std::make_unique<char[]>(b.size());
      if (!b.empty()) std::memcpy(buf.get(), b.data(), b.size());
      ChunkedBody d(limits);
      std::size_t total = 0;
      const BodyResult r = decode_body(d, std::string_view(buf.get(), b.size()),
                                       [&](std::string_view s) { total += s.size(); });
      ASSERT_LE(r.consumed, b.size());
      ASSERT_LE(total, limits.max_body);
      ASSERT_EQ(total, d.body_size());
      if (r.status == BodyStatus::Error) {
        ASSERT_TRUE(r.http_status == 400 || r.http_status == 413 || r.http_status == 431);
      }
      if (f.below(4) == 0) {
        ChunkedBody again(limits);
        const Decoded whole = decode_pieces(again, b, {});
        ChunkedBody split(limits);
        ASSERT_EQ(decode_pieces(split, b, {f.below(b.size() + 1)}), whole);
      }
    } else {
      check_path(f.mutate(paths[f.below(paths.size())]));
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(iterations, 20000);
  std::printf("fuzz: %d inputs\n", iterations);
}

}  // namespace
