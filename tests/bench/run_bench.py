#!/usr/bin/env python3
"""run_bench.py -- run parkway and its peers in one go, print a ratio table,
write the JSON.

Every measurement is one process running one repetition (see common.hpp);
repetitions of the runtimes are interleaved (rotating order) so that a
noisy neighbour hurts all of them alike, and the table shows medians.

  python3 tests/bench/run_bench.py --bin build/bench --out build/bench/results.json [--quick]

Rules for a shared machine and for checks that could not be made:

- busy ("foreign_cpus" in each record): CPUs' worth of other processes' work
  while a run executed = machine busy time from /proc/stat minus the child's
  own CPU time, per wall second. /proc/stat counts in 10 ms ticks, so over a
  50 ms run that difference swings by +-0.2 CPUs or more (a 5 ms process read
  0.0 to 3.8 on 2 CPUs). So the busy window of every run is padded to at
  least MIN_BUSY_WINDOW_S (0.5 s): after a shorter run we sleep until 0.5 s
  after its start and read /proc/stat then (records: "busy_window_s"). The
  value then says how busy the machine was around the run, not only during
  it, with about +-0.05 CPUs of tick noise. Only the busy estimate uses the
  padded window; "elapsed_s" and every reported time are the run's own, and
  the tables still show medians.
- re-run rule: a repetition of fib, reduce, uts, idle, trickle or wake run
  while busy > QUIET_LIMIT is re-run up to --quiet-retries times (not with
  --quick) and the quietest run is kept (the others stay in the JSON, marked
  superseded).
- fib at one worker is pinned: each such process runs on one CPU (the
  repetitions rotate over the CPUs we may use, record "cpu"), and times
  the sequential fib (the median of 5 runs, common.hpp run_fib) and then
  the pool's fib there; a pinned run's busy value counts other work on its
  CPU only.
  The CPUs of this VM are not equally fast at any one moment (one measured
  7.4 ms for fib_seq(32) while the other took 5.6, for minutes), and an
  unpinned process can time T(seq) on its main thread on one CPU and T(1)
  on its worker on the other. T(1)/T(seq) is the median of the per-process
  ratios; the median-over-median of all processes is kept as "unpaired".
- slow-CPU rule (the pinned one-worker fib runs): the host can slow this
  VM's vCPU without any process here being busy (a neighbour on the same
  physical core; /proc/stat shows nothing). Each such process times fixed
  sequential work around its pool run: fib_seq (T(seq), the median of 5)
  and fib_seq_plain before it, fib_seq again after it (median of 3,
  "seq_after_s"). Those are the sensors. A run's "slowdown" is the largest
  of its three times over the fastest of the same sensor among that
  runtime's runs (per runtime: each binary's sequential fib has its own
  code layout, OpenMP's runs ~3% slower). A run with a slowdown above
  SLOW_LIMIT (1.10), or busy, is re-run on its CPU up to --quiet-retries
  times (default 1; none with --quick), and the least disturbed try is
  kept (the others stay in the JSON, marked superseded); this repeats
  while a re-run lowers a floor. The choice looks only at the sensors and
  busy, never at the pool's time. Why: such a neighbour slows the spawning
  fib more than the sequential one (measured: docs/benchmarks.md), and a
  slowdown of T(seq) alone flatters the ratio, so a ratio taken on a
  slowed CPU is not the runtime's. A section slowed evenly from start to
  end is not detected (the floors are relative).
- every target except the instruction count (callgrind counts instructions,
  unaffected by load) is judged on medians of runs; when a median busy of
  the runs behind it (each runtime it compares, e.g. parkway's wake runs and
  the floor's) is still above QUIET_LIMIT after the re-runs, its verdict is
  "inconclusive (busy)" instead of MET / NOT MET (JSON: "verdict", "busy",
  "met" null and "met_ignoring_busy"). That alone does not fail the run.
  Likewise T(1)/T(seq) is "inconclusive (slow CPU)" when the median
  slowdown of parkway's kept runs is still above SLOW_LIMIT (JSON:
  "met_ignoring_slow").
- failed runs: a non-zero exit, a timeout, missing callgrind totals, or a
  wake run that kept fewer than WAKE_MIN_KEPT (90%) of the requested
  samples or reports a median of 0/null is a failure (listed in "failures",
  the record marked "failed"). A target whose runs failed, or that could not
  be measured at all (e.g. valgrind missing), is "not measured", and any
  failure or required target not measured makes the exit status 1, with a
  line naming it and why. Targets of sections left out with --only, or with
  parkway left out of --runtimes, are "not run" and not required.
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
SLOW_LIMIT = 1.10  # a pinned fib run's slowdown tolerated: its sensors over its runtime's fastest (see above)
MIN_BUSY_WINDOW_S = 0.5  # busy is measured over at least this much wall time (see above)
WAKE_MIN_KEPT = 0.9  # a wake run must keep this share of the requested samples
BINARY = {"parkway": "bench_parkway", "tbb": "bench_tbb", "omp": "bench_omp", "futex": "bench_floor"}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return ""


def busy_cpu_s(cpu=None):
    """Seconds of CPU the whole machine (or CPU number `cpu`) spent not
    idle (from /proc/stat)."""
    with open("/proc/stat") as f:
        line = f.readline()
        if cpu is not None:
            want = "cpu%d" % cpu
            for line in f:
                if line.split()[0] == want:
                    break
            else:
                raise RuntimeError("/proc/stat has no line for " + want)
        v = [int(x) for x in line.split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    t = os.times()
    return t.children_user + t.children_system


class Runs(dict):
    """runtime -> kept records of one interleaved set; .failed lists the
    (runtime, message) of the runs in it that failed."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.failed = []


