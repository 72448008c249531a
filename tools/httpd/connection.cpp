// connection.cpp -- the per-connection coroutine of parkway-httpd: the model
// of a parkway server.
//
// One coroutine per connection (serve_connection) waits for a request,
// then serve_until_idle reads and parses every complete request buffered
// (pipelining), appending each response to one output string, which goes
// out in a single send before the next read, or once it holds 64 KiB, or
// before a /fib computed in parallel is begun (a small cached file's
// body is in the answer; a larger one follows its head by
// io::send_file). The buffer is small and
// doubles when a head does not fit, up to the largest head the limits
// allow. A connection that waits for its next request holds no buffer:
// it frees the buffer, the output string and the parser, and waits with
// an owned receive (io::recv_owned) in serve_connection's own frame;
// the block that receive takes when bytes arrive becomes the buffer. So
// an idle keep-alive connection costs one coroutine frame and its
// operation's state (docs/benchmarks.md, "idle"). A request's body is
// read and thrown away, after the handler has made the answer: the
// handler reads the head where the parser left it, in the buffer that a
// body read moves. Timeouts are OpOptions on the reads: the head of a
// request must arrive within header_timeout of its first byte (of the
// accept, for the first one; of the end of the send of the answers
// before it, for one pipelined behind them), its body within
// body_timeout of the head's end (or of that send), and a keep-alive
// connection may wait idle_timeout for the next request. Every read that waits for a request after the first carries
// the server's `idle` CancelSource, every other operation its `abort`
// source, which is how shutdown closes idle keep-alive connections at once
// and the others after a grace period; a request answered once shutdown
// has begun is its connection's last. A connection the server closes
// while the client may still be sending (an error answer) first reads
// and drops what comes for a short while (linger), so the close is not
// a reset that could destroy the answer.
#include "connection.hpp"

#include <netinet/in.h>
#include <linux/sockios.h>  // SIOCOUTQ
#include <linux/tcp.h>      // TCP_NOTSENT_LOWAT, TCP_INFO and the kernel's tcp_info (tcpi_bytes_acked)
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_response.hpp"

