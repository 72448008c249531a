#!/usr/bin/env python3
"""check_bench.py -- checks of the benchmark harness's own arithmetic and
parsing (`make bench-check`, about 15 s; not part of `make test`, and no
benchmark is run):

- run_httpd_bench.py: parse_wrk and parse_h2load on known outputs (units
  us/ms/s/m, wrk's 0.00us), no wrk percentiles for pipelined rows, and the
  compute section's bound when the open-loop client got no answer to some
  requests;
- run_echo.py: the compute verdict when the open-loop client reports a
  null p99 (its rank on a message never answered);
- with --echo-client / --open-loop-client (the make target passes both):
  each open-loop client for 2-3 s over loopback against a small server in
  this process that leaves some requests unanswered; its p99 must be null,
  not the p99 of the answered ones.

Exit status 0 when every check passes, 1 otherwise (each failure named).
"""
import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "httpd"))
sys.path.insert(0, os.path.join(HERE, "echo"))
import run_echo  # noqa: E402
import run_httpd_bench as httpd  # noqa: E402

FAILED = []
PASSED = [0]


def check(name, got, want):
    ok = got == want
    PASSED[0] += ok
    print("%-4s %s: %r%s" % ("ok" if ok else "FAIL", name, got, "" if ok else " (want %r)" % (want,)))
    if not ok:
        FAILED.append(name)


WRK_OUT = """Running 3s test @ http://127.0.0.1:8080/plaintext
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   630.45us  412.10us  12.50ms   91.20%
    Req/Sec   101.23k     4.10k  110.52k    72.00%
  Latency Distribution
     50%  519.00us
     75%  701.00us
     90%    1.02ms
     99%    2.31s
  302456 requests in 3.00s, 38.37MB read
  Socket errors: connect 0, read 2, write 0, timeout 17
  Non-2xx or 3xx responses: 5
Requests/sec: 100812.33
Transfer/sec:     12.79MB
"""

WRK_ZERO = WRK_OUT.replace("    1.02ms", "    0.00us").replace("    2.31s", "  0.00us")

H2LOAD_OUT = """finished in 3.00s, 122147.33 req/s, 13.05MB/s
requests: 366442 total, 366442 started, 366440 done, 366438 succeeded, 2 failed, 1 errored, 3 timeout
status codes: 366438 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 39.14MB (41040304) total, 27.61MB (28949158) headers (space savings 0.00%), 4.76MB (4763694) data
                     min         max         mean         sd        +/- sd
time for request:      114us      1.13m       523us       156us    85.21%
time for connect:      151us      3.21ms      1.32ms       897us    59.38%
time to 1st byte:      3.12ms      5.01ms      4.10ms       550us    62.50%
req/s           :    1903.21     1937.65     1908.55        6.94    84.38%
"""


def check_fields(tool, parsed, want):
    """check() each field of a parser's result: want is a list of (the
    check's name after the tool's, the field, the value it must hold)."""
    for name, field, value in want:
        check("%s %s" % (tool, name), parsed[field], value)


def unit_checks():
    check_fields("wrk", httpd.parse_wrk(WRK_OUT), [
        ("req/s", "req_s", 100812.33),
        ("requests", "requests", 302456),
        ("p50 ms (519.00us)", "p50_ms", 0.519),
        ("p99 ms (2.31s)", "p99_ms", 2310.0),
        ("socket errors", "socket_errors", 19),
        ("non-2xx", "non_2xx", 5)])
    z = httpd.parse_wrk(WRK_ZERO)
    check("wrk 0.00us p99 is no value", z["p99_ms"], None)
    check("wrk time 2.00m", httpd.parse_wrk_time("2.00m"), 120000.0)
    check_fields("h2load", httpd.parse_h2load(H2LOAD_OUT), [
        ("req/s", "req_s", 122147.33),
        ("succeeded", "requests", 366438),
        ("failed+errored+timeout", "failed", 6),
        ("mean ms (523us)", "mean_ms", 0.523),
        ("max ms (1.13m)", "max_ms", 67800.0)])
    for row in httpd.LOAD_ROWS:
        check("wrk percentiles used for %s" % row["name"], httpd.wrk_latency_valid(row), "pipeline" not in row["name"])

    # The compute section's bound with requests left unanswered: an open-loop
    # run whose p99 rank falls on one reports null, and the bound is not met.
    ok = {"scheduled": 4000, "completed": 4000, "unanswered": 0, "lost": 0, "p50_ms": 0.111, "p99_ms": 0.162,
          "p999_ms": 0.441, "max_ms": 0.9, "send_lag_p99_ms": 0.067, "from_send_p99_ms": 0.1}
    hung = dict(ok, completed=400, unanswered=3600, p50_ms=None, p99_ms=None, p999_ms=None, max_ms=None,
                from_send_p99_ms=None)
    compute = [{"mode": "leaf task", "p50_ms": 0.115}]
    for r_ in range(3):
        compute += [dict(ok, mode="alone", rep=r_), dict(hung, mode="with fib", rep=r_),
                    dict(ok, mode="with fib on a separate pool", rep=r_)]
    b = types.SimpleNamespace(records=[], h2load_missing=True, h2_records=[])
    _, _, comp, _ = httpd.summarize(b, [], compute, [])
    check("httpd bound with unanswered requests", comp["bound_met"], False)
    check("httpd p99 with unanswered requests (JSON)", comp["with fib"]["p99_ms"], None)
    compute = [c if c["mode"] != "alone" else dict(hung, mode="alone", rep=c["rep"]) for c in compute]
    _, _, comp, _ = httpd.summarize(b, [], compute, [])
    check("httpd bound when the run alone went unanswered", comp["bound_met"], None)

    # run_echo.py's compute verdict from client records with a null p99.
    def rec(p99, unanswered):
        return {"requests": 14000, "rps": 5000.0, "p50_us": 80.0, "p99_us": p99, "p999_us": p99,
                "from_send_p99_us": p99, "send_lag_p99_us": 70.0, "unanswered": unanswered,
                "server_cpus": 0.5, "busy": 0.0, "steal_ms": 0, "server_cmd": "s --port 0 --seconds 9",
                "client_cmd": "c", "server_stats": {}}

    class FakeEcho:
        def run_kept(self, label, cmd, client_args, retries, **kw):
            return rec(None, 700) if "--compute-us" in cmd else rec(150.0, 0)
    a = types.SimpleNamespace(reps=3, compute_us=100, rate=5000, conns=64, bin="b", quiet_retries=0)
    out = run_echo.compute(FakeEcho(), a)
    for name, c in out["configs"].items():
        check("echo verdict %s, 5%% of messages unanswered" % name, c["verdict"], "NOT MET (unanswered messages)")


