#!/usr/bin/env python3
"""run_echo.py -- the echo benchmark of the io_uring layer: parkway's echo
server and its peers in one run, driven by the same load client over
loopback; prints a table and writes the JSON.

  python3 tests/bench/echo/run_echo.py --bin build/bench/echo --out build/bench/echo/results.json [--quick]

Servers (tests/bench/echo/): echo_parkway (io::Listener + AcceptStream, one
detached coroutine per connection), echo_asio_epoll and echo_asio_uring
(standalone Asio 1.22 with C++20 coroutines, N threads on one io_context,
epoll reactor / io_uring backend), echo_epoll (hand-written level-
triggered epoll loop, one SO_REUSEPORT listener per thread).

Throughput and latency: echo_client, closed loop, 64 connections, one
64-byte message in flight on each, 1 s warm-up then 3 s measured, in two
configurations:
  pinned-1w    server with 1 worker on CPU 0 (taskset -c 0), client on CPU 1
  unpinned-2w  server with 2 workers, client with 1 thread, nobody pinned
3 repetitions of each (server, configuration), interleaved: every round
runs every server once per configuration, the order of the servers
rotating from round to round, so a noisy neighbour hurts them alike. The
table shows medians. fair: the fewest round trips one connection
completed in the window over the most (1.00: every connection served
alike; from the client's conn_min and conn_max).

Completion latency under compute: echo_parkway with --compute-us 100 (a
detached coroutine keeps one worker busy with back-to-back 100 us spin
tasks, each spawned and awaited), the client in open loop at --rate
(5000/s over the 64 connections), against the same run without the
compute stream (the floor). Two configurations:
  2w unpinned  2 workers, nobody pinned: the case of the target; on this
               2-CPU machine the client shares the CPUs with the workers
  1w pinned    1 worker on CPU 0, client on CPU 1: every completion waits
               behind the compute stream on the one worker, and no OS
               scheduling between client and server is involved
Target: p99 with compute <= 100 us + p99 of the floor (medians of 3 runs
each, interleaved). The open-loop client counts every message scheduled
in the measured window and waits up to 1 s after it for the echoes still
owed; a message not back by then ranks above every answered one, so a
percentile that falls on one is none (infinite), and the target is then
NOT MET, as it is for a server that answered nothing in the window ("no
answer"). Columns besides the
round trip (counted from each message's scheduled send): unans, the
messages of the window never answered (median of the runs); lag99, the
client's own lateness (p99 of send start minus schedule); sent99, the p99
round trip counted from the actual send; wake/s, the server's worker
wake-ups (Stats::wakeups) per second of load.

Per run we also read, over the measured window only (/proc/PID/stat and
/proc/stat, 10 ms ticks): the server's CPU use (CPUs; with the requests,
its CPU time per request) and "busy", the CPUs' worth of other processes'
work (machine busy time minus server and client), which says whether
something else on this shared machine took time from the run, and
"steal", the time the hypervisor kept this VM's CPUs from running
(/proc/stat's steal: one 100 ms steal put a pinned run's p99 at 71 ms).
A run with busy above QUIET_LIMIT or steal of STEAL_LIMIT_MS or more is
re-run (--quiet-retries, default 1; none with --quick) and the quieter
try is kept; the others stay in the JSON, marked
superseded; after RETRY_BUDGET_S seconds nothing is re-run, so the whole
run stays under about 4 minutes. A row whose median busy is still above
QUIET_LIMIT or whose median steal is STEAL_LIMIT_MS or more is marked
"(busy)", a target verdict "inconclusive (busy)".
The first line names the library's commit (and whether its sources were
modified); the JSON keeps every record, with the commands of each row.

Ratios: throughput parkway / best peer (the peer with the highest req/s;
above 1 favours parkway), p99 parkway / best peer (the peer with the lowest
p99; below 1 favours parkway). Benchmarks report: the exit status is 0
whether or not a target is met; it is 1 only when a run failed (a server
that did not start or stop, a client error, bad echoed bytes), with a line
naming it.
"""
import argparse
import datetime
import json
import os
import platform
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

