#!/usr/bin/env python3
# exhaust.py PORT PID CONNECTIONS HOLD -- descriptor exhaustion: opens
# CONNECTIONS connections to a parkway-httpd on 127.0.0.1:PORT that runs with
# fewer descriptors than that (ulimit -n), holds them HOLD seconds, then
# closes them. Prints PASS/FAIL lines:
#   - the early connections are still served while the server is out of
#     descriptors;
#   - the server does not spin on accept meanwhile (its CPU time over the
#     hold stays under half the hold);
#   - it is still running;
#   - once the clients are gone, it accepts and serves /plaintext again.
import os
import socket
import sys
import time

from verdict import verdict

PORT, PID, N, HOLD = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ADDR = ("127.0.0.1", PORT)
REQ = b"GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def read_response(s, limit):
    """One response to a /plaintext request (keep-alive), or what came."""
    got, end = b"", time.time() + limit
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            x = s.recv(4096)
        except (socket.timeout, OSError):
            break
        if not x:
            break
        got += x
        if got.endswith(b"Hello, World!"):
            break
    return got


def served_once(limit):
    try:
        s = socket.create_connection(ADDR, timeout=limit)
        s.sendall(REQ)
        got = read_response(s, limit)
        s.close()
        return got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"Hello, World!")
    except OSError:
        return False


socks = []
try:
    t0 = time.time()
    for i in range(N):
        try:
            socks.append(socket.create_connection(ADDR, timeout=3))
        except OSError as e:
            verdict(False, "%d connections opened" % N, "connection %d: %s" % (i, e))
            break
        if time.time() - t0 > 10:
            verdict(False, "%d connections opened" % N, "took over 10 s")
            break
    else:
        verdict(True, "%d connections opened (server limited to fewer descriptors)" % N)

    # The first connections were accepted before the descriptors ran out.
    ok = 0
    for s in socks[:3]:
        try:
            s.sendall(REQ)
            got = read_response(s, 3)
            ok += got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"Hello, World!")
        except OSError:
            pass
    verdict(ok == min(3, len(socks)), "out of descriptors: accepted connections still served", "%d of 3" % ok)

    c0 = cpu_seconds(PID)
    time.sleep(HOLD)
    used = cpu_seconds(PID) - c0
    verdict(used < HOLD / 2, "out of descriptors: no busy accept loop (%.2f s CPU in %.1f s)" % (used, HOLD))
    verdict(alive(PID), "out of descriptors: server still running")
finally:
    for s in socks:
        s.close()

deadline, ok = time.time() + 8, False
while time.time() < deadline and not ok:
    ok = served_once(2)
    if not ok:
        time.sleep(0.1)
verdict(ok, "clients gone: /plaintext served again")
