#!/usr/bin/env python3
"""run_bench.py -- run parkway and its peers in one go, print a ratio table,
write the JSON.

Every measurement is one process running one repetition (see common.hpp);
repetitions of the runtimes are interleaved (rotating order) so that a
noisy neighbour hurts all of them alike, and the table shows medians.

  python3 tests/bench/run_bench.py --bin build/bench --out build/bench/results.json [--quick]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

RUNTIMES = ["parkway", "tbb", "omp"]
QUIET_LIMIT = 0.5  # CPUs of other processes' work tolerated during a timed run
BINARY = {"parkway": "bench_parkway", "tbb": "bench_tbb", "omp": "bench_omp", "futex": "bench_floor"}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ""


def busy_cpu_s():
    """Seconds of CPU the whole machine spent not idle (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    t = os.times()
    return t.children_user + t.children_system


class Bench:
    def __init__(self, bindir, verbose):
        self.bindir = bindir
        self.verbose = verbose
        self.records = []
        self.failures = []

    def exe(self, rt):
        return os.path.join(self.bindir, BINARY[rt])

    def run(self, rt, args, timeout=120):
        cmd = [self.exe(rt)] + [str(a) for a in args]
        t0 = time.time()
        b0, c0 = busy_cpu_s(), children_cpu_s()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.failures.append(" ".join(cmd) + ": timed out")
            print("  TIMEOUT: " + " ".join(cmd), file=sys.stderr)
            return None
        if p.returncode != 0 or not p.stdout.strip():
            msg = " ".join(cmd) + ": exit %d: %s" % (p.returncode, p.stderr.strip()[-300:])
            self.failures.append(msg)
            print("  FAILED: " + msg, file=sys.stderr)
            return None
        rec = json.loads(p.stdout.strip().splitlines()[-1])
        rec["args"] = args
        wall = time.time() - t0
        rec["elapsed_s"] = round(wall, 3)
        # CPUs' worth of other processes' work while this one ran (the
        # machine is shared): machine busy time minus our child's CPU time.
        rec["foreign_cpus"] = round(max(0.0, (busy_cpu_s() - b0) - (children_cpu_s() - c0)) / wall, 2)
        self.records.append(rec)
        if self.verbose:
            print("  " + json.dumps(rec), file=sys.stderr)
        return rec

    def interleaved(self, runtimes, args, reps, label, quiet_retries=0):
        """reps repetitions of each runtime, rotating the order per round.

        quiet_retries: re-run a repetition up to this many times while other
        processes used more than QUIET_LIMIT CPUs during it, and keep the
        least disturbed run (the others stay in the JSON, marked superseded).
        """
        out = {rt: [] for rt in runtimes}
        retried = 0
        for r in range(reps):
            order = runtimes[r % len(runtimes):] + runtimes[:r % len(runtimes)]
            for rt in order:
                tries = []
                for _ in range(1 + quiet_retries):
                    rec = self.run(rt, args)
                    if rec is None or "na" in rec:
                        break
                    tries.append(rec)
                    if rec["foreign_cpus"] <= QUIET_LIMIT:
                        break
                if tries:
                    best = min(tries, key=lambda x: x["foreign_cpus"])
                    for x in tries:
                        if x is not best:
                            x["superseded"] = True
                    retried += len(tries) - 1
                    out[rt].append(best)
        print("  %-28s done (%d reps%s)" % (label, reps, ", %d re-runs on a busy machine" % retried if retried else ""),
              file=sys.stderr)
        return out

    def callgrind_total(self, rt, args):
        """Total instructions (Ir) callgrind counts for one process, all threads."""
        os.makedirs(os.path.join(self.bindir, "callgrind"), exist_ok=True)
        out = os.path.join(self.bindir, "callgrind", "%s-%s.out" % (rt, "-".join(str(a) for a in args)))
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, self.exe(rt)] + [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            self.failures.append(" ".join(cmd) + ": exit %d" % p.returncode)
            return None
        with open(out) as f:
            for line in f:
                m = re.match(r"^(summary|totals):\s+(\d+)", line)
                if m:
                    return int(m.group(2))
        return None


def fib_spawns(n):
    a, b = 0, 0
    for _ in range(2, n + 1):
        a, b = b, a + b + 1
    return b if n >= 2 else 0


def med(recs, key):
    vals = []
    for r in recs:
        v = r
        for k in key.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bench")
    ap.add_argument("--out", default="build/bench/results.json")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, shorter idle/trickle (smoke run)")
    ap.add_argument("--only", default="", help="comma list of sections: fib,callgrind,reduce,uts,idle,trickle,wake")
    ap.add_argument("--workers", type=int, default=2, help="pool size for the parallel runs (default 2)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES), help="subset of parkway,tbb,omp to run")
    ap.add_argument("--quiet-retries", type=int, default=1,
                    help="re-run a fib/reduce/uts repetition up to N times while other processes were busy")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    RUNTIMES[:] = [r for r in a.runtimes.split(",") if r in BINARY and r != "futex"]

    q = a.quick
    W = a.workers
    reps_fast = 2 if q else 5   # fib, reduce, uts
    reps_slow = 1 if q else 3   # idle, trickle, wake (2-3 s each)
    retries = 0 if q else a.quiet_retries
    secs = 1.0 if q else 2.0
    wake_n = 300 if q else 1000
    wake_long_n = 10 if q else 50
    only = set(x for x in a.only.split(",") if x)
    want = lambda s: not only or s in only

    b = Bench(a.bin, a.verbose)
    cond = {
        "date_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus_online": os.cpu_count(),
        "cpu_model": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
        "loadavg_start": sh("cat /proc/loadavg"),
        "compiler": sh("g++ --version | head -1"),
        "tbb": sh("dpkg-query -W -f='${Version}' libtbb-dev"),
        "libgomp": sh("dpkg-query -W -f='${Version}' libgomp1"),
        "valgrind": sh("valgrind --version"),
        "git_commit": sh("git rev-parse --short HEAD"),
        # The binaries are not necessarily rebuilt at HEAD (run_bench.py can
        # be run alone): record the library binary's age and the sources'.
        "lib_built": sh("date -u -r '%s' '+%%Y-%%m-%%d %%H:%%M:%%S'" %
                        os.path.join(os.path.dirname(os.path.abspath(a.bin)), "libparkway.a")),
        "lib_last_commit": sh("git log -1 --format='%h %cd' --date=format:'%H:%M:%S' -- userspace include"),
        "lib_uncommitted_changes": sh("git status --porcelain -- userspace include") != "",
        "workers": W,
        "quick": q,
        "omp_env": {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ},
    }
    print("parkway bench: %s, %s CPUs, load %s%s" % (cond["date_utc"], cond["cpus_online"], cond["loadavg_start"],
                                                     " (quick)" if q else ""), file=sys.stderr)
    S = {}     # summary: metric -> runtime -> median value
    BUSY = {}  # metric -> median foreign CPUs over the runs behind it
    BEST = {}  # metric -> runtime -> fastest repetition (timed metrics)
    t_start = time.time()

    def put(metric, recs, key, scale=1.0, extra=None):
        """S[metric][rt] = median of key over recs[rt] (times scale)."""
        S.setdefault(metric, {})
        allr = []
        for rt, rs in recs.items():
            v = med(rs, key)
            S[metric][rt] = None if v is None else v * scale
            allr += rs
        if extra:
            S[metric].update(extra)
        BUSY[metric] = med(allr, "foreign_cpus")
        if metric.endswith("_ms"):  # interference only adds time: keep the best too (JSON only)
            BEST[metric] = {rt: (min(r[key] for r in rs) * scale if rs else None) for rt, rs in recs.items()}

    if want("fib"):
        f1 = b.interleaved(RUNTIMES, ["fib", 32, 1], reps_fast, "fib(32) 1 worker", retries)
        fW = b.interleaved(RUNTIMES, ["fib", 32, W], reps_fast, "fib(32) %d workers" % W, retries)
        both = sum(f1.values(), []) + sum(fW.values(), [])
        seq = {"seq": med(both, "seq_s") * 1e3} if both else None
        put("fib1_ms", f1, "par_s", 1e3, seq)
        put("fib1_ns_per_spawn", f1, "ns_per_spawn")
        # Median T(1) over the median T(seq) of all fib runs (every binary
        # times the same fib_seq before building its pool): one ~5 ms
        # sequential timing per process is noisier than the parallel one,
        # and a median of per-process ratios would inherit that noise.
        put("fib1_t_over_seq", f1, "t_over_seq")
        put("fib1_t_over_seq_plain", f1, "t_over_seq_plain")
        if both:
            for rt in RUNTIMES:
                if f1[rt]:
                    S["fib1_t_over_seq"][rt] = med(f1[rt], "par_s") / med(both, "seq_s")
                    S["fib1_t_over_seq_plain"][rt] = med(f1[rt], "par_s") / med(both, "seq_plain_s")
        put("fibW_ms", fW, "par_s", 1e3, seq)
        put("fibW_ns_per_spawn", fW, "ns_per_spawn")
        put("fib_speedup", {rt: [dict(x=r1["par_s"] / rW["par_s"], foreign_cpus=max(r1["foreign_cpus"], rW["foreign_cpus"]))
                                 for r1, rW in zip(f1[rt], fW[rt])] for rt in RUNTIMES}, "x")
        if both:
            S["fib_seq_ms"] = {"gcc_O2": med(both, "seq_s") * 1e3, "no_TRE": med(both, "seq_plain_s") * 1e3}

    if want("callgrind") and shutil.which("valgrind"):
        ds = fib_spawns(22) - fib_spawns(18)
        seq22 = b.callgrind_total("futex", ["seqfib", 22])
        seq18 = b.callgrind_total("futex", ["seqfib", 18])
        seq_per = (seq22 - seq18) / ds if seq22 and seq18 else None
        S["instr_per_spawn"] = {"seq": seq_per}
        S["instr_per_spawn_net_of_seq"] = {}
        cg = {"seq_fib22": seq22, "seq_fib18": seq18, "spawn_diff": ds}
        for rt in RUNTIMES:
            i22 = b.callgrind_total(rt, ["fibonce", 22, 1])
            i18 = b.callgrind_total(rt, ["fibonce", 18, 1])
            cg[rt] = {"fib22": i22, "fib18": i18}
            if i22 and i18:
                S["instr_per_spawn"][rt] = (i22 - i18) / ds
                if seq_per is not None:
                    S["instr_per_spawn_net_of_seq"][rt] = (i22 - i18) / ds - seq_per
        # The same for spawns in the UTS tree (up to 8 per TaskGroup, most of
        # them heap-allocated tasks): tree cut to 400 minus 100 root children.
        i400, i100 = b.run("futex", ["utsinfo", 400]), b.run("futex", ["utsinfo", 100])
        if i400 and i100:
            dsu = i400["spawns"] - i100["spawns"]
            cg["uts_spawn_diff"] = dsu
            S["uts_instr_per_spawn"] = {}
            for rt in RUNTIMES:
                u4 = b.callgrind_total(rt, ["utsonce", 400, 1])
                u1 = b.callgrind_total(rt, ["utsonce", 100, 1])
                cg[rt].update(uts400=u4, uts100=u1)
                if u4 and u1:
                    S["uts_instr_per_spawn"][rt] = (u4 - u1) / dsu
        b.records.append(dict(bench="callgrind", **cg))
        print("  %-28s done" % "callgrind fib(22)-fib(18)", file=sys.stderr)

    if want("reduce"):
        red = b.interleaved(RUNTIMES, ["reduce", 1000, 100000, W], reps_fast, "reduce 1e8, %d workers" % W, retries)
        allr = sum(red.values(), [])
        put("reduce_ms", red, "par_s", 1e3, {"seq": med(allr, "seq_s") * 1e3} if allr else None)
        put("reduce_speedup", red, "speedup")

    if want("uts"):
        u1 = b.interleaved(RUNTIMES, ["uts", 1], reps_fast, "uts 1 worker", retries)
        uW = b.interleaved(RUNTIMES, ["uts", W], reps_fast, "uts %d workers" % W, retries)
        allu = sum(u1.values(), []) + sum(uW.values(), [])
        seq = {"seq": med(allu, "seq_s") * 1e3} if allu else None
        put("uts1_ms", u1, "par_s", 1e3, seq)
        put("utsW_ms", uW, "par_s", 1e3, seq)

    ext = [r for r in RUNTIMES if r != "omp"] + ["futex"]
    if want("idle"):
        idle = b.interleaved(RUNTIMES + ["futex"], ["idle", W, secs], reps_slow, "idle %g s" % secs)
        put("idle_cpu_ms_per_s", idle, "cpu_ms_per_idle_s")

    if want("trickle"):
        for work in (0, 50):
            t = b.interleaved(ext, ["trickle", W, secs, work], reps_slow, "trickle 1/ms, %d us work" % work)
            put("trickle%d_us_per_task" % work, t, "cpu_us_per_task_beyond_work")
            put("trickle%d_pool_us_per_task" % work, t, "pool_us_per_task")
            put("trickle%d_submitter_us_per_task" % work, t, "submitter_us_per_task")

    if want("wake"):
        w2 = b.interleaved(ext, ["wake", W, wake_n, 2000], reps_slow, "wake, %d samples, 2 ms gaps" % wake_n)
        put("wake_median_us", w2, "median_us")
        put("wake_p99_us", w2, "p99_us")
        put("wake_post_call_us", w2, "post_call_median_us")
        put("wake_same_cpu_frac", w2, "task_on_poster_cpu_frac")
        S["wake_dropped"] = {rt: sum(r["dropped_not_parked"] for r in w2[rt]) for rt in ext}
        wl = b.interleaved(ext, ["wake", W, wake_long_n, 105000], 1, "wake, %d samples, 105 ms gaps" % wake_long_n)
        put("wake_long_median_us", wl, "median_us")
        put("wake_long_p90_us", wl, "p90_us")

    cond["loadavg_end"] = sh("cat /proc/loadavg")
    cond["duration_s"] = round(time.time() - t_start, 1)
    S["_foreign_cpus"] = BUSY
    S["_best_of_reps"] = BEST
    table, targets = render(S, W)
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"conditions": cond, "summary": S, "targets": targets, "failures": b.failures,
                   "records": b.records}, f, indent=1)
    print("wrote %s (%d records, %.0f s; load %s)" % (a.out, len(b.records), time.time() - t_start,
                                                      cond["loadavg_end"]))
    if b.failures:
        print("%d runs FAILED:\n  %s" % (len(b.failures), "\n  ".join(b.failures)))
        return 1
    return 0


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.*g" % (digits, v)


