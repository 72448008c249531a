#!/usr/bin/env python3
# large_files.py PORT ROOT -- file bodies larger than a socket buffer, against
# a parkway-httpd on 127.0.0.1:PORT serving ROOT. Writes ROOT/big.bin (5 MiB
# of a seeded pattern) and ROOT/cold.bin (1 MiB, dropped from the page cache
# where the file system lets it), then prints PASS/FAIL lines:
#   - GET of big.bin read slowly (the client sleeps while the server's socket
#     is full): every byte equals the file's;
#   - a Range in the middle of big.bin: 206 and exactly those bytes;
#   - two pipelined GETs of big.bin and one of hello.txt on one connection:
#     three whole answers in order;
#   - GET of cold.bin (read from the device, not the page cache): every byte
#     (skipped, and says so, where the eviction does not take);
#   - clients that reset the connection after reading part of big.bin: the
#     server keeps serving.
import os
import random
import socket
import sys
import time

from verdict import check
from wire import read_answer, request, write_evicted

PORT, ROOT = int(sys.argv[1]), sys.argv[2]

rng = random.Random(7)
BIG = rng.randbytes(5 * 1024 * 1024)
COLD = rng.randbytes(1024 * 1024)
with open(os.path.join(ROOT, "big.bin"), "wb") as f:
    f.write(BIG)
COLD_PAGES = write_evicted(os.path.join(ROOT, "cold.bin"), COLD)


def connect():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    return s


def slow_whole():
    s = connect()
    s.sendall(request("/big.bin", "Connection: close\r\n"))
    status, _, body, _ = read_answer(s, b"", slow=True)
    return status == 200 and body == BIG, "status %d, %d bytes, equal: %s" % (status, len(body), body == BIG)


def middle_range():
    s = connect()
    first, last = 1234567, 3456789
    s.sendall(request("/big.bin", "Range: bytes=%d-%d\r\nConnection: close\r\n" % (first, last)))
    status, h, body, _ = read_answer(s, b"")
    want = "bytes %d-%d/%d" % (first, last, len(BIG))
    ok = status == 206 and h.get("content-range") == want and body == BIG[first:last + 1]
    return ok, "status %d, %s, %d bytes" % (status, h.get("content-range"), len(body))


def pipelined():
    s = connect()
    s.sendall(request("/big.bin") + request("/big.bin") + request("/hello.txt", "Connection: close\r\n"))
    rest, got = b"", []
    for _ in range(3):
        status, _, body, rest = read_answer(s, rest)
        got.append((status, body))
    ok = got[0] == (200, BIG) and got[1] == (200, BIG) and got[2] == (200, b"hello, static world\n")
    return ok, "statuses %s, sizes %s" % ([g[0] for g in got], [len(g[1]) for g in got])


def cold():
    s = connect()
    s.sendall(request("/cold.bin", "Connection: close\r\n"))
    status, _, body, _ = read_answer(s, b"")
    return status == 200 and body == COLD, "status %d, %d bytes" % (status, len(body))


def gone_peer():
    for _ in range(8):
        s = connect()
        s.sendall(request("/big.bin"))
        s.recv(65536)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close: a reset
        s.close()
    time.sleep(0.2)
    s = connect()
    s.sendall(request("/hello.txt", "Connection: close\r\n"))
    status, _, body, _ = read_answer(s, b"")
    return status == 200 and body == b"hello, static world\n", "after resets: status %d" % status


check("large file read slowly: every byte", slow_whole)
check("Range in the middle of a large file: 206, those bytes", middle_range)
check("two large files and a small one pipelined: three whole answers in order", pipelined)
if COLD_PAGES == 0:
    check("a file not in the page cache: every byte", cold)
else:
    print("SKIP a file not in the page cache: eviction did not take here (cachestat: %d pages cached; "
          "a tmpfs, or no cachestat)" % COLD_PAGES, flush=True)
check("clients that reset mid-file: the server still serves", gone_peer)