class Bench:
    def __init__(self, bindir, verbose):
        self.bindir = bindir
        self.verbose = verbose
        self.records = []
        self.failures = []

    def exe(self, rt):
        return os.path.join(self.bindir, BINARY[rt])

    def fail(self, msg):
        self.failures.append(msg)
        print("  FAILED: " + msg, file=sys.stderr)

    def run(self, rt, args, timeout=120, check=None, cpu=None):
        """One process, one record; None if it failed. check(rec) returns
        why a record that parsed is still not a valid run, or None. cpu:
        run the process on that CPU only."""
        cmd = [self.exe(rt)] + [str(a) for a in args]
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        t0 = time.time()
        b0, c0 = busy_cpu_s(cpu), children_cpu_s()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=pin)
        except subprocess.TimeoutExpired:
            self.fail(" ".join(cmd) + ": timed out after %d s" % timeout)
            return None
        except OSError as e:
            self.fail(" ".join(cmd) + ": " + str(e))
            return None
        wall = time.time() - t0
        if p.returncode != 0 or not p.stdout.strip():
            self.fail(" ".join(cmd) + ": exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
            return None
        try:
            rec = json.loads(p.stdout.strip().splitlines()[-1])
        except ValueError as e:
            self.fail(" ".join(cmd) + ": output is not JSON (%s): %s" % (e, p.stdout.strip()[-200:]))
            return None
        rec["args"] = args
        if cpu is not None:
            rec["cpu"] = cpu
        rec["elapsed_s"] = round(wall, 3)
        # CPUs' worth of other processes' work while this one ran (the
        # machine is shared): machine busy time minus our child's CPU time,
        # over a window padded to MIN_BUSY_WINDOW_S (tick noise: see top).
        c1 = children_cpu_s()
        pad = t0 + MIN_BUSY_WINDOW_S - time.time()
        if pad > 0:
            time.sleep(pad)
        window = time.time() - t0
        rec["busy_window_s"] = round(window, 3)
        # Pinned (cpu given): other work on that CPU only, the only work
        # that can take time from the run; the child ran nowhere else.
        rec["foreign_cpus"] = round(max(0.0, (busy_cpu_s(cpu) - b0) - (c1 - c0)) / window, 2)
        self.records.append(rec)
        if self.verbose:
            print("  " + json.dumps(rec), file=sys.stderr)
        why = check(rec) if check else None
        if why:
            rec["failed"] = why
            self.fail(" ".join(cmd) + ": " + why)
            return None
        return rec

    def interleaved(self, runtimes, args, reps, label, quiet_retries=0, check=None, pin=False, slow_keys=()):
        """reps repetitions of each runtime, rotating the order per round.

        pin: round r runs every process on CPU number r (mod the CPUs we may
        use): every runtime gets the same CPUs in the same rounds (with 5
        rounds on 2 CPUs, 3 on the first and 2 on the second). A pinned
        run's busy value counts other work on its CPU only.

        quiet_retries: re-run a repetition up to this many times while other
        processes used more than QUIET_LIMIT CPUs during it, and keep the
        least disturbed run (the others stay in the JSON, marked superseded).
        check: see run(); a run it rejects is a failure, not re-run.
        slow_keys: the slow-CPU rule (module docstring) on these record keys
        (times of fixed sequential work the run measures around its own):
        after all rounds, a run whose slowdown (the largest of its values
        over that runtime's lowest, per key) exceeds SLOW_LIMIT, or that
        ran busy, is re-run on its CPU (up to quiet_retries times) and the
        least disturbed try kept; repeated while a re-run lowers a floor.
        Every try gets "slowdown".
        """
        out = Runs((rt, []) for rt in runtimes)
        retried = 0
        cpus = sorted(os.sched_getaffinity(0))
        for r in range(reps):
            order = runtimes[r % len(runtimes):] + runtimes[:r % len(runtimes)]
            cpu = cpus[r % len(cpus)] if pin else None
            for rt in order:
                tries = []
                for _ in range(1 + quiet_retries):
                    nfail = len(self.failures)
                    rec = self.run(rt, args, check=check, cpu=cpu)
                    out.failed += [(rt, m) for m in self.failures[nfail:]]
                    if rec is None or "na" in rec:
                        break
                    tries.append(rec)
                    if rec["foreign_cpus"] <= QUIET_LIMIT:
                        break
                if tries:
                    retried += len(tries) - 1
                    out[rt].append(keep_least(tries, lambda x: x["foreign_cpus"]))
        slow_retried = 0
        if slow_keys:
            def floors(rt):
                # per runtime (each binary's sequential fib has its own code
                # layout) and per sensor; superseded tries count too
                recs = tried[rt]
                return {k: min((x[k] for x in recs if x.get(k)), default=None) for k in slow_keys}

            def slowdown(x, fl):
                v = [x[k] / fl[k] for k in slow_keys if x.get(k) and fl.get(k)]
                return max(v) if v else None

            def disturbed(x, fl):
                sd = slowdown(x, fl)
                return (x["foreign_cpus"] > QUIET_LIMIT) or (sd is not None and sd > SLOW_LIMIT)

            tried = {rt: list(rs) for rt, rs in out.items()}
            done = set()  # (rt, index) already re-run for the rule
            changed = True
            while changed:  # a re-run can lower a floor and make other runs slow
                changed = False
                for rt in runtimes:
                    for i, rec in enumerate(out[rt]):
                        fl = floors(rt)
                        if (rt, i) in done or not disturbed(rec, fl):
                            continue
                        done.add((rt, i))
                        changed = True
                        tries = [rec]
                        for _ in range(quiet_retries):
                            nfail = len(self.failures)
                            again = self.run(rt, args, check=check, cpu=rec.get("cpu"))
                            out.failed += [(rt, m) for m in self.failures[nfail:]]
                            if again is None or "na" in again:
                                break
                            tries.append(again)
                            tried[rt].append(again)
                            if not disturbed(again, floors(rt)):
                                break
                        fl = floors(rt)
                        # undisturbed first, then the least slowed: judged on the
                        # fixed sequential work only, never on the run's own time
                        slow_retried += len(tries) - 1
                        out[rt][i] = keep_least(tries, lambda x: (disturbed(x, fl), slowdown(x, fl) or 0.0))
            for rt in runtimes:
                fl = floors(rt)
                for x in tried[rt]:
                    sd = slowdown(x, fl)
                    if sd is not None:
                        x["slowdown"] = round(sd, 3)
        print("  %-28s done (%d reps%s%s)" % (label, reps, ", %d re-runs on a busy machine" % retried if retried else "",
                                            ", %d re-runs on a slowed CPU" % slow_retried if slow_retried else ""),
              file=sys.stderr)
        return out

    def callgrind_total(self, rt, args):
        """Total instructions (Ir) callgrind counts for one process, all
        threads; None (and a failure recorded) if there is no total."""
        os.makedirs(os.path.join(self.bindir, "callgrind"), exist_ok=True)
        out = os.path.join(self.bindir, "callgrind", "%s-%s.out" % (rt, "-".join(str(a) for a in args)))
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, self.exe(rt)] + [str(a) for a in args]
        try:
            if os.path.exists(out):
                os.remove(out)  # a stale file must not stand in for this run
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            self.fail(" ".join(cmd) + ": timed out after 300 s")
            return None
        except OSError as e:
            self.fail(" ".join(cmd) + ": " + str(e))
            return None
        if p.returncode != 0:
            self.fail(" ".join(cmd) + ": exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
            return None
        try:
            with open(out) as f:
                for line in f:
                    m = re.match(r"^(summary|totals):\s+(\d+)", line)
                    if m:
                        return int(m.group(2))
        except OSError as e:
            self.fail(" ".join(cmd) + ": no callgrind output: " + str(e))
            return None
        self.fail(" ".join(cmd) + ": no 'summary:' or 'totals:' line in " + out)
        return None


def keep_least(tries, key):
    """The try with the least key; the others are marked superseded (they
    stay in the JSON)."""
    best = min(tries, key=key)
    for x in tries:
        if x is not best:
            x["superseded"] = True
    return best


def wake_check(requested):
    """check() for wake runs: enough samples kept, and a real median."""
    def check(rec):
        if "na" in rec:
            return None
        kept = rec.get("samples") or 0
        if kept < WAKE_MIN_KEPT * requested:
            return "kept %d of %d wake samples (< %d%%; %s dropped: pool threads not all asleep)" % (
                kept, requested, round(WAKE_MIN_KEPT * 100), rec.get("dropped_not_parked"))
        m = rec.get("median_us")
        if m is None or m <= 0:
            return "wake median_us is %s" % m
        return None
    return check


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
                    help="re-run a timed repetition (fib, reduce, uts, idle, trickle, wake) up to N times "
                         "while other processes were busy (not with --quick)")
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
        # bench_parkway reads it (Options::search_rounds); recorded when set.
        "parkway_env": {k: os.environ[k] for k in ("PARKWAY_BENCH_SEARCH_ROUNDS",) if k in os.environ},
        "quiet_limit_cpus": QUIET_LIMIT,
        "slow_limit": SLOW_LIMIT,
        "quiet_retries": retries,
        "min_busy_window_s": MIN_BUSY_WINDOW_S,
    }
    print("parkway bench: %s, %s CPUs, load %s%s%s" % (
        cond["date_utc"], cond["cpus_online"], cond["loadavg_start"], " (quick)" if q else "",
        "".join(", %s=%s" % kv for kv in cond["parkway_env"].items())), file=sys.stderr)
    S = {}     # summary: metric -> runtime -> median value
    BUSY = {}  # metric -> median foreign CPUs over the runs behind it
    BUSY_RT = {}  # metric -> runtime -> median foreign CPUs over that runtime's runs
    BEST = {}  # metric -> runtime -> fastest repetition (timed metrics)
    SLOW = {}  # metric -> runtime -> median slowdown of the runs behind it (slow-CPU rule)
    NOTES = {}  # metric -> [(runtime, why)]: runs behind it that failed, or why it was not measured
    t_start = time.time()

    def put(metric, recs, key, scale=1.0, extra=None):
        """S[metric][rt] = median of key over recs[rt] (times scale)."""
        S.setdefault(metric, {})
        BUSY_RT.setdefault(metric, {})
        allr = []
        for rt, rs in recs.items():
            v = med(rs, key)
            S[metric][rt] = None if v is None else v * scale
            BUSY_RT[metric][rt] = med(rs, "foreign_cpus")
            allr += rs
        if extra:
            S[metric].update(extra)
        BUSY[metric] = med(allr, "foreign_cpus")
        if getattr(recs, "failed", None):
            NOTES.setdefault(metric, []).extend(recs.failed)
        if metric.endswith("_ms"):  # interference only adds time: keep the best too (JSON only)
            BEST[metric] = {}
            for rt, rs in recs.items():
                vals = [r[key] for r in rs if r.get(key) is not None]
                BEST[metric][rt] = min(vals) * scale if vals else None

    if want("fib"):
        f1 = b.interleaved(RUNTIMES, ["fib", 32, 1], reps_fast, "fib(32) 1 worker", retries, pin=True, slow_keys=("seq_s", "seq_plain_s", "seq_after_s"))
        fW = b.interleaved(RUNTIMES, ["fib", 32, W], reps_fast, "fib(32) %d workers" % W, retries)
        both = sum(f1.values(), []) + sum(fW.values(), [])
        seq = {"seq": med(both, "seq_s") * 1e3} if both else None
        put("fib1_ms", f1, "par_s", 1e3, seq)
        put("fib1_ns_per_spawn", f1, "ns_per_spawn")
        # T(1)/T(seq): the median of the per-process ratios of the pinned
        # 1-worker runs (both times on one CPU; T(seq) the median of
        # SEQ_RUNS). "unpaired": median T(1) over the median T(seq) of all
        # fib processes, as reported before the runs were pinned.
        put("fib1_t_over_seq", f1, "t_over_seq")
        SLOW["fib1_t_over_seq"] = {rt: med(f1[rt], "slowdown") for rt in RUNTIMES}
        put("fib1_t_over_seq_plain", f1, "t_over_seq_plain")
        S["fib1_t_over_seq_unpaired"] = {}
        BUSY_RT["fib1_t_over_seq_unpaired"] = dict(BUSY_RT["fib1_t_over_seq"])
        BUSY["fib1_t_over_seq_unpaired"] = med(both, "foreign_cpus") if both else None
        if both:
            for rt in RUNTIMES:
                if f1[rt]:
                    S["fib1_t_over_seq_unpaired"][rt] = med(f1[rt], "par_s") / med(both, "seq_s")
        put("fibW_ms", fW, "par_s", 1e3, seq)
        put("fibW_ns_per_spawn", fW, "ns_per_spawn")
        put("fib_speedup", {rt: [dict(x=r1["par_s"] / rW["par_s"], foreign_cpus=max(r1["foreign_cpus"], rW["foreign_cpus"]))
                                 for r1, rW in zip(f1[rt], fW[rt])] for rt in RUNTIMES}, "x")
        if both:
            S["fib_seq_ms"] = {"gcc_O2": med(both, "seq_s") * 1e3, "no_TRE": med(both, "seq_plain_s") * 1e3}
            b_seq = med(both, "foreign_cpus")
            BUSY_RT["fib_seq_ms"] = {"gcc_O2": b_seq, "no_TRE": b_seq}

    if want("callgrind") and not shutil.which("valgrind"):
        why = "valgrind not found on PATH (install valgrind): callgrind section skipped"
        b.fail("callgrind: " + why)
        for m in ("instr_per_spawn", "instr_per_spawn_net_of_seq", "uts_instr_per_spawn"):
            NOTES.setdefault(m, []).append(("all", why))
    elif want("callgrind"):
        nfail = len(b.failures)
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
        for m in b.failures[nfail:]:
            NOTES.setdefault("instr_per_spawn", []).append(("callgrind", m))
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
        idle = b.interleaved(RUNTIMES + ["futex"], ["idle", W, secs], reps_slow, "idle %g s" % secs, retries)
        put("idle_cpu_ms_per_s", idle, "cpu_ms_per_idle_s")

    if want("trickle"):
        for work in (0, 50):
            t = b.interleaved(ext, ["trickle", W, secs, work], reps_slow, "trickle 1/ms, %d us work" % work, retries)
            put("trickle%d_us_per_task" % work, t, "cpu_us_per_task_beyond_work")
            put("trickle%d_pool_us_per_task" % work, t, "pool_us_per_task")
            put("trickle%d_submitter_us_per_task" % work, t, "submitter_us_per_task")

    if want("wake"):
        w2 = b.interleaved(ext, ["wake", W, wake_n, 2000], reps_slow, "wake, %d samples, 2 ms gaps" % wake_n,
                           retries, check=wake_check(wake_n))
        put("wake_median_us", w2, "median_us")
        put("wake_p99_us", w2, "p99_us")
        put("wake_post_call_us", w2, "post_call_median_us")
        put("wake_same_cpu_frac", w2, "task_on_poster_cpu_frac")
        S["wake_dropped"] = {rt: sum(r["dropped_not_parked"] for r in w2[rt]) for rt in ext}
        wl = b.interleaved(ext, ["wake", W, wake_long_n, 105000], 1, "wake, %d samples, 105 ms gaps" % wake_long_n,
                           retries, check=wake_check(wake_long_n))
        put("wake_long_median_us", wl, "median_us")
        put("wake_long_p90_us", wl, "p90_us")

    cond["loadavg_end"] = sh("cat /proc/loadavg")
    cond["duration_s"] = round(time.time() - t_start, 1)
    S["_foreign_cpus"] = BUSY
    S["_foreign_cpus_by_runtime"] = BUSY_RT
    S["_best_of_reps"] = BEST
    S["_slowdown_by_runtime"] = SLOW
    sections = [x for x in ("fib", "callgrind", "reduce", "uts", "idle", "trickle", "wake") if want(x)]
    table, targets = render(S, W, dict(notes=NOTES, busy_rt=BUSY_RT, slow_rt=SLOW, sections=sections,
                                       parkway="parkway" in RUNTIMES))
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"conditions": cond, "summary": S, "targets": targets, "failures": b.failures,
                   "records": b.records}, f, indent=1)
    print("wrote %s (%d records, %.0f s; load %s)" % (a.out, len(b.records), time.time() - t_start,
                                                      cond["loadavg_end"]))
    rc = 0
    if b.failures:
        print("%d runs FAILED:\n  %s" % (len(b.failures), "\n  ".join(b.failures)))
        rc = 1
    for t in targets:
        if t["verdict"] == "not measured":
            print("required target NOT MEASURED: %s: %s" % (t["target"], t["why"]))
            rc = 1
    return rc


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.*g" % (digits, v)


