#!/usr/bin/env python3
# empty_lines.py PORT IDLE_TIMEOUT -- against a parkway-httpd on
# 127.0.0.1:PORT started with --idle-timeout IDLE_TIMEOUT (seconds). Prints
# PASS/FAIL lines:
#   - a keep-alive connection that, after its answer, sends only empty
#     lines (CRLF, which RFC 9112 2.2 lets a client send between requests)
#     every 1.5 s is closed once IDLE_TIMEOUT has passed since the answer:
#     the empty lines do not start the idle wait again;
#   - one that sends a real request after an empty line is answered;
#   - a bare CR before a request is a 400 whether it comes in the
#     request's read or in one of its own (RFC 9112 2.2).
import socket
import sys
import time

from verdict import verdict
from wire import trickle_until_close

PORT, IDLE = int(sys.argv[1]), float(sys.argv[2])
REQ = b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n"


def answered(s):
    got = b""
    while b"Hello, World!" not in got:
        x = s.recv(4096)
        if not x:
            return False
        got += x
    return True


s = socket.create_connection(("127.0.0.1", PORT), timeout=IDLE + 5)
s.sendall(REQ)
ok_first = answered(s)
_, closed, took = trickle_until_close(s, b"\r\n", 1.5, IDLE + 5)
s.close()
verdict(ok_first and closed and took < IDLE + 3,
        "empty lines every 1.5 s after an answer: closed %g s after it (the idle timeout), not kept open" % IDLE,
        "answered=%s closed=%s after %.1f s" % (ok_first, closed, took))

s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
s.sendall(REQ)
first = answered(s)
s.sendall(b"\r\n")
time.sleep(0.3)
s.sendall(REQ)
second = answered(s)
s.close()
verdict(first and second, "an empty line, then a request on the same connection: answered", "%s %s" % (first, second))


def bare_cr(split):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(REQ)
    first = answered(s)
    if split:
        s.sendall(b"\r")
        time.sleep(0.3)
        s.sendall(REQ)
    else:
        s.sendall(b"\r" + REQ)
    got = b""
    try:
        while True:
            x = s.recv(4096)
            if not x:
                break
            got += x
    except socket.timeout:
        pass
    s.close()
    return first and b"HTTP/1.1 400 " in got and b"Hello, World!" not in got, repr(got[:60])


for split in (False, True):
    ok, why = bare_cr(split)
    verdict(ok, "a bare CR before a request%s: 400, the request not answered" % (", in a read of its own" if split else ""), why)