namespace httpd {
namespace io = parkway::io;
using parkway::Task;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kSmallBuffer = 2 * 1024;   // holds a typical request, or a pipelined batch of small ones
constexpr std::size_t kLargeBuffer = 32 * 1024;  // holds the largest head the limits allow
// Reading what a closed client still sends: at most kLingerTime in all,
// kLingerWait for each read, kLingerBytes (nginx: lingering_time 30 s,
// lingering_timeout 5 s, no byte limit). A client that writes a whole
// large body before it reads (an upload refused with 413) must be able
// to finish writing: reset after 64 KiB, it got EPIPE and never read the
// answer (Python's http.client raises BrokenPipeError).
constexpr auto kLingerTime = std::chrono::seconds(10);
constexpr auto kLingerWait = std::chrono::seconds(2);
constexpr std::size_t kLingerBytes = std::size_t(256) << 20;
// Answers pipelined behind one another go out in one send, but once this
// much waits, it goes before the next request is answered: a client that
// pipelines hundreds of requests for small files and reads nothing would
// otherwise make the connection hold every answer's body.
constexpr std::size_t kMaxBatched = 64 * 1024;
// A send's timeout (idle_timeout) is per wait for room in the socket, and
// the kernel reports room only once a third of its buffer (autotuned to
// megabytes) has drained: a client reading a large answer slower than
// about a buffer's third per timeout was cut off while still reading.
// With TCP_NOTSENT_LOWAT the socket holds at most this much unsent and
// reports room once half of it has gone, so each wait is for this
// much / 2 of progress (and a file body's send looks past a wait that
// timed out to the client's acknowledgements: write_response).
constexpr int kNotSentLowat = 128 * 1024;

// The access log's request line for an answer to no request (one that
// could not be parsed, or did not come in time).
const std::string kNoRequestLine = "-";

// What a socket has done with our bytes since it was accepted: `acked`,
// those the peer acknowledged (it acknowledges new bytes only as its
// reader makes room); `taken`, those and the ones still queued (sent or
// not). After a send that failed, `taken` against the bytes the sends
// before it handed over says how much of it went.
struct SocketProgress {
  std::uint64_t acked, taken;
};
// The two counts come from two system calls: an acknowledgement between
// them moves bytes from the queue to `acked` unseen, and the sum comes
// out short (by up to 93 KiB in a slow reader's stream). So acked is
// read again after the queue, until it has not moved in between.
std::optional<std::uint64_t> bytes_acked(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
    return std::nullopt;
  return ti.tcpi_bytes_acked;
}
std::optional<SocketProgress> socket_progress(int fd) {
  std::optional<std::uint64_t> acked = bytes_acked(fd);
  for (int tries = 0; acked && tries < 100; ++tries) {
    int queued = 0;
    if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return std::nullopt;
    const std::optional<std::uint64_t> again = bytes_acked(fd);
    if (again && *again == *acked) return SocketProgress{*acked, *acked + std::uint64_t(queued)};
    acked = again;
  }
  return std::nullopt;
}
std::optional<std::uint64_t> bytes_taken(int fd) {
  const std::optional<SocketProgress> p = socket_progress(fd);
  return p ? std::optional<std::uint64_t>(p->taken) : std::nullopt;
}

class Connection {
 public:
  Connection(io::Socket s, ServerState& st)
      : sock_(std::move(s)), st_(st), head_deadline_(Clock::now() + st.config.header_timeout) {
    // The client's address for the access log, taken while it is known:
    // once the client has reset the connection, getpeername fails, and an
    // answer made after (a /fib for a client that has gone) was logged
    // as "(no address)".
    if (st.config.access_log) {
      const io::Address a = sock_.peer_address();
      log_ = std::make_unique<LogState>();
      log_->peer = a.size() != 0 ? a.to_string() : "-";
    }
  }
  // Answers batched and never sent (a frame destroyed, an exception): a
  // line each, with no bytes.
  ~Connection() {
    if (log_)
      for (const Unsent& u : log_->unsent) write_log_line(u.request_line, u.status, 0);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  io::Socket& socket() { return sock_; }
  // Frees the buffers and the parser; the options of the idle wait.
  io::OpOptions start_idle_wait();
  // The bytes that ended the wait become the buffer.
  void start_request(io::Bytes got);
  Task<bool> serve_until_idle();
  Task<void> linger();
  // Shutdown ended the idle wait while a request was on its way: its
  // bytes, unread, would make the close a reset that destroys what the
  // client has yet to read of the answers before (RFC 9112 9.6). True
  // (and the connection set to linger) if bytes are waiting.
  bool shut_down_with_bytes_waiting();

 private:
  Task<bool> answer_buffered();
  std::string_view buffered() const { return {reinterpret_cast<const char*>(buf_.get()) + begin_, end_ - begin_}; }
  Task<bool> read_more(io::OpOptions o);
  void free_for_idle();
  Task<bool> flush(bool last = false, bool more = false);
  Task<bool> discard_body(Clock::time_point deadline, bool may_continue = true);
  void skip_empty_lines();
  // Batches r's head, with "Connection: close" if it is the connection's
  // `last` answer, and its body in memory. An answer without a file body
  // is logged (as request_line) by the flush that sends it; one with a
  // file body by its caller, once the file has gone.
  void append_answer(const Response& r, bool last, const std::string& request_line);
  Task<bool> write_response(Response& r, bool last, const std::string& request_line);
  std::string request_line() const;
  // One access-log line: the peer, the time (UTC), the request line, the
  // status and the body's bytes that went out.
  void write_log_line(const std::string& request_line, int status, std::uint64_t bytes) const;
  // The line of a file answer, its body's bytes those of the last
  // write_response that went (all of them, unless it failed part-way).
  void log_file_answer(const std::string& request_line, const Response& r) const;
  // After a send of out_ that ended (ok: all of it went), the lines of the
  // answers it carried, each with the bytes of its body that went.
  void log_sent(bool ok);
  // Whether r is the connection's last answer (see its definition).
  bool is_last_answer(const Response& r);

  io::Socket sock_;
  ServerState& st_;
  // The access log's state (none when it is off: a pointer, so that an
  // idle connection's frame grows by 8 bytes only).
  struct Unsent {  // an answer batched in out_, logged once its send ends
    std::string request_line;
    int status;
    std::uint64_t body_begin;  // its body's place in the connection's output (bytes before it)
    std::uint64_t body_size;   // 0 for a HEAD's
  };
  struct LogState {
    std::string peer;  // the client's address
    std::vector<Unsent> unsent;
    std::uint64_t taken = 0;  // bytes the sends so far handed to the socket
  };
  std::unique_ptr<LogState> log_;
  std::unique_ptr<RequestParser> parser_;  // none while idle
  RequestParser& parser() {
    if (!parser_) parser_ = std::make_unique<RequestParser>(st_.config.limits);
    return *parser_;
  }
  std::unique_ptr<std::byte[]> buf_;  // none while idle
  std::size_t size_ = 0;             // of buf_
  std::size_t begin_ = 0, end_ = 0;  // unconsumed bytes: buf_[begin_, end_)
  std::string out_;                  // responses waiting for the next flush
  int error_status_ = 0;             // a body error: the status to answer
  std::uint64_t file_sent_ = 0;      // of the last write_response's file body (access log only)
  bool peer_closed_ = false;         // a read saw EOF or a reset
  bool wr_shut_ = false;             // our side is shut down (shutdown(SHUT_WR))
  bool linger_ = false;              // closing after an answer while the client may still send
  bool first_ = true;                // no request answered yet
  Clock::time_point head_deadline_;  // the head being received must be complete by then
  // The idle wait's end, from the last answer: waits that brought only
  // empty lines keep it (epoch: none yet, the next wait sets it).
  Clock::time_point idle_deadline_{};
};

// Appends what recv gives to the buffer (compacting it first, and
// doubling it when it is full). False on EOF, error, timeout or cancel.
Task<bool> Connection::read_more(io::OpOptions o) {
  if (!buf_) {
    buf_ = std::make_unique_for_overwrite<std::byte[]>(kSmallBuffer);
    size_ = kSmallBuffer;
  }
  if (begin_ > 0) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == size_) {
    if (size_ == kLargeBuffer) co_return false;  // cannot happen within the limits
    auto bigger = std::make_unique_for_overwrite<std::byte[]>(size_ * 2);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    size_ *= 2;
  }
  auto n = co_await sock_.recv({buf_.get() + end_, size_ - end_}, o);
  if (!n || *n == 0) {
    if (n || (n.error() != std::errc::timed_out && n.error() != std::errc::operation_canceled)) peer_closed_ = true;
    co_return false;
  }
  end_ += *n;
  co_return true;
}

// Sends every response batched so far, in one send_all (with MSG_MORE
// when a file body follows: `more`). The connection's
// last flush (`last`): once the grace period of a shutdown is over every
// operation carrying `abort` fails at once, so the last answer (a 503 for
// a computation that stopped) goes out with a short timeout of its own.
Task<bool> Connection::flush(bool last, bool more) {
  if (out_.empty()) co_return true;
  io::OpOptions o{.timeout = st_.config.idle_timeout, .cancel = &st_.abort};
  if (last && st_.abort.cancelled()) o = {.timeout = std::chrono::milliseconds(500)};
  auto r = co_await sock_.send_all({reinterpret_cast<const std::byte*>(out_.data()), out_.size()}, o,
                                   more ? MSG_NOSIGNAL | MSG_MORE : MSG_NOSIGNAL);
  if (log_) log_sent(bool(r));
  out_.clear();
  co_return bool(r);
}

// Reads and drops the body of the request just parsed. False when the
// connection must close (error_status_ set when the client should hear why).
Task<bool> Connection::discard_body(Clock::time_point deadline, bool may_continue) {
  const BodyKind kind = parser().body_kind();
  if (kind == BodyKind::None) co_return true;
  // The 100 goes out with the answers before it, by the flush below,
  // whose end the body's deadline then counts from: the client sends the
  // body only once it has read the 100, behind those answers (counted
  // from the head, a slow reader's body timed out before it could come).
  if (may_continue && parser().expect_continue() && begin_ == end_) out_.append(kContinueResponse);
  ContentLengthBody length(parser().content_length());
  ChunkedBody chunked(st_.config.limits);
  // One deadline for the whole body (from the end of its head), not one
  // per read: a client that trickles a byte at a time (slow POST) is
  // closed like a slow head.
  io::OpOptions o{.deadline = deadline, .cancel = &st_.abort};
  for (;;) {
    auto drop = [](std::string_view) {};
    BodyResult r = kind == BodyKind::Length ? decode_body(length, buffered(), drop)
                                            : decode_body(chunked, buffered(), drop);
    begin_ += r.consumed;
    if (r.status == BodyStatus::Done) co_return true;
    if (r.status == BodyStatus::Error) {
      error_status_ = r.http_status;
      co_return false;
    }
    // The answers before this request go out before the wait: a client
    // that sends the rest of a body later would otherwise hold them back
    // (and, request after request, grow them without bound). Their send
    // waits as any answer's does (idle_timeout without progress), and the
    // body's deadline then counts from its end: the time a slow reader
    // took to take them is not its body's.
    if (!out_.empty()) {
      const bool sent = co_await flush();
      if (!sent) co_return false;
      deadline = std::max(deadline, Clock::now() + st_.config.body_timeout);
      o.deadline = deadline;
    }
    const bool more = co_await read_more(o);
    if (!more) {
      if (Clock::now() >= deadline) error_status_ = 408;  // too slow: say so before closing
      co_return false;
    }
  }
}

void Connection::append_answer(const Response& r, bool last, const std::string& request_line) {
  out_.append(r.fields);
  out_.append(response_head_end(/*keep_alive=*/!last));
  if (log_ && !r.file.is_open()) {
    const bool head = parser_ && parser_->method_id() == Method::Head;
    log_->unsent.push_back({request_line, r.status, log_->taken + out_.size(), head ? 0 : r.body.size()});
  }
  out_.append(r.body);
}

// Batches the response. A file body goes after the batch by
// io::send_file (sendfile(2) when the file is cached), the batch sent
// first with MSG_MORE, so that a head and a small body leave in one
// segment.
Task<bool> Connection::write_response(Response& r, bool last, const std::string& request_line) {
  append_answer(r, last, request_line);
  file_sent_ = 0;
  if (!r.file.is_open()) co_return true;
  const bool head_sent = co_await flush(/*last=*/false, /*more=*/true);
  if (!head_sent) co_return false;
  // The idle timeout is for a client that stopped reading, not for one
  // that reads slowly: each wait for room in the socket has it, and a
  // wait that times out goes on with the rest of the file if the client
  // acknowledged bytes since the last look (a wait for room can need
  // more than the timeout's worth of a slow reader's reading: the
  // receiver opens its window a segment of 64 KiB at a time on loopback).
  // So a client is cut once it has taken nothing for one to two idle
  // timeouts. One TCP_INFO read per file body sent this way (bodies of
  // more than 8 KiB, or not cached).
  io::OpOptions o{.timeout = st_.config.idle_timeout, .cancel = &st_.abort};
  std::optional<SocketProgress> mark = socket_progress(sock_.fd());
  std::uint64_t done = 0;  // the file's bytes the socket took
  for (;;) {
    auto n = co_await sock_.send_file(r.file, r.file_offset + done, r.file_length - done, o);
    if (n) {
      done += *n;
      break;
    }
    const std::optional<SocketProgress> now = mark ? socket_progress(sock_.fd()) : std::nullopt;
    if (now && now->taken >= mark->taken)  // failed part-way: how far it went
      done += std::min<std::uint64_t>(now->taken - mark->taken, r.file_length - done);
    if (n.error() != std::errc::timed_out || !now || now->acked == mark->acked || done == r.file_length) break;
    mark = now;
  }
  file_sent_ = done;
  if (log_) log_->taken += done;
  co_return done == r.file_length;  // short: the file shrank, and the length is a lie now
}

// Before an idle wait (nothing buffered, everything sent): free the
// buffer, the output string and the parser (between two requests).
void Connection::free_for_idle() {
  buf_.reset();
  parser_.reset();
  size_ = begin_ = end_ = 0;
  std::string().swap(out_);
}

// "METHOD target" of the request just parsed, for the access log (empty
// when it is off). Copied out before the body is read, which may move the
// bytes the parser's views point at. The log quotes it: '"', '\' and
// bytes outside printable ASCII are written \xHH (the parser lets only
// '"' and '\' of these into a request line), so a request cannot end
// the quoted field early and forge the rest of the line.
std::string Connection::request_line() const {
  if (!st_.config.access_log) return {};
  std::string line;
  auto append_escaped = [&line](std::string_view v) {
    for (const char ch : v) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        line += "\\x";
        line += kHex[c >> 4];
        line += kHex[c & 15];
      } else {
        line += ch;
      }
    }
  };
  append_escaped(parser_->method());
  line += ' ';
  append_escaped(parser_->target());
  line += parser_->version() == 10 ? " HTTP/1.0" : " HTTP/1.1";
  return line;
}

