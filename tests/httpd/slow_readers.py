#!/usr/bin/env python3
# slow_readers.py slow PORT ROOT | pipeline PORT PID ROOT -- clients that
# read slowly or not at all, against a parkway-httpd on 127.0.0.1:PORT
# (process PID) serving ROOT, started with --idle-timeout 1 for `slow`
# and 2 or more for `pipeline` (whose connections must outlive their
# send's timeout). Prints PASS/FAIL lines:
#   - a 6 MB file read at 800 KB/s through a 64 KiB receive buffer (7.5 s,
#     no pause longer than 0.1 s): every byte. A send's timeout is per wait
#     for room, and without TCP_NOTSENT_LOWAT a wait lasted until a third
#     of the socket's multi-megabyte buffer had drained (1.6 s here): the
#     body was cut off after about 4 MB;
#   - a 1.5 MiB file read through a 64 KiB receive buffer in bursts of
#     256 KiB, with 1.5 s pauses between them, longer than
#     the idle timeout (1 s) though shorter than two: every byte. The
#     server's wait for room times out within a pause, but the client has
#     acknowledged bytes since the last look, so the send goes on (each
#     wait for room had its own idle timeout, and the body was cut at the
#     first pause);
#   - the same file, one burst read and then nothing: the server closes
#     the connection within two idle timeouts of the last progress (by
#     3.5 s) and the body ends short;
#   - 40 connections that each pipeline 1200 short requests for an 8 KiB
#     file (read into the answer) behind one with a 15 KiB header (which
#     grows the connection's buffer to hold 550 of them) and read nothing:
#     the server's resident memory grows by less than 8 MiB (it would hold each
#     connection's whole batch, what the socket did not take, if the
#     batch had no cap).
import concurrent.futures
import os
import random
import socket
import sys
import time

from verdict import check

MODE = sys.argv[1]
if MODE == "slow":
    PORT, PID, ROOT = int(sys.argv[2]), 0, sys.argv[3]
else:
    PORT, PID, ROOT = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

rng = random.Random(13)
BIG = rng.randbytes(6_000_000)
with open(os.path.join(ROOT, "slow-big.bin"), "wb") as f:
    f.write(BIG)
BURST = rng.randbytes(1536 * 1024)
with open(os.path.join(ROOT, "burst.bin"), "wb") as f:
    f.write(BURST)
with open(os.path.join(ROOT, "8k"), "wb") as f:
    f.write(rng.randbytes(8 * 1024))


def rss_kb():
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def slow_reader():
    rate = 800_000
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.settimeout(10)
    s.connect(("127.0.0.1", PORT))
    s.sendall(b"GET /slow-big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    got, t0 = b"", time.time()
    while True:
        x = s.recv(rate // 10)
        if not x:
            break
        got += x
        time.sleep(len(x) / rate)
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200 ") and body == BIG
    return ok, "%s, %d of %d body bytes in %.1f s" % (head[:15], len(body), len(BIG), time.time() - t0)


def burst_reader(pauses):
    # pauses: the sleeps after each burst; the last one repeats.
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.connect(("127.0.0.1", PORT))
    s.sendall(b"GET /burst.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    got, t0, ended, i = b"", time.time(), False, 0
    while not ended and time.time() - t0 < 20:
        s.settimeout(2)
        try:
            n = 0  # a burst: 256 KiB, or what comes without a pause
            x = s.recv(256 * 1024)
            while x:
                got += x
                n += len(x)
                if n >= 256 * 1024:
                    break
                s.settimeout(0.02)
                x = s.recv(256 * 1024 - n)
            if not x:
                ended = True  # EOF
        except socket.timeout:
            pass
        except ConnectionResetError:
            ended = True
        if not ended:
            time.sleep(pauses[min(i, len(pauses) - 1)])
            i += 1
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    return head, body, ended, time.time() - t0


def bursty_reader():
    head, body, ended, t = burst_reader([1.5])
    ok = head.startswith(b"HTTP/1.1 200 ") and body == BURST
    return ok, "%s, %d of %d body bytes in %.1f s" % (head[:15], len(body), len(BURST), t)


def stopped_reader():
    head, body, ended, t = burst_reader([3.5, 0.1])
    ok = head.startswith(b"HTTP/1.1 200 ") and ended and len(body) < len(BURST)
    return ok, "%s, %d of %d body bytes, %s after %.1f s" % (
        head[:15], len(body), len(BURST), "closed" if ended else "still open", t)


def pipeliners():
    before = rss_kb()
    # Short requests: a 16 KiB buffer holds 550 of them (4.4 MB of answers).
    big_head = b"GET /8k HTTP/1.1\r\nHost:t\r\nX-Pad: " + b"p" * (15 * 1024) + b"\r\n\r\n"
    batch = big_head + b"GET /8k HTTP/1.1\r\nHost:t\r\n\r\n" * 1200
    socks = []
    for _ in range(40):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        # The whole batch in the server's socket at once, so that its
        # reads find full buffers rather than what has trickled in.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024 * 1024)
        s.connect(("127.0.0.1", PORT))
        s.settimeout(2)
        s.sendall(batch)
        socks.append(s)
    time.sleep(1.5)
    grown = rss_kb() - before
    for s in socks:
        s.close()
    return grown < 8 * 1024, "resident memory grew by %d KiB (from %d KiB)" % (grown, before)


if MODE == "slow":
    # The three readers side by side (each takes seconds), their verdicts in order.
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = [(name, pool.submit(fn)) for name, fn in [
            ("a large file read slowly but steadily: every byte (send timeouts count progress)", slow_reader),
            ("a file read in bursts with pauses longer than the idle timeout: every byte", bursty_reader),
            ("a file whose reader stops: the connection is closed, the body short", stopped_reader)]]
        for name, run in runs:
            check(name, run.result)
else:
    check("40 pipelining clients that read nothing: resident memory grows < 8 MiB", pipeliners)
