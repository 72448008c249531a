#!/usr/bin/env python3
# fuzz.py PORT SECONDS [SEED] [THREADS] -- throws random bytes and mutated
# HTTP/1.1 requests at a parkway-httpd on 127.0.0.1:PORT for SECONDS and
# checks that every byte the server sends back is a sequence of well-formed
# responses:
#   - a status line "HTTP/1.1 NNN reason" (NNN from 100 to 599), CRLF;
#   - header lines "name: value" (a token, a colon), ending in CRLFCRLF;
#   - a Content-Length on every final response but 204 and 304, and exactly
#     that many body bytes (none after a HEAD);
#   - nothing after a response that says "Connection: close";
#   - for unmutated requests: the expected status and body, one response per
#     request, in order.
# Connections are fresh or reused, the request bytes go out in one or in
# several writes, some connections are dropped mid-request (FIN or RST).
# A response cut short is tolerated only when the server reset the connection
# (it closes after an error with unread input, and the kernel then discards
# what the client had not read yet).
#
# Prints one summary line; exits 1 (with the offending exchange on stderr)
# when a response is malformed, the server stops answering, or it is no
# longer serving /plaintext at the end.
import random
import re
import socket
import struct
import sys
import threading
import time

PORT = int(sys.argv[1])
SECONDS = float(sys.argv[2])
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
THREADS = int(sys.argv[4]) if len(sys.argv) > 4 else 4
ADDR = ("127.0.0.1", PORT)
RECV_TIMEOUT = 10.0      # the server answers or closes well within this
# The server may close a connection whose request head took longer than its
# header timeout (1 s in check-httpd.sh) to arrive, counted from the accept or
# from the previous response. A client that was that slow (a loaded machine)
# cannot tell such a close from a lost response: for those connections only
# well-formedness is checked, not the number of responses.
LATE = 0.8
CONNECT_TIMEOUT = 3.0
MAX_STREAM = 4 << 20     # never read more than this from one connection

STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5][0-9][0-9]) [\x20-\x7e]*")
HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\x20-\x7e\t]*?)[ \t]*")

stats_lock = threading.Lock()
stats = {"connections": 0, "requests": 0, "responses": 0, "resets": 0, "dropped": 0, "late": 0}
failure = []           # the first failure: (what, sent, received)
stop = threading.Event()


def count(key, n=1):
    with stats_lock:
        stats[key] += n


def fail(what, sent=b"", got=b""):
    with stats_lock:
        if not failure:
            failure.append((what, sent, got))
    stop.set()


class Malformed(Exception):
    pass


# ---- the requests ----------------------------------------------------------