void Connection::log_sent(bool ok) {
  // A send that failed took some of out_ at most: what the socket has
  // taken in all, against the bytes before each body, says how much of
  // that body went (none, for a client that had reset).
  std::uint64_t end = log_->taken + out_.size();
  if (!ok) {
    const std::optional<std::uint64_t> taken = bytes_taken(sock_.fd());
    end = taken ? std::clamp(*taken, log_->taken, end) : log_->taken;
  }
  for (const Unsent& u : log_->unsent)
    write_log_line(u.request_line, u.status,
                   end <= u.body_begin ? 0 : std::min(end - u.body_begin, u.body_size));
  log_->unsent.clear();
  log_->taken = end;
}

void Connection::log_file_answer(const std::string& request_line, const Response& r) const {
  if (!log_) return;
  const bool head = parser_ && parser_->method_id() == Method::Head;
  write_log_line(request_line, r.status, head ? 0 : file_sent_);
}

void Connection::write_log_line(const std::string& request_line, int status, std::uint64_t bytes) const {
  // Common Log Format's time: [07/Dec/2026:09:06:24 +0000] (the C
  // locale's month names).
  char when[40];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  const std::size_t n = std::strftime(when, sizeof when, "[%d/%b/%Y:%H:%M:%S +0000]", &tm);
  std::string l;
  l.reserve(log_->peer.size() + request_line.size() + 64);
  l.append(log_->peer).append(" ").append(when, n).append(" \"").append(request_line).append("\" ");
  l.append(std::to_string(status)).append(" ").append(std::to_string(bytes)).append("\n");
  st_.log.write(l);
}

