#!/usr/bin/env python3
# small_files.py PORT ROOT -- file bodies small enough to be read into the
# answer (up to 8 KiB, when their pages are cached: handlers.cpp,
# read_cached), against a parkway-httpd on 127.0.0.1:PORT serving ROOT.
# Writes ROOT/small-N.bin and ROOT/small-cold.bin, then prints PASS/FAIL
# lines:
#   - GET of files of 1 byte, 4 KiB, 8 KiB (the largest read into the
#     answer) and 8 KiB + 1 (sent by send_file): every byte, and the
#     Content-Length;
#   - a Range inside a small file: 206 and exactly those bytes;
#   - 32 pipelined GETs of the four files and a HEAD on one connection:
#     every answer whole, in order, the HEAD's without a body;
#   - a small file rewritten between two GETs: the second answer has the
#     new bytes;
#   - a small file not in the page cache (the read would wait for the
#     device, so it goes by send_file's ring read): every byte (skipped,
#     and says so, where the eviction does not take).
import os
import random
import socket
import sys

from verdict import check
from wire import read_answer, request, write_evicted

PORT, ROOT = int(sys.argv[1]), sys.argv[2]
INLINE_MAX = 8 * 1024

rng = random.Random(11)
FILES = {n: rng.randbytes(n) for n in (1, 4096, INLINE_MAX, INLINE_MAX + 1)}
for n, data in FILES.items():
    with open(os.path.join(ROOT, "small-%d.bin" % n), "wb") as f:
        f.write(data)
COLD = rng.randbytes(8192)
COLD_PAGES = write_evicted(os.path.join(ROOT, "small-cold.bin"), COLD)


def connect():
    return socket.create_connection(("127.0.0.1", PORT), timeout=20)


def get(path, extra="Connection: close\r\n"):
    s = connect()
    s.sendall(request(path, extra))
    status, h, body, _ = read_answer(s, b"")
    s.close()
    return status, h, body


def whole(n):
    def run():
        status, h, body = get("/small-%d.bin" % n)
        ok = status == 200 and body == FILES[n] and h.get("content-length") == str(n)
        return ok, "status %d, Content-Length %s, %d bytes, equal: %s" % (
            status, h.get("content-length"), len(body), body == FILES[n])
    return run


def small_range():
    status, h, body = get("/small-4096.bin", "Range: bytes=100-1099\r\nConnection: close\r\n")
    ok = status == 206 and h.get("content-range") == "bytes 100-1099/4096" and body == FILES[4096][100:1100]
    return ok, "status %d, %s, %d bytes" % (status, h.get("content-range"), len(body))


def pipelined():
    sizes = [list(FILES)[i % len(FILES)] for i in range(32)]
    s = connect()
    out = b"".join(request("/small-%d.bin" % n) for n in sizes)
    out += b"HEAD /small-4096.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    s.sendall(out)
    rest, bad = b"", []
    for i, n in enumerate(sizes):
        status, _, body, rest = read_answer(s, rest)
        if status != 200 or body != FILES[n]:
            bad.append("answer %d: status %d, %d bytes of %d" % (i, status, len(body), n))
    # A HEAD's answer announces the length and has no body: read the head alone.
    while b"\r\n\r\n" not in rest:
        x = s.recv(65536)
        if not x:
            break
        rest += x
    head, _, after = rest.partition(b"\r\n\r\n")
    after += s.recv(65536)  # the server closes after it: anything more would be a body
    if b"Content-Length: 4096" not in head or after:
        bad.append("HEAD: head %r, %d bytes after it" % (head[:40], len(after)))
    s.close()
    return not bad, "; ".join(bad[:3])


def rewritten():
    path = os.path.join(ROOT, "small-rewritten.bin")
    first, second = b"a" * 3000, b"b" * 2000
    with open(path, "wb") as f:
        f.write(first)
    s1, _, b1 = get("/small-rewritten.bin")
    with open(path, "wb") as f:
        f.write(second)
    s2, _, b2 = get("/small-rewritten.bin")
    return (s1, b1, s2, b2) == (200, first, 200, second), "statuses %d %d, sizes %d %d" % (s1, s2, len(b1), len(b2))


def cold():
    status, h, body = get("/small-cold.bin")
    return status == 200 and body == COLD, "status %d, %d bytes" % (status, len(body))


for n in FILES:
    check("a %d-byte file: every byte and its Content-Length" % n, whole(n))
check("a Range inside a small file: 206, those bytes", small_range)
check("32 small files and a HEAD pipelined: every answer whole, in order", pipelined)
check("a small file rewritten between two GETs: the new bytes", rewritten)
if COLD_PAGES == 0:
    check("a small file not in the page cache: every byte", cold)
else:
    print("SKIP a small file not in the page cache: eviction did not take here (cachestat: %d pages "
          "cached; a tmpfs, or no cachestat)" % COLD_PAGES, flush=True)