VALID = [  # (request bytes, expected status, expected body or None)
    (b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"Hello, World!"),
    (b"GET /plaintext?x=1 HTTP/1.1\r\nHost: t\r\nAccept: */*\r\nUser-Agent: fuzz\r\n\r\n", 200, b"Hello, World!"),
    (b"HEAD /plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 200, b""),
    (b"GET /fib/5 HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"5"),
    (b"GET /fib/9 HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"34"),
    (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"hello, static world\n"),
    (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-4\r\n\r\n", 206, b"hello"),
    (b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n", 404, None),
    (b"GET /fib/x HTTP/1.1\r\nHost: t\r\n\r\n", 400, None),
    (b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 405, None),
    (b"PUT /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 405, None),
    (b"POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Trailer: v\r\n\r\n", 405, None),
    (b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc", 405, None),
    (b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", 405, None),
    (b"GET http://t/plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"Hello, World!"),
    (b"\r\nGET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n", 200, b"Hello, World!"),
]

NASTY = [b"\r", b"\n", b"\r\n", b"\x00", b" ", b"\t", b":", b"\xff", b"\x7f", b"%", b"%00", b"%2e%2e/",
         b"../", b"\r\n\r\n", b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
         b"-1", b"99999999999999999999", b"\r\n \r\n", b";", b"\"", b"HTTP/1.1", b"HTTP/9.9"]

BAD_CHUNKED = [
    b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\nab\r\n0\r\n\r\n", b"5\r\nabcdefgh\r\n0\r\n\r\n",
    b"ffffffffffffffffff\r\nx\r\n", b"fffffff\r\nx\r\n", b"-5\r\nabcde\r\n0\r\n\r\n",
    b"0x5\r\nabcde\r\n0\r\n\r\n", b"5 \r\nabcde\r\n0\r\n\r\n", b" 5\r\nabcde\r\n0\r\n\r\n",
    b"5\nabcde\n0\n\n", b"5\r\nabcde", b"5\r\nabcde\r\n", b"5\r\nabcde\r\n0\r\n",
    b"5;" + b"e" * 9000 + b"\r\nabcde\r\n0\r\n\r\n", b"0\r\n" + b"X-T: " + b"v" * 20000 + b"\r\n\r\n",
    b"0\r\nbad trailer\r\n\r\n", b"\r\n", b"", b"3\r\nabc\r\n" * 50 + b"0\r\n\r\n",
    b"100000\r\n" + b"a" * 100, b"5\r\nabcde\r\n\r\n", b"1\r\n\x00\r\n0\r\n\r\n",
]


def valid_request(rng):
    return rng.choice(VALID)


def mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        if not b:
            b += rng.randbytes(rng.randint(1, 16))
            continue
        op = rng.randrange(9)
        i = rng.randrange(len(b) + 1)
        if op == 0 and i < len(b):                        # bit flip
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and i < len(b):                      # byte replaced
            b[i] = rng.randrange(256)
        elif op == 2:                                     # random bytes inserted
            b[i:i] = rng.randbytes(rng.randint(1, 32))
        elif op == 3:                                     # a range deleted
            del b[i:i + rng.randint(1, 16)]
        elif op == 4:                                     # a range repeated
            j = rng.randrange(len(b))
            k = min(len(b), j + rng.randint(1, 64))
            b[i:i] = b[j:k] * rng.randint(1, 20)
        elif op == 5:                                     # truncated
            del b[i:]
        elif op == 6:                                     # a nasty token inserted
            b[i:i] = rng.choice(NASTY)
        elif op == 7:                                     # a line end changed
            crlf = [m.start() for m in re.finditer(rb"\r\n", bytes(b))]
            if crlf:
                j = rng.choice(crlf)
                b[j:j + 2] = rng.choice([b"\n", b"\r", b"\r\r\n", b"\n\r", b"\r\n\r\n", b""])
        else:                                             # letters' case changed
            if i < len(b) and chr(b[i]).isalpha():
                b[i] ^= 0x20
    return bytes(b)


def header_abuse(rng):
    kind = rng.randrange(10)
    head = b"GET /plaintext HTTP/1.1\r\nHost: t\r\n"
    if kind == 0:
        extra = b"Host: a\r\nHost: b\r\n"
    elif kind == 1:
        a, c = rng.choice([(b"5", b"5"), (b"5", b"6"), (b"0", b"1"), (b"5", b"05"), (b"5, 5", b"5")])
        extra = b"Content-Length: " + a + b"\r\nContent-Length: " + c + b"\r\n"
        head = head.replace(b"GET", b"POST")
        return head + extra + b"\r\nhello" + b"x" * rng.randrange(3)
    elif kind == 2:
        extra = b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"
        return head.replace(b"GET", b"POST") + extra + b"\r\n5\r\nhello\r\n0\r\n\r\n"
    elif kind == 3:
        extra = b"X-Big: " + b"a" * rng.choice([100, 4000, 8000, 16000, 17000, 30000, 40000]) + b"\r\n"
    elif kind == 4:
        extra = b"".join(b"X-H%d: v\r\n" % i for i in range(rng.choice([50, 99, 100, 101, 300])))
    elif kind == 5:
        return b"GET /" + b"a" * rng.choice([1000, 8100, 8200, 20000]) + b" HTTP/1.1\r\nHost: t\r\n\r\n"
    elif kind == 6:
        extra = b"X-Fold: a\r\n  folded\r\n"
    elif kind == 7:
        extra = rng.choice([b"NoColon\r\n", b"Bad Name: v\r\n", b": empty\r\n", b"X-A : v\r\n", b"X\x00: v\r\n"])
    elif kind == 8:
        extra = b"Transfer-Encoding: " + rng.choice([b"gzip, chunked", b"chunked, gzip", b"identity",
                                                   b"chunked\r\nTransfer-Encoding: chunked", b"Chunked"]) + b"\r\n"
        return head.replace(b"GET", b"POST") + extra + b"\r\n5\r\nhello\r\n0\r\n\r\n"
    else:
        extra = b"Content-Length: " + rng.choice([b"-1", b"+5", b" ", b"18446744073709551616",
                                                  b"99999999999", b"0x10", b"1e3", b"5 5"]) + b"\r\n"
    return head + extra + b"\r\n"


def bad_chunked(rng):
    m = rng.choice([b"POST", b"PUT", b"GET"])
    body = rng.choice(BAD_CHUNKED)
    if rng.random() < 0.3:
        body = mutate(rng, body)
    return m + b" /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + body


def random_bytes(rng):
    n = rng.choice([1, 2, 8, 64, 512, 4096, 40000])
    data = rng.randbytes(rng.randint(1, n))
    if rng.random() < 0.3:
        data = rng.choice([b"GET ", b"GET / HTTP/1.1\r\n", b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n"]) + data
    return data


def some_request(rng):
    """(bytes, expectation): expectation (status, body) for unmutated requests, else None."""
    r = rng.random()
    if r < 0.25:
        req, st, body = valid_request(rng)
        return req, (st, body)
    if r < 0.55:
        return mutate(rng, valid_request(rng)[0]), None
    if r < 0.70:
        return header_abuse(rng), None
    if r < 0.85:
        return bad_chunked(rng), None
    return random_bytes(rng), None


# ---- the responses ---------------------------------------------------------

def parse_responses(data, allow_head, reset):
    """The responses in `data`: a list of (status, headers, body). Raises
    Malformed. With `reset`, an incomplete last response is dropped."""
    out, pos, closed = [], 0, False
    while pos < len(data):
        if closed:
            raise Malformed("bytes after a response with Connection: close")
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            if reset and (b"HTTP/1.1 "[:len(data) - pos] == data[pos:pos + 9] or
                          STATUS_LINE.match(data, pos)):
                break
            raise Malformed("head without CRLFCRLF at offset %d" % pos)
        lines = data[pos:end].split(b"\r\n")
        m = STATUS_LINE.fullmatch(lines[0])
        if not m:
            raise Malformed("bad status line %r at offset %d" % (lines[0][:80], pos))
        status = int(m.group(1))
        headers = {}
        for ln in lines[1:]:
            h = HEADER_LINE.fullmatch(ln)
            if not h:
                raise Malformed("bad header line %r" % ln[:80])
            name = h.group(1).lower()
            if name in headers and name in (b"content-length", b"connection"):
                raise Malformed("duplicate %r" % name)
            headers[name] = h.group(2)
        pos = end + 4
        body = b""
        cl = headers.get(b"content-length")
        if cl is not None:
            if not cl.isdigit():
                raise Malformed("bad Content-Length %r" % cl)
            n = int(cl)
            if status < 200 or status in (204, 304):
                raise Malformed("Content-Length on a %d" % status)
            following = data[pos + n:pos + n + 9]
            fits = pos + n <= len(data) and (pos + n == len(data) or following.startswith(b"HTTP/1.1 "))
            bodiless = allow_head and (pos == len(data) or data[pos:pos + 9] == b"HTTP/1.1 ")
            if fits:
                body = data[pos:pos + n]
                pos += n
            elif bodiless:
                pass
            elif reset and pos + n > len(data):
                break  # cut short by the reset
            else:
                raise Malformed("Content-Length %d does not match the %d bytes that follow" % (n, len(data) - pos))
        elif not (status < 200 or status in (204, 304)):
            raise Malformed("no Content-Length on a %d" % status)
        if status >= 200 and headers.get(b"connection", b"").lower() == b"close":
            closed = True
        out.append((status, headers, body))
    return out


def read_all(s, limit_time):
    """Everything until EOF: (bytes, reset?)."""
    got = bytearray()
    while len(got) < MAX_STREAM:
        left = limit_time - time.time()
        if left <= 0:
            raise socket.timeout("no EOF")
        s.settimeout(left)
        try:
            x = s.recv(65536)
        except ConnectionResetError:
            return bytes(got), True
        if not x:
            return bytes(got), False
        got += x
    raise Malformed("more than %d bytes" % MAX_STREAM)


def read_one(s, head_request):
    """Exactly one final response (after any 1xx) from a keep-alive connection."""
    got = bytearray()
    deadline = time.time() + RECV_TIMEOUT
    while True:
        end = got.find(b"\r\n\r\n")
        if end >= 0:
            rs = parse_responses(bytes(got[:end + 4]), True, False)
            status, headers = rs[0][0], rs[0][1]
            if status < 200:
                del got[:end + 4]
                continue
            n = 0 if head_request or status in (204, 304) else int(headers.get(b"content-length", b"0"))
            if len(got) >= end + 4 + n:
                if len(got) > end + 4 + n:
                    raise Malformed("bytes after the response to a single request")
                return status, headers, bytes(got[end + 4:])
        left = deadline - time.time()
        if left <= 0:
            raise socket.timeout("response not complete")
        s.settimeout(left)
        x = s.recv(65536)
        if not x:
            raise Malformed("EOF inside a response")
        got += x


# ---- a connection ----------------------------------------------------------

def connect():
    try:
        return socket.create_connection(ADDR, timeout=CONNECT_TIMEOUT)
    except OSError as e:
        fail("connect: %s (server down?)" % e)
        return None


def send_parts(rng, s, data):
    """Sends `data` in one write or in up to 8 pieces; False if the server closed."""
    try:
        if rng.random() < 0.7 or len(data) < 2:
            s.sendall(data)
        else:
            cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 7))))
            prev = 0
            for c in cuts + [len(data)]:
                s.sendall(data[prev:c])
                prev = c
                time.sleep(rng.choice([0, 0, 0.001, 0.005]))
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


def one_connection(rng):
    s = connect()
    if s is None:
        return
    count("connections")
    sent = bytearray()
    last = time.time()  # the connect, then each response read
    late = False
    try:
        kind = rng.random()
        if kind < 0.1:
            # Dropped mid-request, by FIN or RST.
            req = some_request(rng)[0]
            send_parts(rng, s, req[:rng.randrange(len(req) + 1)])
            count("requests")
            count("dropped")
            if rng.random() < 0.5:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        if kind < 0.3:
            # Reused: valid requests answered one by one, then something bad.
            for _ in range(rng.randint(1, 5)):
                req, st, body = valid_request(rng)
                sent += req
                if not send_parts(rng, s, req) and time.time() - last < LATE:
                    raise Malformed("server closed a keep-alive connection after a valid request")
                count("requests")
                if time.time() - last >= LATE:
                    count("late")
                    return
                status, _, got = read_one(s, req.startswith(b"HEAD"))
                last = time.time()
                count("responses")
                if status != st or (body is not None and got != body):
                    raise Malformed("valid request answered %d %r, expected %d %r" % (status, got[:60], st, body))
        # A pipeline of 1..12 requests (or one), then EOF from our side.
        n = 1 if rng.random() < 0.5 else rng.randint(2, 12)
        if rng.random() < 0.2:
            reqs = [(r, (st, b)) for r, st, b in (valid_request(rng) for _ in range(n))]
        else:
            reqs = [some_request(rng) for _ in range(n)]
        data = b"".join(r for r, _ in reqs)
        sent += data
        count("requests", n)
        alive = send_parts(rng, s, data)
        late = time.time() - last >= LATE
        if late:
            count("late")
        if alive:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        got, reset = read_all(s, time.time() + RECV_TIMEOUT)
        if reset:
            count("resets")
        try:
            rs = parse_responses(got, b"HEAD" in sent, reset)
        except Malformed as e:
            raise Malformed(str(e)) from None
        count("responses", len(rs))
        # Unmutated requests must get their answers, in order, one each.
        if all(e is not None for _, e in reqs) and alive and not reset and not late:
            final = [r for r in rs if r[0] >= 200]
            if len(final) != n:
                raise Malformed("%d valid requests, %d responses" % (n, len(final)))
            for (st, body), (status, _, b) in zip((e for _, e in reqs), final):
                if status != st or (body is not None and b != body):
                    raise Malformed("valid request answered %d %r, expected %d %r" % (status, b[:60], st, body))
        sent = bytearray()
    except Malformed as e:
        fail(str(e), bytes(sent), b"")
    except socket.timeout as e:
        fail("timeout: %s" % e, bytes(sent), b"")
    except (ConnectionResetError, BrokenPipeError):
        count("resets")
    finally:
        s.close()


def worker(seed, deadline):
    rng = random.Random(seed)
    while time.time() < deadline and not stop.is_set():
        one_connection(rng)


def plaintext_ok():
    try:
        s = socket.create_connection(ADDR, timeout=CONNECT_TIMEOUT)
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        got, _ = read_all(s, time.time() + RECV_TIMEOUT)
        s.close()
        rs = parse_responses(got, False, False)
        return len(rs) == 1 and rs[0][0] == 200 and rs[0][2] == b"Hello, World!"
    except (OSError, Malformed):
        return False


def main():
    deadline = time.time() + SECONDS
    ts = [threading.Thread(target=worker, args=(SEED * 1000 + i, deadline), daemon=True) for i in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(SECONDS + 3 * RECV_TIMEOUT)
    if any(t.is_alive() for t in ts):
        fail("a fuzz thread did not finish")
    alive = plaintext_ok()
    print("fuzz: seed %d, %d connections, %d requests sent, %d responses checked, "
          "%d resets, %d dropped mid-request, %d late, /plaintext afterwards: %s" %
          (SEED, stats["connections"], stats["requests"], stats["responses"], stats["resets"],
           stats["dropped"], stats["late"], "ok" if alive else "FAILED"))
    if failure:
        what, sent, _ = failure[0]
        sys.stderr.write("fuzz: %s\nfuzz: sent %r\n" % (what, sent[:600]))
        return 1
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