// The connection's last answer: the request asked to close, the
// handler's answer closes (a /fib stopped by the shutdown), or the
// shutdown has begun. Then the request in hand when it began (or the
// first one read after) is the last: those pipelined behind it are left
// for the client to retry (RFC 9112 9.3.2). Decided as the head's
// Connection field is written, so that an answer made before the
// shutdown and sent after (a long /fib) says "close" too, and a
// connection never closes after an answer that said keep-alive.
bool Connection::is_last_answer(const Response& r) {
  return r.closes || !parser().keep_alive() || st_.idle.cancelled();
}

// Answers every complete request already buffered. False when the
// connection must close (the answer, if any, is sent). Its own coroutine,
// so that the handler's state lives in a frame only while requests are
// answered, not in the frame of an idle connection.
Task<bool> Connection::answer_buffered() {
  const ServerConfig& cfg = st_.config;
  for (;;) {
    ParseResult p = parser().parse(buffered());
    if (p.status == ParseStatus::NeedMore) co_return true;
    if (p.status == ParseStatus::Error) {
      // A HEAD's answer has no content, errors' included (RFC 9110 9.3.2);
      // the method is known once its token is read, before the error.
      Response r = simple_response(p.http_status, parser().method() == "HEAD");
      append_answer(r, /*last=*/true, kNoRequestLine);
      co_await flush(/*last=*/true);
      linger_ = true;  // the rest of what the client sent is unread
      co_return false;
    }
    begin_ += p.consumed;
    // A /fib computed in parallel takes long: the answers batched before
    // it go out first. Held back, a client that pipelines had none of
    // them until every request of its batch was computed, and a client
    // that had sent its batch and gone had all of them computed for
    // nobody (the close was seen only at the batch's send). A client that
    // leaves during a computation is seen at its answer's send: its FIN
    // cannot be told from a half-close (a client that shuts its side after
    // its requests still reads the answers), so the computation runs on.
    if (!out_.empty() && computes_long(parser())) {
      const bool sent = co_await flush();
      if (!sent) co_return false;
    }
    // The answer first, while the head is where the parser's views say;
    // the body read that follows may move or overwrite it.
    Response r = co_await handle_request(parser(), cfg.handler);
    // The body's deadline counts from the answer (a /fib may take longer
    // than the body timeout), and only for a request with a body: no
    // clock read for most.
    Clock::time_point body_deadline =
        parser().body_kind() == BodyKind::None ? Clock::time_point{} : Clock::now() + cfg.body_timeout;
    const std::string line = request_line();
    // Expect: 100-continue, an error answer, and none of the body here
    // yet: the final answer goes out now, in place of the 100 (RFC 9110
    // 10.1.1: a status the head alone determines is sent at once), so
    // that the client need not send a body that is only thrown away. A
    // client that keeps the connection sends the body anyway, and it is
    // read and dropped as before; one that closes is not waited for.
    bool answered = false, last = false;
    if (r.status >= 400 && parser().expect_continue() && parser().body_kind() != BodyKind::None && begin_ == end_) {
      last = is_last_answer(r);
      const bool written = co_await write_response(r, last, line);
      if (r.file.is_open()) log_file_answer(line, r);
      if (!written) co_return false;
      const bool sent = co_await flush(last);
      if (!sent) co_return false;
      answered = true;
    }
    // The early answer's send (behind pipelined answers a slow reader
    // takes) is not the body's time: its clock counts from the send's end,
    // as discard_body does after a flush of its own. Without this, the
    // keep-alive answer was followed by a timeout at the first read and a
    // close, and the body and next request the client then sent were lost.
    if (answered) body_deadline = std::max(body_deadline, Clock::now() + cfg.body_timeout);
    bool body_read = true;
    if (!(answered && last)) body_read = co_await discard_body(body_deadline, /*may_continue=*/!answered);
    if (!body_read) {
      if (answered) {  // its answer is sent: nothing more can be said
        linger_ = error_status_ != 0;
        co_return false;
      }
      if (error_status_ != 0) {
        // A HEAD's answer has no content, errors' included (RFC 9110 9.3.2)
        const Response e = simple_response(error_status_, parser().method_id() == Method::Head);
        append_answer(e, /*last=*/true, line);
        co_await flush(/*last=*/true);
        linger_ = true;
      }
      co_return false;
    }
    if (!answered) {
      last = is_last_answer(r);
      const bool written = co_await write_response(r, last, line);
      // A file body's line once it is sent, with its bytes that went out
      // (a client that left, a file that shrank: not the whole length);
      // the others' at the send of their batch (flush).
      if (r.file.is_open()) log_file_answer(line, r);
      if (!written) co_return false;
    }
    if (out_.size() >= kMaxBatched) {
      const bool sent = co_await flush();
      if (!sent) co_return false;
    }
    parser().reset();
    first_ = false;
    idle_deadline_ = {};  // the next idle wait counts from here
    // A pipelined head already begun has header_timeout from here; with
    // nothing buffered, start_request() starts the next head's clock.
    if (begin_ != end_) head_deadline_ = Clock::now() + cfg.header_timeout;
    if (last) {
      co_await flush(/*last=*/true);
      (void)co_await sock_.shutdown(SHUT_WR);
      wr_shut_ = true;
      // Requests pipelined behind it, unanswered, may be in our buffer,
      // still in the socket (read only as an answer ends) or on their way
      // (a client that pipelines does not know the answer closes): closed
      // with any of them unread, the connection is reset, and the end of
      // an answer the client has yet to read (a file's) is lost. So it
      // lingers always: a client that reads the answer and closes ends
      // that at once (RFC 9112 9.6).
      linger_ = true;
      co_return false;
    }
  }
}

