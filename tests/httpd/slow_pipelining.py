#!/usr/bin/env python3
# slow_pipelining.py BINARY STDERR_PREFIX -- clients that pipeline and read
# their answers slowly, against parkway-httpd servers this script starts
# on 127.0.0.1 (2 workers, files under a temporary root). Prints PASS/FAIL:
#   - --header-timeout 1: 20 requests for an 8 KiB file and the start of
#     a 21st head in one write, the rest of that head 0.2 s later, answers
#     read at 40 KB/s through a 4 KiB receive buffer: 21 answers. The
#     head's clock runs from the end of the answers' send before it, not
#     from their making (a 408 with the head's rest unread, before);
#   - --body-timeout 1: the same 20, then a POST whose 5-byte body comes
#     0.2 s after its head: 20 answers and the POST's 405, whole (the
#     body's clock ran out while the answers went out, and the connection
#     was reset, before);
#   - --body-timeout 1: the same 20, then a GET with a body and Expect:
#     100-continue whose body is sent once the 100 has come, answers read
#     at 20 KB/s for 2 s, then at once: 20 answers, the 100 and the 200
#     (the 100 went out with the answers, and the body's clock was not
#     restarted after their send: a 408, before);
#   - --access-log: a head that stalls gets a 408, and the log has its line;
#   - --shutdown-timeout 10: SIGTERM while a 4 MB file goes to a client
#     reading at 2 MB/s that pipelined one more request: the file arrives
#     whole and the connection ends with EOF, not a reset (the close with
#     the request unread reset it, and the end of the file was lost);
#   - the same with SIGTERM before the connection's first request: that
#     request's answer is its last (Connection: close), and the request
#     pipelined behind it is in the socket, not yet read, when the answer
#     ends: EOF, not a reset (the server lingered only for bytes it had
#     read, and the close reset the connection).
import atexit
import concurrent.futures
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from verdict import check

BIN, ERR = sys.argv[1], sys.argv[2]
ROOT = tempfile.mkdtemp(prefix="parkway-httpd-slow-")
atexit.register(shutil.rmtree, ROOT, True)
EIGHT_K = b"8" * 8192
BIG = os.urandom(4_000_000)
with open(os.path.join(ROOT, "8k"), "wb") as f:
    f.write(EIGHT_K)
with open(os.path.join(ROOT, "big.bin"), "wb") as f:
    f.write(BIG)


def capture(fn):
    """Runs fn; returns a function that returns its (ok, why) or raises
    what it raised, for check()."""
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 -- check() reports it
        def again(e=e):
            raise e
        return again
    return lambda: result


