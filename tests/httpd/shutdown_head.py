#!/usr/bin/env python3
# shutdown_head.py BINARY STDERR_FILE -- a request head cut short by the
# shutdown, against a parkway-httpd this script starts on 127.0.0.1
# (--shutdown-timeout 1, --header-timeout 10, access log on). A client
# has one answer on a keep-alive connection, then sends half of its next
# head and nothing more; SIGTERM. Prints PASS/FAIL:
#   - the connection ends with the grace period, with no answer: the head
#     did not time out (a "408 Request Timeout", logged as such, before;
#     a body cut short the same way was, and is, answered nothing);
#   - the server exits 0.
import re
import signal
import socket
import subprocess
import sys
import time

from verdict import verdict
from wire import read_until_close, start_server

BIN, ERR = sys.argv[1], sys.argv[2]
p, port = start_server(BIN, ["--workers", "2", "--shutdown-timeout", "1", "--header-timeout", "10", "--access-log"], ERR)
if port is None:
    verdict(False, "shutdown_head server started")
    sys.exit(0)

s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n")
first = s.recv(65536)
s.sendall(b"GET /plaintext HTTP/1.1\r\nHo")
time.sleep(0.2)
t0 = time.time()
p.send_signal(signal.SIGTERM)
got, closed = read_until_close(s, 10)
how = "closed" if closed else "still open"
took = time.time() - t0
verdict(first.startswith(b"HTTP/1.1 200 ") and got == b"" and closed and took < 3,
        "a head cut short by the shutdown's grace period: closed, no 408",
        "%r, then %s after %.1f s" % (got[:40], how, took))
try:
    rc = p.wait(timeout=10)
except subprocess.TimeoutExpired:
    p.kill()
    rc = "hung"
with open(ERR) as f:
    logged = [line for line in f if re.search(r'" 408 (\d+|-)$', line.rstrip())]
verdict(rc == 0 and not logged, "shutdown_head server: exit 0, no 408 logged", "exit %s, %r" % (rc, logged))