// Answers what the idle wait brought, and returns when nothing is left
// buffered (true) or the connection must close (false). The wait itself
// is serve_connection's, so that an idle connection holds that frame
// alone. (Results of co_await are bound to names before they are tested,
// here and above: GCC 12 miscompiled `if (!co_await ...) co_return
// false;` in this function; docs/guide.md, "Limits".)
Task<bool> Connection::serve_until_idle() {
  for (;;) {
    const bool answered = co_await answer_buffered();
    if (!answered) co_return false;
    const bool had_answers = !out_.empty();
    const bool sent = co_await flush();
    if (!sent) co_return false;
    skip_empty_lines();
    if (begin_ == end_) co_return true;
    // A head begun behind answers has its header_timeout from the end of
    // their send: the time a slow reader took to take them is not its
    // head's (its rest may be waiting in the socket, unread by us).
    if (had_answers) head_deadline_ = std::max(head_deadline_, Clock::now() + st_.config.header_timeout);
    // The rest of a head. Whether it is a HEAD's is read first: the
    // parser's views point into the buffer, which read_more moves (or
    // frees, when it grows it) before it waits.
    const bool is_head = parser().method() == "HEAD";
    const bool more = co_await read_more({.deadline = head_deadline_, .cancel = &st_.abort});
    if (!more) {
      // Slow or stalled head: say so, then close (a client that closed
      // mid-head hears nothing, nor one whose head the shutdown's grace
      // period cut short: it did not time out, as a body cut short by it
      // is no 408 either).
      if (peer_closed_ || Clock::now() < head_deadline_) co_return false;
      // A HEAD's answer has no content, errors' included (RFC 9110 9.3.2)
      const Response e = simple_response(408, is_head);
      append_answer(e, /*last=*/true, kNoRequestLine);
      co_await flush(/*last=*/true);
      linger_ = true;
      co_return false;
    }
  }
}