def render(S, W, ctx=None):
    """The table and the targets. ctx (from main): notes (metric -> failed
    runs), busy_rt (metric -> runtime -> median busy), sections run, and
    whether parkway ran; without it every target counts as required."""
    rows = [  # (metric key, label)
        ("fib1_ms", "fib(32) 1 worker, ms"),
        ("fib1_ns_per_spawn", "  ns per spawn"),
        ("fib1_t_over_seq", "  T(1)/T(seq)"),
        ("fib1_t_over_seq_plain", "  T(1)/T(seq, no TRE)"),
        ("fib1_t_over_seq_unpaired", "  T(1)/T(seq), unpaired"),
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
    ctx = ctx or {}
    notes = ctx.get("notes", {})
    busy_rt = ctx.get("busy_rt", {})
    slow_rt = ctx.get("slow_rt", {})
    targets = []

    def tgt(name, val, limit, how, section, inputs, busy_rule=True):
        """inputs: (metric, runtime) pairs the value comes from; their
        failed runs make it not measured, their busy medians inconclusive."""
        ok = None if val is None or limit is None else val <= limit
        required = section in ctx.get("sections", [section]) and ctx.get("parkway", True)
        why = []
        for m, rt in inputs:
            why += ["%s: %s" % (r, w) for r, w in notes.get(m, []) if r in (rt, "all", "callgrind")]
        busy = None
        if busy_rule:
            bs = [busy_rt.get(m, {}).get(rt) for m, rt in inputs]
            busy = max((x for x in bs if x is not None), default=None)
        sl = [slow_rt.get(m, {}).get(rt) for m, rt in inputs]
        slow = max((x for x in sl if x is not None), default=None)
        if not required and ok is None:
            verdict = "not run"
        elif why or ok is None:
            verdict = "not measured"
            if not why:
                why = ["no value for %s (see the failures above)" % ", ".join("%s/%s" % i for i in inputs)]
            elif len(why) > 2:
                why = why[:2] + ["and %d more failed runs" % (len(why) - 2)]
        elif busy is not None and busy > QUIET_LIMIT:
            verdict = "inconclusive (busy)"
        elif slow is not None and slow > SLOW_LIMIT:
            verdict = "inconclusive (slow CPU)"
        else:
            verdict = "MET" if ok else "NOT MET"
        t = {"target": name, "value": val, "limit": limit, "met": ok if verdict in ("MET", "NOT MET") else None,
             "how": how, "verdict": verdict, "busy": busy, "required": required}
        if slow is not None:
            t["slowdown"] = slow
        if verdict == "inconclusive (busy)":
            t["met_ignoring_busy"] = ok
        if verdict == "inconclusive (slow CPU)":
            t["met_ignoring_slow"] = ok
        if verdict == "not measured":
            t["why"] = "; ".join(why)
        targets.append(t)

    tgt("instructions per spawn <= 150", g("instr_per_spawn"), 150, "callgrind (fib22-fib18)/spawns, 1 worker",
        "callgrind", [("instr_per_spawn", "parkway")], busy_rule=False)
    tgt("T(1)/T(seq) <= 5 on fib(32)", g("fib1_t_over_seq"), 5,
        "median of per-process wall time ratios, each process pinned to one CPU, g++ -O2 fib as T(seq)",
        "fib", [("fib1_t_over_seq", "parkway")])
    tgt("idle CPU <= 1 ms per idle second", g("idle_cpu_ms_per_s"), 1.0, "getrusage over %d-worker idle" % W,
        "idle", [("idle_cpu_ms_per_s", "parkway")])
    tgt("trickle (50 us task) <= 30 us CPU/task beyond work", g("trickle50_us_per_task"), 30.0,
        "pool CPU (process - poster thread - task work) + poster's CPU inside the post call, per task",
        "trickle", [("trickle50_us_per_task", "parkway")])
    fl = g("wake_median_us", "futex")
    tgt("wake median <= 1.5 x futex floor", g("wake_median_us"), 1.5 * fl if fl else None,
        "2 ms gaps, all workers asleep", "wake", [("wake_median_us", "parkway"), ("wake_median_us", "futex")])
    lines.append("")
    lines.append("targets (issue 2):")
    for t in targets:
        st = t["verdict"]
        if st == "inconclusive (busy)":
            st += " [busy %.2f CPUs > %g; ignoring that: %s]" % (t["busy"], QUIET_LIMIT,
                                                                 "MET" if t["met_ignoring_busy"] else "NOT MET")
        elif st == "inconclusive (slow CPU)":
            st += " [sequential fib %.2f x its fastest > %g; ignoring that: %s]" % (
                t["slowdown"], SLOW_LIMIT, "MET" if t["met_ignoring_slow"] else "NOT MET")
        elif st == "not measured":
            st += ": " + t["why"]
        lines.append("  %-52s %8s  (limit %s)  %s" % (t["target"], fmt(t["value"]), fmt(t["limit"]), st))
    return "\n".join(lines), targets


if __name__ == "__main__":
    sys.exit(main())