def render(S, W):
    rows = [  # (metric key, label)
        ("fib1_ms", "fib(32) 1 worker, ms"),
        ("fib1_ns_per_spawn", "  ns per spawn"),
        ("fib1_t_over_seq", "  T(1)/T(seq)"),
        ("fib1_t_over_seq_plain", "  T(1)/T(seq, no TRE)"),
        ("fibW_ms", "fib(32) %d workers, ms" % W),
        ("fibW_ns_per_spawn", "  ns per spawn"),
        ("fib_speedup", "  T(1)/T(%d)" % W),
        ("instr_per_spawn", "instr/spawn (callgrind)"),
        ("instr_per_spawn_net_of_seq", "  minus seq fib's share"),
        ("uts_instr_per_spawn", "instr/spawn, uts (callgrind)"),
        ("reduce_ms", "reduce 1e8, %d workers, ms" % W),
        ("reduce_speedup", "  speedup over seq"),
        ("uts1_ms", "uts 4.5M nodes, 1 worker, ms"),
        ("utsW_ms", "uts 4.5M nodes, %d workers, ms" % W),
        ("idle_cpu_ms_per_s", "idle: CPU ms per idle s"),
        ("trickle0_us_per_task", "trickle tiny: CPU us/task"),
        ("trickle0_pool_us_per_task", "  of which pool threads"),
        ("trickle50_us_per_task", "trickle 50us: CPU us/task"),
        ("trickle50_pool_us_per_task", "  of which pool threads"),
        ("wake_median_us", "wake (2ms gaps) median us"),
        ("wake_p99_us", "  p99 us"),
        ("wake_post_call_us", "  submit call itself, us"),
        ("wake_same_cpu_frac", "  task ran on poster's CPU"),
        ("wake_long_median_us", "wake (105ms gaps) median us"),
        ("wake_long_p90_us", "  p90 us"),
    ]
    busy = S.get("_foreign_cpus", {})
    fmt_row = "%-30s %8s %8s %8s %8s %8s %8s %6s"
    lines = [fmt_row % ("", "parkway", "tbb", "omp", "floor", "tbb/pw", "omp/pw", "busy")]
    lines.append("-" * len(lines[0]))
    for key, label in rows:
        if key not in S:
            continue
        d = S[key]
        floor = d.get("futex", d.get("seq"))
        p = d.get("parkway")
        ratio = lambda o: (o / p) if p and o is not None else None
        lines.append(fmt_row % (label, fmt(p), fmt(d.get("tbb")), fmt(d.get("omp")), fmt(floor),
                                fmt(ratio(d.get("tbb"))), fmt(ratio(d.get("omp"))), fmt(busy.get(key), 2)))
    lines.append("floor: fib/reduce/uts/instr = sequential code (g++ -O2); wake/trickle/idle = one bare thread on a")
    lines.append("  futex word. busy: median CPUs other processes used meanwhile (of %d)." % (os.cpu_count() or 0))
    lines.append("omp trickle/wake: N/A (OpenMP has no submission from a thread outside the team).")

    def g(k, rt="parkway"):
        return S.get(k, {}).get(rt)
    targets = []

    def tgt(name, val, limit, how):
        ok = None if val is None or limit is None else val <= limit
        targets.append({"target": name, "value": val, "limit": limit, "met": ok, "how": how})

    tgt("instructions per spawn <= 150", g("instr_per_spawn"), 150, "callgrind (fib22-fib18)/spawns, 1 worker")
    tgt("T(1)/T(seq) <= 5 on fib(32)", g("fib1_t_over_seq"), 5, "median wall time ratio, g++ -O2 fib as T(seq)")
    tgt("idle CPU <= 1 ms per idle second", g("idle_cpu_ms_per_s"), 1.0, "getrusage over %d-worker idle" % W)
    tgt("trickle (50 us task) <= 30 us CPU/task beyond work", g("trickle50_us_per_task"), 30.0,
        "process CPU - tick loop - task work, per task")
    fl = g("wake_median_us", "futex")
    tgt("wake median <= 1.5 x futex floor", g("wake_median_us"), fl and 1.5 * fl, "2 ms gaps, all workers asleep")
    lines.append("")
    lines.append("targets (issue 2):")
    for t in targets:
        st = "n/a" if t["met"] is None else ("MET" if t["met"] else "NOT MET")
        lines.append("  %-52s %8s  (limit %s)  %s" % (t["target"], fmt(t["value"]), fmt(t["limit"]), st))
    return "\n".join(lines), targets


if __name__ == "__main__":
    sys.exit(main())