// Empty lines before a request (RFC 9112 2.2: a client may send a CRLF
// after a request body) are not the start of a head: a buffer holding
// nothing else is dropped, so that the connection waits idle, not for
// "the rest of a head" under the header timeout. Once a head has begun
// behind them they stay: the parser, which has scanned them already,
// skips them itself.
void Connection::skip_empty_lines() {
  const auto* b = reinterpret_cast<const char*>(buf_.get());
  for (std::size_t i = begin_; i < end_; ++i)
    if (b[i] != '\r' && b[i] != '\n') return;
  // A CR last is half a line end, or a bare CR (a 400, RFC 9112 2.2): it
  // stays, for the parser to see what follows it, as in one read.
  begin_ = end_ > begin_ && b[end_ - 1] == '\r' ? end_ - 1 : end_;
  if (parser_) parser_->reset();
}

// RFC 9112 9.6: closing a socket with bytes unread makes the kernel
// reset the connection, and a reset can destroy the answer just sent
// before the client has read it. So after an error answer, or a
// `Connection: close` one (requests may be pipelined behind it, read or
// not), the server half-closes and reads (and drops) what the client
// still sends, until its EOF, kLingerTime (kLingerWait without a byte) or kLingerBytes, then closes;
// also once shutdown has begun (an answer sent within the grace period
// must reach its client), but no longer than the grace period. Not after
// the client has closed.
Task<void> Connection::linger() {
  if (!linger_ || peer_closed_) co_return;
  free_for_idle();
  if (!wr_shut_) (void)co_await sock_.shutdown(SHUT_WR);
  const Clock::time_point end = Clock::now() + kLingerTime;
  for (std::size_t dropped = 0; dropped < kLingerBytes;) {
    const io::OpOptions o{.deadline = std::min(end, Clock::now() + kLingerWait), .cancel = &st_.abort};
    auto got = co_await sock_.recv_owned(kSmallBuffer, o);
    if (!got || got->empty()) co_return;
    dropped += got->size();
  }
}