class Server:
    """A loopback server in a thread. echo: echoes, except that it never
    answers its first `stall` connections. http: answers GET /plaintext
    until it has answered `answers` requests, then reads and discards."""

    def __init__(self, kind, stall=0, answers=0):
        self.kind, self.stall, self.answers = kind, stall, answers
        self.l = socket.socket()
        self.l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.l.bind(("127.0.0.1", 0))
        self.l.listen(1024)
        self.l.setblocking(False)
        self.port = self.l.getsockname()[1]
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        sel = selectors.DefaultSelector()
        sel.register(self.l, selectors.EVENT_READ, None)
        accepted, answered, bufs = 0, 0, {}
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!"
        while not self.stop:
            for k, _ in sel.select(0.1):
                if k.data is None:
                    c, _ = self.l.accept()
                    c.setblocking(True)
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(c, selectors.EVENT_READ, accepted < self.stall)
                    accepted += 1
                    bufs[c] = b""
                    continue
                s = k.fileobj
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    continue
                if self.kind == "echo":
                    if not k.data:
                        s.sendall(data)
                    continue
                bufs[s] += data
                while b"\r\n\r\n" in bufs[s]:
                    _, _, bufs[s] = bufs[s].partition(b"\r\n\r\n")
                    if answered < self.answers:
                        s.sendall(resp)
                        answered += 1
        self.l.close()


def client_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        FAILED.append(" ".join(cmd) + ": no JSON: " + (p.stdout + p.stderr)[-300:])
        return {}


def live_checks(echo_client, open_loop):
    if echo_client:
        srv = Server("echo", stall=2)  # 2 of 64 connections: 3% of the messages never come back
        r = client_json([echo_client, "--port", str(srv.port), "--conns", "64", "--rate", "1000", "--warmup", "0.3",
                         "--seconds", "1.5", "--drain", "0.5"])
        srv.stop = True
        check("echo_client, 2 of 64 connections unanswered: p99", r.get("p99_us", "missing"), None)
        check("echo_client: unanswered = scheduled - requests", r.get("unanswered"),
              (r.get("scheduled") or 0) - (r.get("requests") or 0))
        check("echo_client: some messages unanswered", (r.get("unanswered") or 0) > 0, True)
        srv = Server("echo", stall=0)
        r = client_json([echo_client, "--port", str(srv.port), "--conns", "64", "--rate", "1000", "--warmup", "0.3",
                         "--seconds", "1", "--drain", "2"])
        srv.stop = True
        check("echo_client, every message answered: unanswered", r.get("unanswered"), 0)
        check("echo_client, every message answered: requests = scheduled", r.get("requests"), r.get("scheduled"))
        check("echo_client, every message answered: p99 is a number", isinstance(r.get("p99_us"), float), True)
    if open_loop:
        srv = Server("http", answers=200)  # then it hangs: 90% of 2000 requests unanswered
        r = client_json([open_loop, "--port", str(srv.port), "--rate", "1000", "--seconds", "2", "--conns", "64",
                         "--drain", "0.5"])
        srv.stop = True
        check("http_open_loop, server hangs after 200 answers: p99", r.get("p99_ms", "missing"), None)
        check("http_open_loop: completed", r.get("completed"), 200)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--echo-client", help="build/bench/echo/echo_client")
    ap.add_argument("--open-loop-client", help="build/bench/httpd/http_open_loop")
    a = ap.parse_args()
    unit_checks()
    live_checks(a.echo_client, a.open_loop_client)
    if FAILED:
        print("check_bench: %d FAILED:\n  %s" % (len(FAILED), "\n  ".join(FAILED)))
    print("%d passed, %d failed, 0 skipped" % (PASSED[0], len(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