SERVERS = [  # (name, binary, extra arguments)
    ("parkway", "echo_parkway", []),
    # parkway with every send on the ring (Options::io_send_first = false):
    # the design alternative io.md measures, not a peer.
    ("parkway-ring", "echo_parkway", ["--sends", "ring"]),
    ("asio-epoll", "echo_asio_epoll", []),
    ("asio-uring", "echo_asio_uring", []),
    ("epoll", "echo_epoll", []),
]
NOT_PEERS = ("parkway", "parkway-ring")
CONFIGS = [
    {"name": "pinned-1w", "workers": 1, "server_cpus": "0", "client_cpus": "1"},
    {"name": "unpinned-2w", "workers": 2, "server_cpus": None, "client_cpus": None},
]
COMPUTE_CONFIGS = [
    {"name": "2w unpinned", "workers": 2, "server_cpus": None, "client_cpus": None},
    {"name": "1w pinned", "workers": 1, "server_cpus": "0", "client_cpus": "1"},
]
RETRY_BUDGET_S = 150  # no re-runs for busy once the run has taken this long (total stays near 4 min)
QUIET_LIMIT = 0.5  # CPUs of other processes' work tolerated during a measured window
STEAL_LIMIT_MS = 20  # hypervisor steal tolerated during a measured window
CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy_s():
    """Seconds of CPU the whole machine spent not idle (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return (sum(v[:8]) - idle) / CLK_TCK


def steal_s():
    """Seconds the hypervisor kept this machine's CPUs from running, all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[7] if len(v) > 7 else 0) / CLK_TCK


def quiet(r):
    return (r.get("busy") is not None and r["busy"] <= QUIET_LIMIT
            and (r.get("steal_ms") or 0) < STEAL_LIMIT_MS)


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads), or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def pinned(cmd, cpus):
    return (["taskset", "-c", cpus] if cpus is not None else []) + cmd


