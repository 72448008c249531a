#!/usr/bin/env python3
"""run_httpd_bench.py -- parkway-httpd against nginx over loopback: one run,
peers interleaved, medians, ratios parkway/nginx, the command of every row.

  python3 tests/bench/httpd/run_httpd_bench.py --httpd build/parkway-httpd \\
      --out build/bench/httpd.json [--quick]

Sections (see docs/benchmarks.md, "HTTP server: parkway-httpd against nginx"):

- load, pinned: each server on CPU 0 with one worker (parkway-httpd
  --workers 1, nginx worker_processes 1; taskset -c 0), wrk -t1 on CPU 1.
- load, 2 workers: both servers with two workers, nothing pinned, wrk -t1.
  Rows: GET /plaintext and GET of a 4 KiB static file, each at 1, 64 and
  256 connections and with 16-deep pipelining (pipeline.lua, 64
  connections).
  Per run: req/s, p50 and p99 from `wrk --latency` (none for the
  pipelined rows: wrk_latency_valid() says why), and the server's CPU
  time per request (utime+stime of all its processes from /proc/PID/stat,
  after minus before, over the requests wrk completed). Repetitions are
  interleaved (the order of the servers rotates each round); the table shows
  medians and parkway/nginx ratios of req/s and p99.
- cross-check with a second load generator (part of load): h2load --h1
  (nghttp2-client) -t1 -c64 on /plaintext, /plaintext with 16 requests in
  flight per connection (-m16: HTTP/1.1 pipelining) and the 4 KiB file,
  same configurations, interleaved the same way. h2load reports no
  percentiles: req/s, and the mean and maximum time per request. If
  h2load is missing, the cross-check is skipped and says so.
- idle: a fresh server (two workers), 10,000 keep-alive connections that
  each made one request and then stay silent; server CPU per idle second
  (from /proc/PID/task/*/schedstat, ns) and RSS delta per connection.
  The connections are held by a separate process (this script, --role
  idle-client) so that each side has its own descriptor table.
- compute beside I/O (parkway-httpd only, two workers): GET /plaintext at a
  fixed rate from an open-loop client (http_open_loop.cpp, which make
  bench-httpd builds into build/bench/httpd/: a fixed send schedule,
  latency measured from each request's scheduled time, so neither a
  stalled server nor a late client can hide a backlog), alone and while 4 connections
  keep requesting /fib/30 (wrk, closed loop); and the baseline, the same
  mix against a server started with --fib-pool 2, which computes /fib/N on
  a separate pool of two threads (a second parkway runtime; the request's
  coroutine moves there and back with resume_on) while its two workers do
  only the I/O.

Everything listens on 127.0.0.1, every child runs under a timeout, every
server is stopped in a finally block. Benchmarks report; they do not
assert: the exit status is 0 whatever the numbers, 1 only when the
benchmark itself could not run (a server did not start, wrk is missing).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
OPEN_LOOP_RATE = 1000  # /plaintext requests per second in the compute-beside-I/O section
NOFILE = 20000  # servers' and idle client's descriptor limit (capped by the hard limit)


# ---------------------------------------------------------------- utilities

def raise_nofile(want=NOFILE):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft == resource.RLIM_INFINITY or soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def die_with_parent(sig=signal.SIGKILL):
    """In a child before exec: send it `sig` when this script dies, so that
    no server outlives a benchmark that was killed. nginx gets SIGTERM: its
    master then stops its workers, which a SIGKILL of the master would
    leave running (the signal is not inherited across fork)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children_of(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def proc_ticks(pid):
    """utime + stime of process pid (all its threads), in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def proc_schedstat_ns(pid, field):
    """Field `field` of /proc/PID/task/*/schedstat summed over the threads
    of pid, in ns: 0 is time on a CPU, 1 time runnable but kept off one."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[field])
        except OSError:
            pass
    return total


def proc_sched_ns(pid):
    """CPU time of all threads of pid in ns."""
    return proc_schedstat_ns(pid, 0)


def proc_runq_ns(pid):
    """Time the threads of pid spent runnable but not running, in ns: how
    long the OS kept them off a CPU they wanted."""
    return proc_schedstat_ns(pid, 1)


def machine_busy_s():
    """Seconds of CPU the whole machine spent not idle (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK


def steal_s():
    """Seconds the hypervisor kept this machine's CPUs from running, all
    CPUs (/proc/stat's steal). One 100 ms steal is a p99 of its own."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[7] if len(v) > 7 else 0) / CLK_TCK


STEAL_NOTE_MS = 20  # runs with at least this much steal are listed under the table


def own_cpu_s():
    """CPU time of this script and its reaped children (wrk, clients)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def proc_rss_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * PAGE


def http_get(port, path, timeout=2.0):
    """One GET on a fresh connection: (status, body) or None."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path).encode())
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body
    except (OSError, ValueError, IndexError):
        return None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b):
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- servers

class Server:
    """A server process started by us: .pids() are the processes whose CPU
    time and memory count (nginx: master and workers)."""

    def __init__(self, name, cmd, port, cpus=None, env=None, log=None, death_signal=signal.SIGKILL):
        self.name, self.cmd, self.port, self.cpus = name, cmd, port, cpus
        self.death_signal = death_signal
        self.log = log
        self.logf = None
        self.proc = None
        self.env = env

    def start(self, timeout=10):
        cpus, death_signal = self.cpus, self.death_signal

        def pre():
            os.setsid()
            die_with_parent(death_signal)
            raise_nofile()
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        self.logf = open(self.log, "wb") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE if self.port == 0 else self.logf,
                                     stderr=self.logf, stdin=subprocess.DEVNULL, preexec_fn=pre, env=self.env)
        if self.port == 0:  # parkway-httpd --port 0 prints the address it got
            line = self._readline(timeout)
            if not line or "listening on" not in line:
                self.stop()
                raise RuntimeError("%s: did not start: %r" % (self.name, line))
            self.port = int(line.strip().split()[3].rsplit(":", 1)[1])
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d at start (%s)" % (self.name, self.proc.returncode, self.log))
            r = http_get(self.port, "/plaintext", 0.5)
            if r and r[0] == 200:
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s: no answer on port %d after %d s" % (self.name, self.port, timeout))

    def _readline(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ok = sel.select(timeout)
        sel.close()
        return self.proc.stdout.readline().decode(errors="replace") if ok else None

    def pids(self):
        if self.proc is None or self.proc.poll() is not None:
            return []
        return [self.proc.pid] + children_of(self.proc.pid)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ticks(self):
        return sum(proc_ticks(p) for p in self.pids())

    def sched_ns(self):
        return sum(proc_sched_ns(p) for p in self.pids())

    def runq_ns(self):
        return sum(proc_runq_ns(p) for p in self.pids())

    def rss(self):
        return sum(proc_rss_bytes(p) for p in self.pids())

    def stop(self):
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            pids = self.pids()
            try:
                self.proc.send_signal(signal.SIGTERM)
                rc = self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                rc = self.proc.wait(timeout=5)
            # nginx workers exit with their master; make sure.
            for p in pids[1:]:
                try:
                    os.kill(p, 0)
                    os.kill(p, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self.proc.stdout:
            self.proc.stdout.close()
        if self.logf not in (None, subprocess.DEVNULL):
            self.logf.close()
        return rc


def parkway_server(exe, workers, cpus, tmp, root, fib_pool=0):
    cmd = [exe, "--port", "0", "--workers", str(workers), "--root", root]
    if fib_pool:
        cmd += ["--fib-pool", str(fib_pool)]
    return Server("parkway", cmd, 0, cpus, log=os.path.join(tmp, "parkway-%d-%d.log" % (workers, fib_pool)))


def nginx_server(exe, workers, cpus, tmp, root):
    prefix = tempfile.mkdtemp(prefix="nginx-%d-" % workers, dir=tmp)
    os.chmod(prefix, 0o755)
    for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        os.mkdir(os.path.join(prefix, d))
    port = free_port()
    with open(os.path.join(HERE, "nginx.conf.in")) as f:
        conf = f.read()
    for k, v in {"PREFIX": prefix, "WORKERS": workers, "NOFILE": NOFILE, "CONNECTIONS": NOFILE,
                 "PORT": port, "ROOT": root}.items():
        conf = conf.replace("@%s@" % k, str(v))
    path = os.path.join(prefix, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    cmd = [exe, "-p", prefix + "/", "-c", path, "-e", os.path.join(prefix, "error.log")]
    return Server("nginx", cmd, port, cpus, log=os.path.join(prefix, "stderr.log"),
                  death_signal=signal.SIGTERM)


# ---------------------------------------------------------------- wrk

def parse_wrk_time(s):
    for unit, mult in (("us", 1e-3), ("ms", 1.0), ("s", 1e3), ("m", 60e3), ("h", 3600e3)):
        if s.endswith(unit):
            return float(s[:-len(unit)]) * mult
    return None


def parse_wrk(out):
    r = {"requests": None, "req_s": None, "p50_ms": None, "p99_ms": None, "socket_errors": 0, "non_2xx": 0}
    lines = out.splitlines()
    for i, line in enumerate(lines):
        t = line.split()
        if not t:
            continue
        # wrk prints 0.00us for a percentile its walk over the histogram
        # does not reach (no sample, or the samples its correction adds
        # below the smallest recorded one, which count in its total only;
        # wrk_latency_valid()): that is no measurement, not a latency of 0,
        # and must not count as a win.
        if t[0] in ("50%", "99%") and len(t) == 2:
            v = parse_wrk_time(t[1])
            r["p50_ms" if t[0] == "50%" else "p99_ms"] = v if v else None
            if v == 0:
                r["latency_note"] = "wrk recorded no latency sample"
        elif len(t) >= 3 and t[1] == "requests" and t[2] == "in":
            r["requests"] = int(t[0])
        elif t[0] == "Requests/sec:":
            r["req_s"] = float(t[1])
        elif line.strip().startswith("Socket errors:"):
            r["socket_errors"] = sum(int(x.strip(",")) for x in t if x.strip(",").isdigit())
            r["socket_errors_text"] = line.strip()
        elif line.strip().startswith("Non-2xx or 3xx responses:"):
            r["non_2xx"] = int(t[-1])
    return r


def wrk_latency_valid(row):
    """Whether wrk 4.1's percentiles mean anything for a row. Not with
    pipelining (pipeline.lua): wrk records one latency per batch of 16
    requests, but the coordinated-omission correction it applies before
    printing (stats_correct, with an interval of run time over responses
    per connection) counts every response, so it adds about 16 times too
    many synthetic samples, and those below the smallest recorded sample
    enter the total its percentile walk aims at but never the walk: the
    figures are not percentiles of the batches' latencies (p90 and p99
    print 0.00us for a fast server; the p50 and a p99 that does print
    move with the server's throughput, not only with its latencies)."""
    return not row.get("script")


def parse_h2load(out):
    """req/s, requests done and failed, and time per request (mean, max, ms)."""
    r = {"req_s": None, "requests": None, "failed": None, "mean_ms": None, "max_ms": None}
    for line in out.splitlines():
        t = line.split()
        if line.startswith("finished in") and len(t) >= 5:
            r["req_s"] = float(t[3])
        elif line.startswith("requests:") and len(t) >= 14:
            # requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
            r["requests"] = int(t[7])
            r["failed"] = int(t[9]) + int(t[11]) + int(t[13])
        elif line.startswith("time for request:") and len(t) >= 7:
            r["max_ms"] = parse_wrk_time(t[4])
            r["mean_ms"] = parse_wrk_time(t[5])
    return r


def run_load_generator(cmd, pinned, duration):
    """Runs a load generator (on CPU 1 if pinned) under a timeout: (cmd, stdout, rc, stderr)."""
    if pinned:
        cmd = ["taskset", "-c", "1"] + cmd
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 20)
        return cmd, p.stdout, p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        return cmd, "", "timeout", ""


class Bench:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.records = []
        self.failures = []
        self.problems = []  # what a server did wrong under load (errors, stalls, exits)
        self.h2_records = []  # the h2load cross-check
        self.h2load_missing = shutil.which("h2load") is None

    def wrk(self, server, row, pinned, duration, record=True):
        url = "http://%s:%d%s" % (HOST, server.port, row["path"])
        cmd = ["wrk", "-t1", "-c%d" % row["conns"], "-d%ds" % max(1, round(duration)), "--latency", "--timeout", "5s"]
        if row.get("script"):
            cmd += ["-s", row["script"]]
        cmd.append(url)
        t0, b0, o0, w0, s0 = server.ticks(), machine_busy_s(), own_cpu_s(), time.time(), steal_s()
        cmd, out, rc, err = run_load_generator(cmd, pinned, duration)
        t1 = server.ticks() if server.alive() else None
        b1, o1, w1, s1 = machine_busy_s(), own_cpu_s(), time.time(), steal_s()
        rec = parse_wrk(out)
        if not wrk_latency_valid(row):
            rec["wrk_p50_ms"], rec["wrk_p99_ms"] = rec["p50_ms"], rec["p99_ms"]  # kept, not used
            rec["p50_ms"] = rec["p99_ms"] = None
            rec["latency_note"] = "pipelined: wrk's percentiles are not valid (wrk_latency_valid)"
        rec.update({"server": server.name, "row": row["name"], "config": "pinned" if pinned else "2 workers",
                    "cmd": " ".join(cmd), "rc": rc, "steal_ms": round((s1 - s0) * 1000)})
        # CPUs' worth of other processes' work during the run (the machine
        # may be shared): machine busy time minus the server's, wrk's and ours.
        if t1 is not None:
            rec["foreign_cpus"] = round(max(0.0, (b1 - b0) - (t1 - t0) / CLK_TCK - (o1 - o0)) / (w1 - w0), 2)
        if rec["requests"] and t1 is not None:
            rec["cpu_us_per_req"] = (t1 - t0) / CLK_TCK / rec["requests"] * 1e6
        else:
            rec["cpu_us_per_req"] = None
        if not server.alive():
            self.problems.append("%s exited (rc %s) during: %s" % (server.name, server.proc.returncode, rec["cmd"]))
        if rc != 0 or rec["req_s"] is None:
            self.failures.append("%s: rc %s: %s" % (rec["cmd"], rc, (out + err)[-300:]))
        if rec["socket_errors"] or rec["non_2xx"]:
            self.problems.append("%s on %s %s: %s, non-2xx %d" % (server.name, rec["config"], row["name"],
                                                                rec.get("socket_errors_text", "no socket errors"),
                                                                rec["non_2xx"]))
        if record:
            self.records.append(rec)
            if self.args.verbose:
                print("  " + json.dumps(rec), file=sys.stderr)
        return rec


    def h2load(self, server, row, pinned, duration):
        url = "http://%s:%d%s" % (HOST, server.port, row["path"])
        cmd = ["h2load", "--h1", "-t1", "-c%d" % row["conns"], "-m%d" % row.get("depth", 1),
               "-D%d" % max(1, round(duration)), "--warm-up-time=1", url]
        t0, s0 = server.ticks(), steal_s()
        cmd, out, rc, err = run_load_generator(cmd, pinned, duration)
        t1 = server.ticks() if server.alive() else None
        rec = parse_h2load(out)
        rec.update({"tool": "h2load", "server": server.name, "row": row["name"],
                    "config": "pinned" if pinned else "2 workers", "cmd": " ".join(cmd), "rc": rc,
                    "steal_ms": round((steal_s() - s0) * 1000)})
        # The server's CPU over the whole h2load run (its warm-up too), per
        # request of the measured part scaled to that length: an estimate.
        rec["cpu_us_per_req"] = ((t1 - t0) / CLK_TCK / (rec["req_s"] * (max(1, round(duration)) + 1)) * 1e6
                                 if t1 is not None and rec["req_s"] else None)
        if rc != 0 or rec["req_s"] is None:
            self.failures.append("%s: rc %s: %s" % (rec["cmd"], rc, (out + err)[-300:]))
        if rec["failed"]:
            self.problems.append("%s on %s %s: %d requests failed (h2load)" % (server.name, rec["config"],
                                                                                row["name"], rec["failed"]))
        self.h2_records.append(rec)
        if self.args.verbose:
            print("  " + json.dumps(rec), file=sys.stderr)
        return rec


# ---------------------------------------------------------------- idle client (own process)

def read_response(buf):
    """Length of the first complete response in buf, or 0."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 0
    length = 0
    for line in buf[:end].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    total = end + 4 + length
    return total if len(buf) >= total else 0


REQ = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n"


def role_idle_client(a):
    """Opens a.n connections in batches, makes one request on each, prints
    'ready N', waits for a line on stdin, prints 'alive M' (connections the
    server has not closed), closes them all."""
    raise_nofile()
    sel = selectors.DefaultSelector()
    socks = []
    deadline = time.time() + a.timeout
    batch = 250
    failed = 0
    while len(socks) < a.n and time.time() < deadline:
        pending = {}
        for _ in range(min(batch, a.n - len(socks))):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((HOST, a.port))
            pending[s.fileno()] = [s, b"", False]
            sel.register(s, selectors.EVENT_WRITE)
        while pending and time.time() < deadline:
            for key, ev in sel.select(1.0):
                st = pending[key.fd]
                s = st[0]
                if not st[2]:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        failed += 1
                        sel.unregister(s)
                        s.close()
                        del pending[key.fd]
                        continue
                    s.send(REQ)
                    st[2] = True
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                try:
                    b = s.recv(4096)
                except OSError:
                    b = b""
                if not b:
                    failed += 1
                    sel.unregister(s)
                    s.close()
                    del pending[key.fd]
                    continue
                st[1] += b
                if read_response(st[1]):
                    sel.unregister(s)
                    socks.append(s)
                    del pending[key.fd]
        for st in pending.values():
            sel.unregister(st[0])
            st[0].close()
            failed += 1
        if failed > a.n // 10:
            break
    print("ready %d failed %d" % (len(socks), failed), flush=True)
    sys.stdin.readline()
    # A connection the server closed is readable (EOF); an open one is not.
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = len(sel.select(0.2))
    print("alive %d" % (len(socks) - closed), flush=True)
    for s in socks:
        s.close()


# ---------------------------------------------------------------- sections

LOAD_ROWS = [
    {"name": "plaintext c1", "path": "/plaintext", "conns": 1},
    {"name": "plaintext c64", "path": "/plaintext", "conns": 64},
    {"name": "plaintext c256", "path": "/plaintext", "conns": 256},
    {"name": "plaintext c64 pipeline 16", "path": "/plaintext", "conns": 64,
     "script": os.path.join(HERE, "pipeline.lua")},
    {"name": "4 KiB file c1", "path": "/file4k.txt", "conns": 1},
    {"name": "4 KiB file c64", "path": "/file4k.txt", "conns": 64},
    {"name": "4 KiB file c256", "path": "/file4k.txt", "conns": 256},
    {"name": "4 KiB file c64 pipeline 16", "path": "/file4k.txt", "conns": 64,
     "script": os.path.join(HERE, "pipeline.lua")},
]


H2LOAD_ROWS = [
    {"name": "plaintext c64", "path": "/plaintext", "conns": 64},
    {"name": "plaintext c64 pipeline 16", "path": "/plaintext", "conns": 64, "depth": 16},
    {"name": "4 KiB file c64", "path": "/file4k.txt", "conns": 64},
]


def load_section(b, servers, pinned, reps, duration):
    # Warm-up (not recorded): caches, page faults, first allocations.
    for s in servers:
        b.wrk(s, LOAD_ROWS[1], pinned, 1, record=False)
    for row in LOAD_ROWS:
        for r in range(reps):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for s in order:
                b.wrk(s, row, pinned, duration)
    if b.h2load_missing:
        return
    for row in H2LOAD_ROWS:
        for r in range(reps):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for s in order:
                b.h2load(s, row, pinned, duration)


def idle_section(b, httpd, nginx_exe, root, reps, conns, idle_s):
    out = []
    for r in range(reps):
        makers = [("parkway", lambda: parkway_server(httpd, 2, None, b.tmp, root)),
                  ("nginx", lambda: nginx_server(nginx_exe, 2, None, b.tmp, root))]
        if r % 2:
            makers.reverse()
        for name, make in makers:
            srv = make()
            client = None
            rec = {"server": name, "rep": r, "connections": conns}
            try:
                srv.start()
                for _ in range(50):
                    http_get(srv.port, "/plaintext")
                time.sleep(0.3)
                rss0 = srv.rss()
                cmd = [sys.executable, os.path.abspath(__file__), "--role", "idle-client", "--port", str(srv.port),
                       "--n", str(conns), "--timeout", "60"]
                rec["cmd"] = " ".join(cmd[1:])
                client = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                sel = selectors.DefaultSelector()
                sel.register(client.stdout, selectors.EVENT_READ)
                line = client.stdout.readline() if sel.select(90) else ""
                sel.close()
                t = line.split()
                if len(t) < 4 or t[0] != "ready":
                    b.failures.append("idle %s: client said %r" % (name, line))
                    continue
                rec["opened"], rec["open_failed"] = int(t[1]), int(t[3])
                time.sleep(0.5)  # let the last accepts and reads settle
                c0, k0, b0, w0 = srv.sched_ns(), srv.ticks(), machine_busy_s(), time.time()
                time.sleep(idle_s)
                c1, k1, b1, w1 = srv.sched_ns(), srv.ticks(), machine_busy_s(), time.time()
                rec["foreign_cpus"] = round(max(0.0, (b1 - b0) - (k1 - k0) / CLK_TCK) / (w1 - w0), 2)
                rss1 = srv.rss()
                client.stdin.write("close\n")
                client.stdin.flush()
                line = client.stdout.readline()
                t = line.split()
                rec["alive_at_end"] = int(t[1]) if len(t) == 2 and t[0] == "alive" else None
                rec["idle_s"] = round(w1 - w0, 3)
                rec["cpu_ms_per_s"] = (c1 - c0) / 1e6 / (w1 - w0)
                rec["cpu_ticks_ms_per_s"] = (k1 - k0) * 1000.0 / CLK_TCK / (w1 - w0)
                rec["rss_before_kib"] = rss0 // 1024
                rec["rss_idle_kib"] = rss1 // 1024
                rec["bytes_per_conn"] = (rss1 - rss0) / max(1, rec["opened"])
                if rec["alive_at_end"] is not None and rec["alive_at_end"] < rec["opened"]:
                    b.problems.append("idle %s: %d of %d connections closed by the server"
                                      % (name, rec["opened"] - rec["alive_at_end"], rec["opened"]))
                if rec["open_failed"]:
                    b.problems.append("idle %s: %d connections failed to open or to get a response"
                                      % (name, rec["open_failed"]))
                out.append(rec)
                if b.args.verbose:
                    print("  " + json.dumps(rec), file=sys.stderr)
            finally:
                if client is not None:
                    try:
                        client.stdin.close()
                    except OSError:
                        pass
                    try:
                        client.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        client.kill()
                        client.wait()
                rc = srv.stop()
                if rc not in (0, None):
                    b.problems.append("idle %s: server exit status %s after SIGTERM" % (name, rc))
    return out


def open_loop(b, port, rate, duration, conns):
    cmd = [b.args.open_loop_client, "--port", str(port), "--path", "/plaintext", "--rate", str(rate),
           "--seconds", str(duration), "--conns", str(conns), "--drain", "5"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 40)
        rec = json.loads(p.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        b.failures.append("open-loop client: %s (stderr: %s)" % (e, locals().get("p") and p.stderr.strip()))
        return None
    rec["cmd"] = " ".join(cmd)
    return rec


def leaf_task(b, srv):
    """The longest task /fib/30 runs between two scheduling points: a
    serial fib(23) (parallel_fib's cutoff, handlers.cpp), timed as the p50
    of /fib/23 requests over one connection (it includes one request's
    own cost, so the bound it sets is a little loose)."""
    cmd = ["wrk", "-t1", "-c1", "-d1s", "--latency", "--timeout", "5s", "http://%s:%d/fib/23" % (HOST, srv.port)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        b.failures.append("leaf task: wrk timed out")
        return None
    r = parse_wrk(p.stdout)
    return {"mode": "leaf task", "p50_ms": r["p50_ms"], "cmd": " ".join(cmd)}


def compute_section(b, srv, reps, rate, duration, conns, fib_conns, modes=("alone", "with fib")):
    out = []
    if "with fib" in modes:
        leaf = leaf_task(b, srv)
        if leaf:
            out.append(leaf)
    for r in range(reps):
        for mode in (modes if r % 2 == 0 else tuple(reversed(modes))):
            rec = {"mode": mode, "rep": r}
            fib = None
            if mode != "alone":
                fcmd = ["wrk", "-t1", "-c%d" % fib_conns, "-d%ds" % max(1, round(duration + 2)), "--timeout", "10s",
                        "http://%s:%d/fib/30" % (HOST, srv.port)]
                rec["fib_cmd"] = " ".join(fcmd)
                fib = subprocess.Popen(fcmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                time.sleep(1.0)
            k0, q0, w0, st0 = srv.ticks(), srv.runq_ns(), time.time(), steal_s()
            ol = open_loop(b, srv.port, rate, duration, conns)
            k1, q1, w1, st1 = srv.ticks(), srv.runq_ns(), time.time(), steal_s()
            rec["steal_ms"] = round((st1 - st0) * 1000)
            rec["server_cpus_busy"] = (k1 - k0) / CLK_TCK / (w1 - w0)
            rec["server_runq_ms_per_s"] = (q1 - q0) / 1e6 / (w1 - w0)
            if fib is not None:
                try:
                    fo, _ = fib.communicate(timeout=duration + 20)
                except subprocess.TimeoutExpired:
                    fib.kill()
                    fo, _ = fib.communicate()
                    b.failures.append("fib load: wrk timed out")
                fr = parse_wrk(fo)
                rec["fib_req_s"] = fr["req_s"]
                if fr["socket_errors"] or fr["non_2xx"]:
                    b.problems.append("fib load: %s, non-2xx %d" % (fr.get("socket_errors_text"), fr["non_2xx"]))
            if ol:
                rec.update(ol)
                if ol["errors"] or ol["unanswered"] or ol.get("lost"):
                    b.problems.append("open-loop %s: %d errors, %d unanswered, %d lost of %d"
                                      % (mode, ol["errors"], ol["unanswered"], ol.get("lost", 0), ol["scheduled"]))
            out.append(rec)
            if b.args.verbose:
                print("  " + json.dumps(rec), file=sys.stderr)
    return out


# ---------------------------------------------------------------- report

def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def summarize(b, idle, compute, pinned_cfgs):
    rows = []
    lines = []
    lines.append("%-12s %-27s %12s %12s %6s  %9s %9s %9s %9s %6s  %8s %8s %5s" % (
        "config", "row", "parkway r/s", "nginx r/s", "ratio", "pk p50ms", "ng p50ms", "pk p99ms", "ng p99ms",
        "ratio", "pk us/rq", "ng us/rq", "busy"))
    for cfg in pinned_cfgs:
        for row in LOAD_ROWS:
            m = {}
            for srv in ("parkway", "nginx"):
                rs = [x for x in b.records if x["config"] == cfg and x["row"] == row["name"] and x["server"] == srv]
                m[srv] = {k: med([x.get(k) for x in rs])
                          for k in ("req_s", "p50_ms", "p99_ms", "cpu_us_per_req", "foreign_cpus")}
                m[srv]["runs"] = len([x for x in rs if x["req_s"] is not None])
            ent = {"config": cfg, "row": row["name"], "parkway": m["parkway"], "nginx": m["nginx"],
                   "req_s_ratio": ratio(m["parkway"]["req_s"], m["nginx"]["req_s"]),
                   "p99_ratio": ratio(m["parkway"]["p99_ms"], m["nginx"]["p99_ms"]),
                   "busy": med([x.get("foreign_cpus") for x in b.records
                                if x["config"] == cfg and x["row"] == row["name"]]),
                   "cmds": sorted({x["cmd"] for x in b.records if x["config"] == cfg and x["row"] == row["name"]})}
            rows.append(ent)
            p, n = m["parkway"], m["nginx"]
            lines.append("%-12s %-27s %12s %12s %6s  %9s %9s %9s %9s %6s  %8s %8s %5s" % (
                cfg, row["name"], fmt(p["req_s"], ",.0f"), fmt(n["req_s"], ",.0f"), fmt(ent["req_s_ratio"], ".2f"),
                fmt(p["p50_ms"], ".3f"), fmt(n["p50_ms"], ".3f"), fmt(p["p99_ms"], ".3f"), fmt(n["p99_ms"], ".3f"),
                fmt(ent["p99_ratio"], ".2f"), fmt(p["cpu_us_per_req"], ".2f"), fmt(n["cpu_us_per_req"], ".2f"),
                fmt(ent["busy"], ".2f")))
    lines.append("ratio = parkway/nginx (r/s: above 1 favours parkway; p99: below 1 favours parkway); medians of "
                 "the runs; us/rq = server CPU per request; busy = other processes' CPUs during the runs")
    h2rows = []
    if b.h2load_missing:
        lines.append("h2load cross-check: SKIPPED, h2load not found (make deps installs nghttp2-client)")
    elif b.h2_records:
        lines.append("")
        lines.append("%-12s %-27s %12s %12s %6s  %9s %9s %9s %9s  %8s %8s" % (
            "h2load --h1", "row", "parkway r/s", "nginx r/s", "ratio", "pk mean", "ng mean", "pk max",
            "ng max", "pk us/rq", "ng us/rq"))
        for cfg in pinned_cfgs:
            for row in H2LOAD_ROWS:
                m = {}
                for srv in ("parkway", "nginx"):
                    rs = [x for x in b.h2_records if x["config"] == cfg and x["row"] == row["name"]
                          and x["server"] == srv]
                    m[srv] = {k: med([x.get(k) for x in rs]) for k in ("req_s", "mean_ms", "max_ms", "cpu_us_per_req")}
                    m[srv]["runs"] = len([x for x in rs if x["req_s"] is not None])
                ent = {"config": cfg, "row": row["name"], "parkway": m["parkway"], "nginx": m["nginx"],
                       "req_s_ratio": ratio(m["parkway"]["req_s"], m["nginx"]["req_s"]),
                       "cmds": sorted({x["cmd"] for x in b.h2_records
                                       if x["config"] == cfg and x["row"] == row["name"]})}
                h2rows.append(ent)
                p, n = m["parkway"], m["nginx"]
                lines.append("%-12s %-27s %12s %12s %6s  %9s %9s %9s %9s  %8s %8s" % (
                    cfg, row["name"], fmt(p["req_s"], ",.0f"), fmt(n["req_s"], ",.0f"),
                    fmt(ent["req_s_ratio"], ".2f"), fmt(p["mean_ms"], ".3f"), fmt(n["mean_ms"], ".3f"),
                    fmt(p["max_ms"], ".2f"), fmt(n["max_ms"], ".2f"), fmt(p["cpu_us_per_req"], ".2f"),
                    fmt(n["cpu_us_per_req"], ".2f")))
        lines.append("h2load: a second load generator on the same servers; mean and max: h2load's time per request "
                     "(ms; it reports no percentiles); us/rq estimated over the whole h2load run")
    b.h2_summary = h2rows
    stolen = [x for x in list(b.records) + list(b.h2_records) + list(compute or [])
              if (x.get("steal_ms") or 0) >= STEAL_NOTE_MS]
    for x in stolen:
        lines.append("  steal: %d ms of hypervisor steal during %s%s %s %s (%s)" % (
            x["steal_ms"], "h2load " if x.get("tool") == "h2load" else "", x.get("config", "compute"),
            x.get("row", x.get("mode", "")), x.get("server", ""),
            "max %s ms" % fmt(x.get("max_ms"), ".2f") if x.get("tool") == "h2load"
            else "p99 %s ms" % fmt(x.get("p99_ms"), ".3f")))
    lines.append("")
    idle_sum = {}
    for srv in ("parkway", "nginx"):
        rs = [x for x in idle if x["server"] == srv]
        idle_sum[srv] = {"cpu_ms_per_s": med([x["cpu_ms_per_s"] for x in rs]),
                         "bytes_per_conn": med([x["bytes_per_conn"] for x in rs]),
                         "opened": med([x["opened"] for x in rs]),
                         "alive_at_end": med([x.get("alive_at_end") for x in rs]),
                         "foreign_cpus": med([x.get("foreign_cpus") for x in rs]), "runs": len(rs)}
    conns = idle[0]["connections"] if idle else 0
    lines.append("idle, %d keep-alive connections, 2 workers     parkway     nginx   ratio" % conns)
    for key, label, spec in (("cpu_ms_per_s", "server CPU per idle second (ms)", ".4f"),
                             ("bytes_per_conn", "RSS per idle connection (bytes)", ",.0f")):
        p, n = idle_sum["parkway"][key], idle_sum["nginx"][key]
        lines.append("  %-44s %9s %9s %7s" % (label, fmt(p, spec), fmt(n, spec), fmt(ratio(p, n), ".2f")))
    lines.append("")
    comp_sum = {}
    modes = ("alone", "with fib", "with fib on a separate pool")
    for mode in modes:
        rs = [x for x in compute if x["mode"] == mode]
        comp_sum[mode] = {k: med([x.get(k) for x in rs]) for k in
                          ("fib_req_s", "server_cpus_busy", "server_runq_ms_per_s", "send_lag_p99_ms",
                           "sends_over_1ms_late", "waited_for_connection", "scheduled", "unanswered", "lost")}
        # The open-loop client reports null for a statistic whose rank falls
        # on a request never answered: such a run counts as infinite here
        # (the table shows inf, the JSON null), never as a run left out.
        for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "from_send_p99_ms"):
            comp_sum[mode][k] = med([x.get(k) if x.get(k) is not None else float("inf")
                                     for x in rs if x.get("scheduled")])
        comp_sum[mode]["runs"] = len(rs)
    leaf = med([x.get("p50_ms") for x in compute if x["mode"] == "leaf task"])
    comp_sum["leaf_task_ms"] = leaf
    alone, beside = comp_sum["alone"]["p99_ms"], comp_sum["with fib"]["p99_ms"]
    # A completion waits for the task in progress on its worker (one leaf)
    # and, at the next scheduling point, at most one more task of the deque
    # before its continuation's turn (io.md, "Ready continuations").
    # (No bound when the p99 alone is infinite: requests went unanswered.)
    bound = alone + 2 * leaf if alone is not None and leaf is not None and alone != float("inf") else None
    comp_sum["bound_ms"] = bound
    comp_sum["bound_met"] = None if bound is None or beside is None else beside <= bound
    lines.append("compute beside I/O, parkway-httpd 2 workers: /plaintext at a fixed rate (open loop)")
    cols = "  %-36s %8s %8s %9s %9s %9s %9s %9s %9s %10s %8s"
    lines.append(cols % ("", "p50 ms", "p99 ms", "p99.9 ms", "lag99 ms", "sent99 ms", "fib r/s", "srv CPUs",
                         "runq ms/s", "late sends", "no conn"))
    labels = {"alone": "alone", "with fib": "beside /fib/30 on the I/O workers",
              "with fib on a separate pool": "beside /fib/30 on a separate pool"}
    for mode in modes:
        c = comp_sum[mode]
        label = labels[mode]
        lines.append(cols % (
            label, fmt(c["p50_ms"], ".3f"), fmt(c["p99_ms"], ".3f"), fmt(c["p999_ms"], ".3f"),
            fmt(c["send_lag_p99_ms"], ".3f"), fmt(c["from_send_p99_ms"], ".3f"),
            fmt(c["fib_req_s"], ".0f"), fmt(c["server_cpus_busy"], ".2f"), fmt(c["server_runq_ms_per_s"], ".0f"),
            fmt(c["sends_over_1ms_late"], ".0f"),
            fmt(c["waited_for_connection"], ".0f")))
    if compute:
        lines.append("  (%s req/s over 64 connections; latency from each request's scheduled send time; lag99: p99 of "
                 "how late the client's send started; sent99: p99 of the latency counted from the send; late sends: "
                 "sends more than 1 ms behind schedule, no conn: requests that found all 64 connections waiting; both "
                 "medians of per-run counts of %d requests; runq ms/s: time the server's threads were runnable "
                 "but kept off a CPU by the OS, per second, summed over threads)" % (fmt(OPEN_LOOP_RATE, ".0f"),
                                                                 comp_sum["alone"]["scheduled"] or 0))
        lines.append("  bound: p99 beside /fib/30 on the I/O workers <= p99 alone + 2 leaf tasks (serial fib(23), "
                     "p50 %s ms) = %s ms: %s" % (fmt(leaf, ".3f"), fmt(bound, ".3f"),
                                                 {True: "met", False: "NOT met", None: "-"}[comp_sum["bound_met"]]))
    for mode in modes:  # JSON has no infinity: null, with the counts of requests never answered beside it
        for k, v in comp_sum[mode].items():
            if v == float("inf"):
                comp_sum[mode][k] = None
    return rows, idle_sum, comp_sum, "\n".join(lines)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=["bench", "idle-client"], default="bench")
    ap.add_argument("--httpd", default="build/parkway-httpd")
    ap.add_argument("--open-loop-client", default="build/bench/httpd/http_open_loop",
                    help="the open-loop client of the compute section (tests/bench/httpd/http_open_loop.cpp)")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--out", default="build/bench/httpd.json")
    ap.add_argument("--quick", action="store_true", help="one repetition, shorter runs (a smoke run)")
    ap.add_argument("--only", default="load,idle,compute", help="comma list of load, idle, compute")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--duration", type=float, default=None, help="seconds per wrk run (default 3)")
    ap.add_argument("--idle-conns", type=int, default=10000)
    ap.add_argument("--verbose", action="store_true")
    # client roles
    ap.add_argument("--port", type=int)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    if a.role == "idle-client":
        return role_idle_client(a)

    reps = a.reps or (1 if a.quick else 3)
    duration = a.duration or (2.0 if a.quick else 3.0)  # wrk takes whole seconds
    idle_s = 1.5 if a.quick else 3.0
    ol_duration = 2.0 if a.quick else 4.0
    only = set(a.only.split(","))
    for tool in ("wrk", "taskset"):
        if not shutil.which(tool):
            print("run_httpd_bench: %s not found (make deps)" % tool, file=sys.stderr)
            return 1
    if not os.access(a.nginx, os.X_OK):
        print("run_httpd_bench: nginx not found at %s (make deps: nginx-light)" % a.nginx, file=sys.stderr)
        return 1
    if not os.access(a.httpd, os.X_OK):
        print("run_httpd_bench: %s not found (make httpd)" % a.httpd, file=sys.stderr)
        return 1
    if "compute" in only and not os.access(a.open_loop_client, os.X_OK):
        print("run_httpd_bench: open-loop client %s not found (make build/bench/httpd/http_open_loop)"
              % a.open_loop_client,
              file=sys.stderr)
        return 1
    a.open_loop_client = os.path.abspath(a.open_loop_client)
    httpd = os.path.abspath(a.httpd)
    if len(os.sched_getaffinity(0)) < 2:
        print("run_httpd_bench: needs 2 CPUs", file=sys.stderr)
        return 1
    raise_nofile()

    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="httpd-bench-")
    os.chmod(tmp, 0o755)
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    os.chmod(root, 0o755)
    with open(os.path.join(root, "file4k.txt"), "wb") as f:
        f.write((b"parkway-httpd bench 4 KiB static file.\n" * 120)[:4095] + b"\n")
    os.chmod(os.path.join(root, "file4k.txt"), 0o644)

    b = Bench(a, tmp)
    idle, compute = [], []
    cfgs = []
    try:
        if "load" in only:
            for pinned, workers in ((True, 1), (False, 2)):
                cpus = {0} if pinned else None
                servers = []
                try:
                    servers.append(parkway_server(httpd, workers, cpus, tmp, root).start())
                    servers.append(nginx_server(a.nginx, workers, cpus, tmp, root).start())
                    for s in servers:  # same file, same bytes, from both
                        got = http_get(s.port, "/file4k.txt")
                        if not got or got[0] != 200 or len(got[1]) != 4096:
                            raise RuntimeError("%s: GET /file4k.txt gave %r" % (s.name, got and (got[0], len(got[1]))))
                    cfgs.append("pinned" if pinned else "2 workers")
                    print("load, %s: %s" % (cfgs[-1], ", ".join("%s on port %d" % (s.name, s.port) for s in servers)),
                          file=sys.stderr)
                    load_section(b, servers, pinned, reps, duration)
                finally:
                    for s in servers:
                        rc = s.stop()
                        if rc not in (0, None):
                            b.problems.append("%s (%s): exit status %s after SIGTERM" % (s.name, cfgs[-1] if cfgs else "?", rc))
        if "idle" in only:
            print("idle: %d connections" % a.idle_conns, file=sys.stderr)
            idle = idle_section(b, httpd, a.nginx, root, reps, a.idle_conns, idle_s)
        if "compute" in only:
            print("compute beside I/O", file=sys.stderr)
            srv = parkway_server(httpd, 2, None, tmp, root)
            try:
                srv.start()
                compute = compute_section(b, srv, reps, OPEN_LOOP_RATE, ol_duration, 64, 4)
            finally:
                rc = srv.stop()
                if rc not in (0, None):
                    b.problems.append("parkway (compute): exit status %s after SIGTERM" % rc)
            srv = parkway_server(httpd, 2, None, tmp, root, fib_pool=2)
            try:
                srv.start()
                compute += compute_section(b, srv, reps, OPEN_LOOP_RATE, ol_duration, 64, 4,
                                           modes=("with fib on a separate pool",))
            finally:
                rc = srv.stop()
                if rc not in (0, None):
                    b.problems.append("parkway --fib-pool 2 (compute): exit status %s after SIGTERM" % rc)
    except RuntimeError as e:
        b.failures.append(str(e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows, idle_sum, comp_sum, table = summarize(b, idle, compute, cfgs)
    print(table)
    for p in b.problems:
        print("PROBLEM: " + p)
    for f in b.failures:
        print("FAILED: " + f)
    print("total %.0f s" % (time.time() - t_start))
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "nginx": subprocess.run([a.nginx, "-v"], capture_output=True, text=True).stderr.strip(),
        "wrk": (subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines() or [""])[0],
        "reps": reps, "duration_s": duration, "quick": a.quick,
        "load": rows, "idle": {"summary": idle_sum, "runs": idle},
        "h2load": {"summary": getattr(b, "h2_summary", []), "runs": b.h2_records,
                   "skipped": "h2load not found" if b.h2load_missing else None},
        "compute": {"summary": comp_sum, "runs": compute},
        "records": b.records, "problems": b.problems, "failures": b.failures,
        "table": table,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote " + a.out)
    # Report, do not assert: only a benchmark that could not run is an error.
    return 1 if (b.failures and not b.records and not idle and not compute) else 0


if __name__ == "__main__":
    sys.exit(main())
