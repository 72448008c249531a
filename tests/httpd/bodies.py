#!/usr/bin/env python3
# bodies.py PORT -- request bodies that come apart from their heads, against
# a parkway-httpd on 127.0.0.1:PORT started with --body-timeout 1 and a root
# holding hello.txt ("hello, static world") and zzzzz (a decoy). Prints
# PASS/FAIL lines:
#   - a GET whose body arrives 0.3 s after its head (with and without
#     Expect: 100-continue) is answered with the file the head names, even
#     when the body's bytes spell another path;
#   - a body trickled a byte every 0.4 s is cut off with 408 and a close
#     within the body timeout (plus slack), not served for as long as the
#     client keeps trickling;
#   - a malformed request followed by more bytes, and more 0.2 s later:
#     the 400 answer arrives and the connection ends in an orderly close
#     (EOF), not a reset (the server reads what is still coming before it
#     closes, RFC 9112 9.6).
import socket
import sys
import time

from verdict import verdict
from wire import read_until_close, trickle_until_close

PORT = int(sys.argv[1])


def read_all(s, limit):
    return read_until_close(s, limit)[0].decode("latin-1")


for expect in (False, True):
    body = b"XXXX/zzzzzXXXXXXXXXX"
    head = ("GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n"
            % (len(body), "Expect: 100-continue\r\n" if expect else "")).encode()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(head)
    time.sleep(0.3)
    s.sendall(body)
    r = read_all(s, 5)
    s.close()
    name = "a body 0.3 s after its head%s: the head's file is served" % (" (Expect: 100-continue)" if expect else "")
    final = r.split("HTTP/1.1 ")[-1]
    ok = final.startswith("200 ") and final.endswith("hello, static world\n") and "decoy" not in r
    verdict(ok, name, repr(r[-120:]))

s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
s.sendall(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
got, closed, took = trickle_until_close(s, b"a", 0.4, 6)
s.close()
verdict(closed and took < 3.5 and got.startswith(b"HTTP/1.1 408 "),
        "a body trickled a byte every 0.4 s: 408 and close within the body timeout",
        "closed=%s after %.1f s, got %r" % (closed, took, got[:40]))

s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
got, how = b"", "open"
try:
    s.sendall(b"GARBAGE\r\n\r\n" + b"x" * 8192)
    time.sleep(0.2)
    s.sendall(b"y" * 8192)
    end = time.time() + 4
    while time.time() < end:
        x = s.recv(65536)
        if not x:
            how = "eof"
            break
        got += x
except ConnectionResetError:
    how = "reset"
except BrokenPipeError:
    how = "reset (on send)"
except socket.timeout:
    how = "timeout"
s.close()
verdict(got.startswith(b"HTTP/1.1 400 ") and how == "eof",
        "a malformed request with more bytes behind it: 400, then an orderly close, not a reset",
        "%s after %r" % (how, got[:30]))