class Echo:
    def __init__(self, bindir, conns, size, warmup, seconds, verbose):
        self.bindir = bindir
        self.conns = conns
        self.size = size
        self.warmup = warmup
        self.seconds = seconds
        self.verbose = verbose
        self.records = []
        self.failures = []
        self.started = time.time()

    def fail(self, msg):
        self.failures.append(msg)
        print("  FAILED: " + msg, file=sys.stderr)

    def run(self, label, server_cmd, client_args, server_cpus=None, client_cpus=None, extra=None):
        """One server process, one client run against it; one record or None."""
        limit = self.warmup + self.seconds + 20  # the server stops by itself even if we die
        scmd = pinned(server_cmd + ["--port", "0", "--seconds", "%g" % limit], server_cpus)
        rec = {"label": label, "server_cmd": " ".join(scmd)}
        if extra:
            rec.update(extra)
        try:
            srv = subprocess.Popen(scmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            self.fail(" ".join(scmd) + ": " + str(e))
            return None
        try:
            port = None
            deadline = time.time() + 5
            while time.time() < deadline and port is None:
                r, _, _ = select.select([srv.stdout], [], [], max(0.0, deadline - time.time()))
                if not r:
                    break
                line = srv.stdout.readline()
                if not line:
                    break
                if line.startswith("listening on "):
                    port = int(line.rsplit(":", 1)[1])
            if port is None:
                self.fail(" ".join(scmd) + ": no 'listening on' line within 5 s: " + self._stop(srv)[1][-300:])
                return None
            ccmd = pinned([os.path.join(self.bindir, "echo_client"), "--port", str(port), "--conns", str(self.conns),
                           "--size", str(self.size), "--warmup", "%g" % self.warmup, "--seconds", "%g" % self.seconds]
                          + client_args, client_cpus)
            rec["client_cmd"] = " ".join(ccmd).replace("--port %d" % port, "--port P")
            t0 = time.time()
            cli = subprocess.Popen(ccmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # The measured window: read the counters at its start and end.
            time.sleep(max(0.0, t0 + self.warmup - time.time()))
            m0, s0, c0, w0, st0 = machine_busy_s(), proc_cpu_s(srv.pid), proc_cpu_s(cli.pid), time.time(), steal_s()
            time.sleep(max(0.0, t0 + self.warmup + self.seconds - time.time()))
            m1, s1, c1, w1, st1 = machine_busy_s(), proc_cpu_s(srv.pid), proc_cpu_s(cli.pid), time.time(), steal_s()
            try:
                out, err = cli.communicate(timeout=self.warmup + self.seconds + 40)
            except subprocess.TimeoutExpired:
                cli.kill()
                cli.communicate()
                self.fail(rec["client_cmd"] + ": timed out")
                self._stop(srv)
                return None
            src, serr = self._stop(srv)
            if src is None:
                self.fail(rec["server_cmd"] + ": did not stop within 10 s of SIGTERM")
                return None
            if src != 0:
                self.fail(rec["server_cmd"] + ": exit %d: %s" % (src, serr.strip()[-300:]))
                return None
            try:
                res = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                self.fail(rec["client_cmd"] + ": exit %d, no JSON: %s" % (cli.returncode, (out + err).strip()[-300:]))
                return None
            rec.update(res)
            if cli.returncode != 0:
                rec["failed"] = "client exit %d (errors %s, bad_bytes %s)" % (
                    cli.returncode, res.get("errors"), res.get("bad_bytes"))
                self.records.append(rec)
                self.fail(rec["client_cmd"] + ": " + rec["failed"] + " " + err.strip()[-200:])
                return None
            window = w1 - w0
            rec["window_s"] = round(window, 3)
            rec["steal_ms"] = round((st1 - st0) * 1000)
            if None not in (s0, s1, c0, c1) and window > 0:
                rec["server_cpus"] = round((s1 - s0) / window, 3)
                rec["client_cpus"] = round((c1 - c0) / window, 3)
                rec["server_us_per_req"] = round((s1 - s0) * 1e6 / res["requests"], 2) if res["requests"] else None
                rec["busy"] = round(max(0.0, (m1 - m0) - (s1 - s0) - (c1 - c0)) / window, 2)
            else:
                rec["busy"] = None
            rec["server_stats"] = self._last_json(src_out=self._srv_out)
            self.records.append(rec)
            if self.verbose:
                print("  " + json.dumps(rec), file=sys.stderr)
            return rec
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()

    def _stop(self, srv):
        """SIGTERM, wait up to 10 s; (exit status or None, stderr)."""
        self._srv_out = ""
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
        try:
            out, err = srv.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            out, err = srv.communicate()
            self._srv_out = out or ""
            return None, err or ""
        self._srv_out = out or ""
        return srv.returncode, err or ""

    @staticmethod
    def _last_json(src_out):
        for line in reversed(src_out.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
        return None

    def run_kept(self, label, server_cmd, client_args, retries, **kw):
        """run(); re-run while not quiet (busy > QUIET_LIMIT or steal >=
        STEAL_LIMIT_MS), up to `retries` times; keep the quietest try (the
        others are marked superseded)."""
        tries = []
        for _ in range(1 + retries):
            r = self.run(label, server_cmd, client_args, **kw)
            if r is None:
                break
            tries.append(r)
            if quiet(r):
                break
            if time.time() - self.started > RETRY_BUDGET_S:
                break
        if not tries:
            return None
        best = min(tries, key=lambda r: (not quiet(r), r.get("steal_ms") or 0,
                                         r["busy"] if r.get("busy") is not None else 99))
        for r in tries:
            if r is not best:
                r["superseded"] = True
        return best


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=3):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "%.0f" % x
    return ("%." + str(digits) + "g") % x


def p99_or_none(r):
    """A run's p99, or None when the server answered nothing in the window
    or the p99's rank falls on a message never answered (the client then
    reports null)."""
    return r.get("p99_us") if r.get("requests") else None


def med_lat(rs, key):
    """Median of a latency of runs, a run with no value for it (nothing
    answered, or the rank on an unanswered message) counting as infinite;
    None when the median is such a run."""
    if not rs:
        return None
    v = statistics.median([r[key] if r.get("requests") and r.get(key) is not None else float("inf") for r in rs])
    return None if v == float("inf") else v


def med_p99(rs):
    """Median p99 of runs (med_lat)."""
    return med_lat(rs, "p99_us")


def git_state():
    """The commit the library was built from, and whether its sources
    (userspace/, include/) differ from it."""
    def git(*a):
        try:
            return subprocess.run(["git"] + list(a), capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", "userspace", "include")
    return {"commit": head or None, "library_sources_modified": bool(dirty)}


def throughput(e, a, servers):
    kept = {}  # (config, server) -> [records]
    for rep in range(a.reps):
        for cfg in CONFIGS:
            order = servers[rep % len(servers):] + servers[:rep % len(servers)]
            for name, binary, extra in order:
                cmd = [os.path.join(a.bin, binary), "--workers", str(cfg["workers"])] + extra
                r = e.run_kept("%s/%s" % (cfg["name"], name), cmd, [], a.quiet_retries,
                               server_cpus=cfg["server_cpus"], client_cpus=cfg["client_cpus"],
                               extra={"section": "throughput", "config": cfg["name"], "server": name, "rep": rep})
                kept.setdefault((cfg["name"], name), []).append(r)
    out = {}
    print()
    # cliCPU: the client's CPUs; near 1.00 the one-thread client, not the
    # server, may be what limits req/s.
    print("%-12s %-11s %9s %8s %8s %8s %6s %6s %6s %5s %5s" % ("config", "server", "req/s", "p50 us", "p99 us",
                                                                "p999 us", "srvCPU", "us/req", "cliCPU", "fair",
                                                                "busy"))
    for cfg in CONFIGS:
        rows = {}
        for name, _, _ in servers:
            rs = [r for r in kept.get((cfg["name"], name), []) if r]
            if not rs:
                rows[name] = None
                print("%-12s %-11s %9s" % (cfg["name"], name, "failed"))
                continue
            row = {k: med([r.get(k) for r in rs]) for k in
                   ("rps", "p50_us", "p999_us", "server_cpus", "server_us_per_req", "client_cpus", "busy",
                    "steal_ms")}
            row["p99_us"] = med_p99(rs)
            row["runs"] = len(rs)
            row["rps_all"] = [r["rps"] for r in rs]
            row["p99_all"] = [p99_or_none(r) for r in rs]
            row["conn_min_max"] = [[r.get("conn_min"), r.get("conn_max")] for r in rs]
            # fairness: the fewest round trips one connection completed over the most, median of the runs
            row["fair"] = med([r["conn_min"] / r["conn_max"] for r in rs if r.get("conn_max")])
            row["server_cmd"] = rs[0]["server_cmd"].replace(" --port 0", "").rsplit(" --seconds", 1)[0]
            row["client_cmd"] = rs[0]["client_cmd"]
            row["busy_flag"] = (row["busy"] is not None and row["busy"] > QUIET_LIMIT) or \
                (row["steal_ms"] or 0) >= STEAL_LIMIT_MS
            rows[name] = row
            print("%-12s %-11s %9s %8s %8s %8s %6s %6s %6s %5s %5s%s" % (
                cfg["name"], name, fmt(row["rps"]), fmt(row["p50_us"]), fmt(row["p99_us"]), fmt(row["p999_us"]),
                fmt(row["server_cpus"], 2), fmt(row["server_us_per_req"]), fmt(row["client_cpus"], 2),
                fmt(row["fair"], 2), fmt(row["busy"], 2),
                " (busy)" if row["busy_flag"] else ""))
        pw = rows.get("parkway")
        peers = {n: r for n, r in rows.items() if n not in NOT_PEERS and r and r["rps"]}
        ratios = None
        if pw and peers and pw["p99_us"] is not None:
            best_t = max(peers, key=lambda n: peers[n]["rps"])
            lat = {n: r for n, r in peers.items() if r["p99_us"] is not None}
            best_l = min(lat, key=lambda n: lat[n]["p99_us"]) if lat else None
            ratios = {
                "throughput_best_peer": best_t,
                "throughput_ratio": round(pw["rps"] / peers[best_t]["rps"], 3),
                "p99_best_peer": best_l,
                "p99_ratio": round(pw["p99_us"] / lat[best_l]["p99_us"], 3) if best_l else None,
            }
            print("%-12s parkway / best peer: req/s %s (vs %s; above 1 favours parkway), p99 %s (vs %s; below 1 "
                  "favours parkway)" % (cfg["name"], fmt(ratios["throughput_ratio"]), best_t,
                                        fmt(ratios["p99_ratio"]), best_l))
        out[cfg["name"]] = {"rows": rows, "ratios": ratios}
    return out


def compute(e, a):
    runs = {}  # (config, kind) -> [records]
    for rep in range(a.reps):
        for cfg in COMPUTE_CONFIGS:
            pair = [("floor", 0), ("compute", a.compute_us)]
            if rep % 2:
                pair.reverse()
            for kind, us in pair:
                cmd = [os.path.join(a.bin, "echo_parkway"), "--workers", str(cfg["workers"])]
                if us:
                    cmd += ["--compute-us", str(us)]
                r = e.run_kept("compute %s/%s" % (cfg["name"], kind), cmd, ["--rate", "%g" % a.rate],
                               a.quiet_retries, server_cpus=cfg["server_cpus"], client_cpus=cfg["client_cpus"],
                               extra={"section": "compute", "config": cfg["name"], "kind": kind, "compute_us": us,
                                      "rep": rep})
                runs.setdefault((cfg["name"], kind), []).append(r)
    out = {"rate": a.rate, "compute_us": a.compute_us, "configs": {}}
    print()
    print("completion latency under compute: echo_parkway, %d us compute tasks, client open loop at %g req/s over "
          "%d connections" % (a.compute_us, a.rate, a.conns))
    print("%-12s %-8s %7s %6s %7s %8s %8s %7s %7s %6s %7s %5s" % (
        "config", "", "answers", "unans", "p50 us", "p99 us", "p999 us", "lag99", "sent99", "srvCPU", "wake/s",
        "busy"))
    for cfg in COMPUTE_CONFIGS:
        c = {}
        for kind in ("floor", "compute"):
            rs = [r for r in runs.get((cfg["name"], kind), []) if r]
            if not rs:
                print("%-12s %-8s failed" % (cfg["name"], kind))
                continue
            # A run without the value (no answer, or its rank on an
            # unanswered message) counts as infinite (med_lat).
            row = {k: med_lat(rs, k) for k in ("p50_us", "p999_us", "from_send_p99_us")}
            row.update({k: med([r.get(k) for r in rs])
                        for k in ("rps", "send_lag_p99_us", "server_cpus", "busy", "steal_ms", "unanswered")})
            row["p99_us"] = med_p99(rs)
            row["answered"] = sum(1 for r in rs if r.get("requests"))
            row["runs"] = len(rs)
            row["p99_all"] = [p99_or_none(r) for r in rs]
            st = [r.get("server_stats") or {} for r in rs]
            win = [(r.get("warmup_s", 0) + r.get("seconds", 0)) or 1 for r in rs]
            # Server counters cover its whole life; per second of client load.
            row["wakeups_per_s"] = med([s["wakeups"] / w for s, w in zip(st, win) if "wakeups" in s])
            row["steals_per_s"] = med([s["steals"] / w for s, w in zip(st, win) if "steals" in s])
            row["compute_tasks"] = [s.get("compute_tasks") for s in st]
            row["server_cmd"] = rs[0]["server_cmd"].replace(" --port 0", "").rsplit(" --seconds", 1)[0]
            row["client_cmd"] = rs[0]["client_cmd"]
            c[kind] = row
            print("%-12s %-8s %7s %6s %7s %8s %8s %7s %7s %6s %7s %5s" % (
                cfg["name"], kind, "%d/%d" % (row["answered"], row["runs"]), fmt(row["unanswered"]),
                fmt(row["p50_us"]),
                fmt(row["p99_us"]) if row["p99_us"] is not None else "none", fmt(row["p999_us"]),
                fmt(row["send_lag_p99_us"]), fmt(row["from_send_p99_us"]), fmt(row["server_cpus"], 2),
                fmt(row["wakeups_per_s"]), fmt(row["busy"], 2)))
        if "floor" in c and "compute" in c and c["floor"]["p99_us"] is not None:
            target = a.compute_us + c["floor"]["p99_us"]
            busy = max(c["floor"]["busy"] or 0, c["compute"]["busy"] or 0)
            stolen = max(c["floor"]["steal_ms"] or 0, c["compute"]["steal_ms"] or 0) >= STEAL_LIMIT_MS
            got = c["compute"]["p99_us"]
            met = got is not None and got <= target
            c["target_p99_us"] = round(target, 2)
            c["met_ignoring_busy"] = met
            c["verdict"] = ("NOT MET (unanswered messages)" if got is None and c["compute"]["answered"] else
                            "NOT MET (no answer)" if got is None else
                            "inconclusive (busy)" if busy > QUIET_LIMIT or stolen else "MET" if met else "NOT MET")
            print("%-12s target: p99 with compute <= %d us + floor p99 = %.1f us; measured %s: %s" % (
                cfg["name"], a.compute_us, target, "none" if got is None else "%.1f us" % got, c["verdict"]))
        out["configs"][cfg["name"]] = c
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bench/echo", help="directory of the echo binaries")
    ap.add_argument("--out", default="build/bench/echo/results.json")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rate", type=float, default=5000, help="open-loop rate of the compute-latency case (req/s)")
    ap.add_argument("--compute-us", type=int, default=100, help="length of one compute task (us)")
    ap.add_argument("--quiet-retries", type=int, default=1)
    ap.add_argument("--only", default="", help="comma list of sections: throughput,compute (default both)")
    ap.add_argument("--servers", default="", help="comma list of servers for the throughput section (default all)")
    ap.add_argument("--quick", action="store_true", help="one repetition, 0.5 s + 1.5 s runs, no re-runs")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.warmup, a.seconds, a.quiet_retries = 1, 0.5, 1.5, 0
    only = set(a.only.split(",")) if a.only else {"throughput", "compute"}
    servers = [s for s in SERVERS if not a.servers or s[0] in a.servers.split(",")]
    need = [b for _, b, _ in servers] + ["echo_client"] + (["echo_parkway"] if "compute" in only else [])
    for b in need:
        if not os.access(os.path.join(a.bin, b), os.X_OK):
            print("run_echo.py: %s not found in %s (make bench-echo-build)" % (b, a.bin), file=sys.stderr)
            return 1
    if not shutil.which("taskset"):
        print("run_echo.py: taskset (util-linux) is needed to pin", file=sys.stderr)
        return 1
    ncpu = len(os.sched_getaffinity(0))
    gs = git_state()
    e = Echo(a.bin, a.conns, a.size, a.warmup, a.seconds, a.verbose)
    print("echo over loopback: %d connections x %d-byte messages, %g s warm-up + %g s measured, %d repetitions "
          "(median); %d CPUs; library at %s%s" % (a.conns, a.size, a.warmup, a.seconds, a.reps, ncpu, gs["commit"],
                                                  " (sources modified)" if gs["library_sources_modified"] else ""))
    summary = {"throughput": None, "compute": None}
    if "throughput" in only:
        summary["throughput"] = throughput(e, a, servers)
    if "compute" in only:
        summary["compute"] = compute(e, a)
    elapsed = time.time() - e.started
    print("\n%d runs in %.0f s%s" % (len(e.records), elapsed, "" if not e.failures else
                                     "; %d FAILED (see above)" % len(e.failures)))
    out = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {"kernel": platform.release(), "cpus": ncpu, "machine": platform.machine()},
        "library": gs,
        "args": vars(a),
        "quiet_limit": QUIET_LIMIT, "steal_limit_ms": STEAL_LIMIT_MS,
        "summary": summary,
        "records": e.records,
        "failures": e.failures,
        "elapsed_s": round(elapsed, 1),
    }
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        print("wrote " + a.out)
    return 1 if e.failures else 0


if __name__ == "__main__":
    sys.exit(main())
