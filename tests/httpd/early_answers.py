#!/usr/bin/env python3
# early_answers.py PORT -- answers the server decides before a request's
# body arrives, against a parkway-httpd on 127.0.0.1:PORT with a root
# holding hello.txt. Prints PASS/FAIL lines:
#   - a client that writes a whole 5 MB body before it reads (Python's
#     http.client does) gets the 413: the server reads and drops what is
#     still coming before it closes (RFC 9112 9.6), so the client's send
#     does not fail with EPIPE or a reset;
#   - a PUT with Expect: 100-continue to a static file gets its 405 at
#     once, with no 100 before it (RFC 9110 10.1.1: a status the head
#     alone decides is sent at once), so the client need send no body;
#     the connection then reads and drops the body if the client sends
#     it, and answers the next request;
#   - a GET with a body and Expect: 100-continue still gets the 100, then
#     its file.
import socket
import sys
import time

from verdict import check
from wire import read_until_close

PORT = int(sys.argv[1])


def upload_then_read():
    body = b"a" * (5 * 1000 * 1000)
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    s.sendall(b"POST /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body))
    try:
        s.sendall(body)
    except OSError as e:
        s.close()
        return False, "the body's send failed: %r" % e
    got, _ = read_until_close(s, 10)
    s.close()
    head = got.split(b"\r\n", 1)[0].decode("latin-1")
    return head.startswith("HTTP/1.1 413 "), "got %r" % head


def answer(s, limit):
    """One answer's head and body (by its Content-Length), or what came."""
    data = b""
    end = time.time() + limit
    while time.time() < end:
        i = data.find(b"\r\n\r\n")
        if i >= 0:
            head = data[:i].decode("latin-1")
            n = 0
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.lower() == "content-length":
                    n = int(v)
            if head.startswith("HTTP/1.1 100 ") or len(data) >= i + 4 + n:
                whole = i + 4 + (0 if head.startswith("HTTP/1.1 100 ") else n)
                return head, data[whole:]
        s.settimeout(max(0.01, end - time.time()))
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    return data.decode("latin-1"), b""


def expect_error_at_once():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(b"PUT /hello.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    t0 = time.time()
    head, rest = answer(s, 3)
    took = time.time() - t0
    if not head.startswith("HTTP/1.1 405 ") or rest:
        s.close()
        return False, "before any body: %r (then %r)" % (head[:60], rest[:60])
    # The client sends the body anyway, then another request on the
    # same connection: the body is dropped, the request answered.
    s.sendall(b"abcde" + b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    got, _ = read_until_close(s, 5)
    s.close()
    ok = got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"hello, static world\n")
    return ok, "405 after %.2f s; next answer %r" % (took, got[:60])


def expect_continue_for_a_get():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
              b"Connection: close\r\n\r\n")
    head, rest = answer(s, 3)
    if not head.startswith("HTTP/1.1 100 "):
        s.close()
        return False, "first %r" % head[:60]
    s.sendall(b"abcde")
    got, _ = read_until_close(s, 5)
    s.close()
    got = rest + got
    return got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"hello, static world\n"), "then %r" % got[:60]


check("a 5 MB body sent whole before reading: the client gets the 413", upload_then_read)
check("PUT with Expect: 100-continue: the 405 at once, no 100; a body sent anyway is dropped, the next "
      "request answered", expect_error_at_once)
check("GET with a body and Expect: 100-continue: the 100, then the file", expect_continue_for_a_get)