def start(args, err):
    p = subprocess.Popen([BIN, "--port", "0", "--workers", "2", "--root", ROOT] + args,
                         stdout=subprocess.PIPE, stderr=open(err, "w"), text=True)
    line = p.stdout.readline()
    return p, int(line.split("127.0.0.1:")[1].split()[0])


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def answers(data):
    """[(status, whole)] of the answers in data, in order."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            out.append(("partial head", False))
            break
        lines = head.split(b"\r\n")
        status = lines[0].split(b" ")[1].decode()
        n = 0
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        out.append((status, len(rest) >= n))
        data = rest[n:]
    return out


def read_loop(s, limit, bufsize=4096, before=None, after=None):
    """Reads s until EOF, a reset or `limit` seconds: (bytes, "eof" |
    "reset" | "limit"). before(elapsed) runs before each receive;
    after(got, chunk, elapsed) after each, and returns how long to pause."""
    got, t0 = b"", time.time()
    s.settimeout(0.5)
    while time.time() - t0 < limit:
        if before:
            before(time.time() - t0)
        try:
            b = s.recv(bufsize)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got, "reset"
        if not b:
            return got, "eof"
        got += b
        pause = after(got, b, time.time() - t0) if after else 0
        if pause:
            time.sleep(pause)
    return got, "limit"


def slow_read(s, rate, limit):
    """Reads at about `rate` bytes a second until EOF, a reset or `limit`
    seconds: (bytes, "eof" | "reset" | "limit")."""
    return read_loop(s, limit, after=lambda got, b, t: len(b) / rate)


def pipeline_then(port, tail, rest):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /8k HTTP/1.1\r\nHost: t\r\n\r\n" * 20 + tail)
    time.sleep(0.2)
    s.sendall(rest)
    got, how = slow_read(s, 40_000, 20)
    s.close()
    return answers(got), how


def head_after_answers():
    p, port = start(["--header-timeout", "1"], ERR + ".head")
    try:
        a, how = pipeline_then(port, b"GET /8k HTTP/1.1\r\nHo", b"st: t\r\nConnection: close\r\n\r\n")
    finally:
        stop(p)
    ok = len(a) == 21 and all(st == "200" and whole for st, whole in a)
    return ok, "got %s, then %s" % ([st for st, _ in a], how)


def body_after_answers():
    p, port = start(["--body-timeout", "1"], ERR + ".body")
    try:
        a, how = pipeline_then(
            port, b"POST /8k HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", b"hello")
    finally:
        stop(p)
    ok = len(a) == 21 and all(st == "200" and whole for st, whole in a[:20]) and a[20] == ("405", True)
    return ok, "got %s, then %s" % ([st for st, _ in a], how)


def expect_after_answers(log, request, ready, then, first):
    """The same 20, then `request` (it asks for 100-continue), the answers
    read at 20 KB/s for 2 s, then as fast as they come (the 100's send, or
    an early answer's, waits behind them); once ready(what came) holds, the
    client sends `then`. True when the 20 come whole, then an answer of
    status `first`, then a whole 200."""
    p, port = start(["--body-timeout", "1"], ERR + log)
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /8k HTTP/1.1\r\nHost: t\r\n\r\n" * 20 + request)
        sent = []

        def after(got, b, t):
            if not sent and ready(got):
                s.sendall(then)
                sent.append(True)
            return len(b) / 20_000 if t < 2 else 0

        got, how = read_loop(s, 20, after=after)
        s.close()
    finally:
        stop(p)
    a = answers(got)
    ok = (len(a) == 22 and all(st == "200" and whole for st, whole in a[:20]) and a[20][0] == first and
          a[21] == ("200", True))
    return ok, "got %s, then %s" % ([st for st, _ in a], how)


def continue_after_answers():
    """A GET with a body that asks for 100-continue and sends its body only
    once the 100 has come: the 100, then its answer. (A GET: a request whose
    answer is an error gets that answer at once, with no 100.)"""
    return expect_after_answers(
        ".continue",
        b"GET /8k HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
        lambda got: b"HTTP/1.1 100 Continue\r\n\r\n" in got, b"hello", "100")


def early_error_after_answers():
    """A POST (405: an error the head decides) with Expect: 100-continue on
    a kept connection: its 405 goes out at once behind the 20; the client,
    told keep-alive, then sends the body and one more request, which is
    answered (the body's clock counts from the early answer's send)."""
    def answered(got):
        at = got.find(b"HTTP/1.1 405 ")
        return at >= 0 and got.find(b"\r\n\r\n", at) >= 0

    return expect_after_answers(
        ".early", b"POST /8k HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
        answered, b"hello" + b"GET /8k HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", "405")


def head_timeout_logged():
    err = ERR + ".log"
    p, port = start(["--header-timeout", "1", "--access-log"], err)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /8k HTTP/1.1\r\nHost: t\r\n")
        got, how = slow_read(s, 10_000_000, 5)
        s.close()
    finally:
        stop(p)
    log = [line for line in open(err).read().splitlines() if '"-" 408' in line]
    return got.startswith(b"HTTP/1.1 408 ") and len(log) == 1, "answer %r, log lines %s" % (got[:20], log)


def read_big_at_2mbs(s, sigterm_to=None):
    """Reads a 4 MB answer at 2 MB/s from s, pipelining GET /8k after
    0.3 s (and sending sigterm_to SIGTERM after 0.5 s, if given). Returns
    what came and how it ended (eof, reset, or limit after 20 s)."""
    done = set()

    def before(t):
        if "sent" not in done and t > 0.3:
            s.sendall(b"GET /8k HTTP/1.1\r\nHost: t\r\n\r\n")
            done.add("sent")
        if sigterm_to is not None and "termed" not in done and t > 0.5:
            sigterm_to.send_signal(signal.SIGTERM)
            done.add("termed")

    return read_loop(s, 20, 65536, before, lambda got, b, t: len(b) / 2_000_000)


def slow_reader_socket(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.connect(("127.0.0.1", port))
    return s


def shutdown_with_a_request_waiting():
    p, port = start(["--shutdown-timeout", "10"], ERR + ".shutdown")
    try:
        s = slow_reader_socket(port)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        got, how = read_big_at_2mbs(s, sigterm_to=p)
        s.close()
        rc = p.wait(timeout=15)
    finally:
        stop(p)
    _, _, body = got.partition(b"\r\n\r\n")
    ok = body[:len(BIG)] == BIG and how == "eof" and rc == 0
    return ok, "%d of %d body bytes, then %s, exit %s" % (min(len(body), len(BIG)), len(BIG), how, rc)


def shutdown_then_a_request_waiting():
    """SIGTERM first, then a new connection's first request (answered in
    the grace period, its last: Connection: close) for the 4 MB file, and
    one more request pipelined while it is read at 2 MB/s. That request
    waits in the socket, not in the server's buffer, when the answer ends."""
    p, port = start(["--shutdown-timeout", "10"], ERR + ".shutdown-first")
    try:
        s = slow_reader_socket(port)
        time.sleep(0.2)  # accepted
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        got, how = read_big_at_2mbs(s)
        s.close()
        rc = p.wait(timeout=15)
    finally:
        stop(p)
    head, _, body = got.partition(b"\r\n\r\n")
    ok = body[:len(BIG)] == BIG and b"Connection: close" in head and how == "eof" and rc == 0
    return ok, "%d of %d body bytes, then %s, exit %s" % (min(len(body), len(BIG)), len(BIG), how, rc)


# Each case has a server of its own and mostly waits: they run side by side.
CASES = [
    ("pipelined answers read slowly: the next head's timeout counts from their send", head_after_answers),
    ("pipelined answers read slowly: the next body's timeout counts from their send", body_after_answers),
    ("pipelined answers read slowly, then Expect: 100-continue: the body's timeout counts from their send",
     continue_after_answers),
    ("pipelined answers read slowly, then an early 405 (Expect: 100-continue, kept): the body sent after it "
     "is dropped and the next request answered", early_error_after_answers),
    ("a head timeout's 408 is in the access log", head_timeout_logged),
    ("SIGTERM with a pipelined request unread: the answer in hand arrives whole, then EOF",
     shutdown_with_a_request_waiting),
    ("SIGTERM, then a last answer (Connection: close) with a request pipelined behind it unread: "
     "the answer arrives whole, then EOF", shutdown_then_a_request_waiting),
]
with concurrent.futures.ThreadPoolExecutor(len(CASES)) as pool:
    outcomes = [pool.submit(capture, fn) for _, fn in CASES]
    for (name, _), outcome in zip(CASES, outcomes):
        check(name, outcome.result())