bool Connection::shut_down_with_bytes_waiting() {
  if (!st_.idle.cancelled()) return false;
  char b;
  if (::recv(sock_.fd(), &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return false;
  linger_ = true;
  return true;
}

io::OpOptions Connection::start_idle_wait() {
  free_for_idle();
  io::OpOptions o;
  // The head of the first request must arrive within header_timeout of
  // the accept; later ones may wait idle_timeout to begin.
  // At shutdown a keep-alive connection between requests closes at once;
  // a new one, whose first request may already be on its way, is given
  // the grace period (bounded by the header timeout).
  if (first_) {
    o.deadline = head_deadline_;
    o.cancel = &st_.abort;
  } else {
    // From the last answer: a client sending only empty lines (which
    // skip_empty_lines drops) does not begin the wait again.
    if (idle_deadline_ == Clock::time_point{}) idle_deadline_ = Clock::now() + st_.config.idle_timeout;
    o.deadline = idle_deadline_;
    o.cancel = &st_.idle;
  }
  return o;
}

void Connection::start_request(io::Bytes got) {
  end_ = got.size();
  size_ = got.capacity();
  buf_ = got.release();
  // The clock of this head starts at its first byte; the first request's
  // started at the accept and keeps running.
  if (!first_) head_deadline_ = Clock::now() + st_.config.header_timeout;
}

}  // namespace

struct AccessLog::Shared {
  static constexpr std::size_t kMaxPending = 1 << 20;  // bytes waiting for the reader, at most
  std::mutex m;
  std::condition_variable cv, drained;
  std::string pending;
  std::uint64_t dropped = 0;  // lines refused: the reader was too slow
  std::uint64_t lost = 0;     // lines whose write failed
  int lost_errno = 0;         // the last such failure
  bool stopping = false, writing = false, reported = false;
  bool reopen = false;        // open `path` again before the next batch
  std::string path;           // the log file; empty: stderr
  int fd = STDERR_FILENO;     // the writer thread's alone once it runs

  int open_file() const noexcept { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); }

  // SIGUSR1's reopen, on the log's thread: the lines from here on go to a
  // file the path names now (one a log rotation renamed is left to it). A
  // path that cannot be opened leaves the lines going to the file before.
  // Either is noted on stderr in one write that does not wait (a stderr
  // nobody reads must not stall the log: a plain write to its full pipe
  // blocked this thread, and every line after the rotation was lost) and
  // allocates nothing: a note stderr has no room for at once is dropped.
  void reopen_file() noexcept {
    char note[PATH_MAX + 160];
    int n;
    if (const int nfd = open_file(); nfd < 0) {
      n = std::snprintf(note, sizeof note,
                        "parkway-httpd: SIGUSR1: cannot reopen the access log %s: %s; its lines go on to the file "
                        "open before\n",
                        path.c_str(), std::strerror(errno));
    } else {
      ::close(fd);
      fd = nfd;
      n = std::snprintf(note, sizeof note, "parkway-httpd: SIGUSR1: the access log %s is reopened\n", path.c_str());
    }
    // Room for it now: a pipe that polls writable has a free page, and a
    // note of at most PIPE_BUF bytes goes in whole without waiting.
    pollfd p{STDERR_FILENO, POLLOUT, 0};
    const std::size_t len = std::min({std::size_t(n > 0 ? n : 0), sizeof note - 1, std::size_t(PIPE_BUF)});
    if (len > 0 && ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0) (void)!::write(STDERR_FILENO, note, len);
  }
};

