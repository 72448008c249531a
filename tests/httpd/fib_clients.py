#!/usr/bin/env python3
# fib_clients.py BINARY STDERR_FILE -- /fib/40 for clients that pipeline
# or go, against a parkway-httpd this script starts on 127.0.0.1 (2
# workers, access log on). Prints PASS/FAIL:
#   - /plaintext, then three /fib/40, in one write: the /plaintext answer
#     comes before the first /fib/40 is computed, not with the batch
#     (it waited for every computation of the batch, before);
#   - a client that sends a read's worth (2 KiB) of pipelined /fib/40 and
#     closes at once: the server stops after a few computations, not
#     after all 60 (the batch was computed for nobody, seconds of both
#     workers, before: the close was seen only at the batch's send);
#   - a client that resets its connection while its /fib/40 computes: the
#     access log has its address ("(no address)", before: the address was
#     asked for as the line was written, once the client had gone).
import struct
import signal
import socket
import subprocess
import sys
import time

from verdict import verdict
from wire import start_server

BIN, ERR = sys.argv[1], sys.argv[2]
FIB = b"GET /fib/40 HTTP/1.1\r\nHost: t\r\n\r\n"

p, port = start_server(BIN, ["--workers", "2", "--access-log"], ERR)
if port is None:
    verdict(False, "pipelined /fib server started")
    sys.exit(0)


def one_fib():
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    t0 = time.perf_counter()
    s.sendall(FIB.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    while s.recv(65536):
        pass
    s.close()
    return time.perf_counter() - t0


t1 = min(one_fib() for _ in range(3))
print("  pipelined /fib: one /fib/40 takes %.0f ms" % (t1 * 1e3))


def fib_lines():
    with open(ERR) as f:
        return [line for line in f if '"GET /fib/40 HTTP/1.1" ' in line]


# A client that resets while its answer is made: logged with its address.
# The three lines above first: the log has a thread of its own, which may
# write a line after its client has read the answer and the close.
settle = time.time() + 5.0
while len(fib_lines()) < 3 and time.time() < settle:
    time.sleep(0.02)
before = len(fib_lines())
s = socket.create_connection(("127.0.0.1", port))
peer = "%s:%d" % s.getsockname()
s.sendall(FIB)
time.sleep(min(0.02, t1 / 4))
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()  # a reset
# Its line is written when its computation ends (about t1 from now).
deadline = time.time() + max(5.0, 10 * t1)
while len(fib_lines()) == before and time.time() < deadline:
    time.sleep(0.02)
new = fib_lines()[before:]
verdict(len(new) == 1 and new[0].startswith(peer + " "),
        "a client that reset while its /fib/40 computed: the access log has its address", repr(new))

# The first answer of a batch is not held back by the computations after it.
s = socket.create_connection(("127.0.0.1", port), timeout=30)
t0 = time.perf_counter()
s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n" + FIB * 2 + FIB.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
got, first = b"", None
while True:
    x = s.recv(65536)
    if not x:
        break
    if first is None:
        first = time.perf_counter() - t0
    got += x
total = time.perf_counter() - t0
s.close()
n = got.count(b"HTTP/1.1 200 ")
verdict(n == 4 and first is not None and first < total / 2,
        "/plaintext then three /fib/40 pipelined: the first answer comes before the computations",
        "%d answers, the first after %.2f s of %.2f s" % (n, first or -1, total))

# A client that sends its batch and goes.
before = len(fib_lines())
s = socket.create_connection(("127.0.0.1", port))
s.sendall(FIB * (2048 // len(FIB)))
s.close()
time.sleep(max(1.5, 15 * t1))
done = len(fib_lines()) - before
verdict(done <= 3, "%d pipelined /fib/40 from a client gone at once: at most 3 computed (of %d)"
        % (2048 // len(FIB), 2048 // len(FIB)), "%d computed within %.1f s" % (done, max(1.5, 15 * t1)))

p.send_signal(signal.SIGTERM)
try:
    rc = p.wait(timeout=15)
except subprocess.TimeoutExpired:
    p.kill()
    rc = "hung"
verdict(rc == 0, "pipelined /fib server: SIGTERM -> exit 0", "exit %s" % rc)