int AccessLog::start(const char* path) {
  if (s_) return 0;
  auto s = std::make_shared<Shared>();
  if (path) {
    s->path = path;
    s->fd = s->open_file();
    if (s->fd < 0) return errno;
  }
  s_ = s;
  std::thread([s] {
    std::string out;
    for (;;) {
      bool reopen = false;
      {
        std::unique_lock lk(s->m);
        s->writing = false;
        s->drained.notify_all();
        s->cv.wait(lk, [&] { return !s->pending.empty() || s->stopping || s->reopen; });
        reopen = std::exchange(s->reopen, false);
        if (s->pending.empty() && !reopen) break;  // stopping, and everything written
        out.swap(s->pending);
        s->writing = true;
      }
      if (reopen) s->reopen_file();  // the lines not yet written go to the new file
      for (std::size_t at = 0; at < out.size();) {  // blocks on a slow reader: this thread alone
        const ssize_t n = ::write(s->fd, out.data() + at, out.size() - at);
        if (n > 0) {
          at += std::size_t(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          // A stderr that another holder of the open file made
          // non-blocking: wait for room, as a blocking write would.
          pollfd p{s->fd, POLLOUT, 0};
          (void)::poll(&p, 1, -1);
        } else {
          // EPIPE (SIGPIPE is ignored), ENOSPC, EIO, no stderr: the rest
          // of the batch is lost, counted for stop()'s report.
          const int e = n < 0 ? errno : EIO;
          const auto lines = std::count(out.begin() + std::ptrdiff_t(at), out.end(), '\n');
          std::lock_guard lk(s->m);
          s->lost += std::uint64_t(lines);
          s->lost_errno = e;
          break;
        }
      }
      out.clear();
    }
    if (!s->path.empty()) ::close(s->fd);
  }).detach();
  return 0;
}

bool AccessLog::to_file() const noexcept { return s_ && !s_->path.empty(); }

void AccessLog::reopen() noexcept {
  if (!to_file()) return;
  std::lock_guard lk(s_->m);
  s_->reopen = true;
  s_->cv.notify_one();
}

void AccessLog::write(std::string_view line) noexcept {
  if (!s_) return;
  std::lock_guard lk(s_->m);
  if (s_->pending.size() + line.size() > Shared::kMaxPending) {
    ++s_->dropped;
    return;
  }
  try {
    s_->pending.append(line);
  } catch (...) {
    ++s_->dropped;
    return;
  }
  s_->cv.notify_one();
}

void AccessLog::stop() noexcept {
  if (!s_) return;
  std::unique_lock lk(s_->m);
  if (s_->reported) return;
  s_->reported = s_->stopping = true;
  s_->cv.notify_one();
  // The reader may never read again: the exit does not wait for it.
  const bool drained =
      s_->drained.wait_for(lk, std::chrono::seconds(1), [&] { return s_->pending.empty() && !s_->writing; });
  if (!drained) return;  // a reader still stalled would block these writes too
  if (s_->dropped != 0)
    std::fprintf(stderr, "parkway-httpd: access log: %llu lines dropped (its reader was too slow)\n",
                 static_cast<unsigned long long>(s_->dropped));
  if (s_->lost != 0)  // on stderr, which may be the log itself: seen only if it works again
    std::fprintf(stderr, "parkway-httpd: access log: %llu lines lost (write: %s)\n",
                 static_cast<unsigned long long>(s_->lost), std::strerror(s_->lost_errno));
}

Task<void> serve_connection(io::Socket s, ServerState& state) {
  (void)s.set_nodelay();
  (void)::setsockopt(s.fd(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &kNotSentLowat, sizeof kNotSentLowat);
  try {
    Connection c(std::move(s), state);
    for (;;) {
      // Idle: the connection holds this frame, its receive's state and no
      // buffer (an owned receive takes its block when bytes arrive).
      auto got = co_await c.socket().recv_owned(kSmallBuffer, c.start_idle_wait());
      if (!got || got->empty()) {  // closed, reset, timed out or shut down
        if (!got && c.shut_down_with_bytes_waiting()) co_await c.linger();
        break;
      }
      c.start_request(std::move(*got));
      const bool open = co_await c.serve_until_idle();
      if (!open) {
        co_await c.linger();
        break;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parkway-httpd: connection: %s\n", e.what());
  }
  state.connections.fetch_sub(1, std::memory_order_release);
}

}  // namespace httpd
