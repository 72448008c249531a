#!/usr/bin/env bash
# run-suites.sh MAKE [--lane "ITEM..."]... [--] SUITE...
# Run each suite target, add up its closing "N passed, N failed, N skipped"
# line, print the total the same way. A suite that exits non-zero without
# such a line counts as one failure.
#
# make test runs in two phases (the Makefile's `test` target names them):
#
#  1. Lanes, side by side. Each --lane is a list of make targets run one
#     after another; the lanes run at the same time. A lane holds the
#     suites that measure no time (SPIN models, compile checks, the QEMU
#     guests, which keep virtual time under -icount) and the builds of
#     every other suite (targets that are not suites: their output is
#     shown, their result is not counted; a suite whose build failed
#     fails on its own when it builds again). Each item's output is kept
#     and printed whole when it ends, so the lanes' logs do not interleave.
#  2. The other suites, one after another, alone on the machine: those that
#     check idle CPU, timeouts, latency bounds. Their binaries are built by
#     then; whatever is not (a build that failed in phase 1) is built in
#     the suite's recipe, before its tests, so no test shares the machine
#     with a compiler or another suite.
#
# Within an item, make builds MAKE_JOBS targets at a time (default: one
# per CPU); SPIN checks run SPIN_JOBS at a time (the same default).
# Without --lane every suite runs in phase 2.
set -u
MAKE_CMD=$1; shift
JOBS=${MAKE_JOBS:-$(nproc)}
lanes=()
while [ $# -gt 0 ]; do
  case $1 in
    --lane) lanes+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
suites=("$@")
W=$(mktemp -d "${TMPDIR:-/tmp}/run-suites.XXXXXX")
trap 'rm -rf "$W"' EXIT
T0=$(date +%s)

is_suite() { local s; for s in "${suites[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
in_lane() { local l x; for l in "${lanes[@]}"; do for x in $l; do [ "$x" = "$1" ] && return 0; done; done; return 1; }

# count S OUT RC T0: write suite S's counts "p f k" (from its output OUT and
# exit status RC) to $W/S.counts and print its closing line.
count() {
  local s=$1 out=$2 rc=$3 t0=$4 line p=0 f=0 k=0
  line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$out" | tail -n 1)
  if [ -n "$line" ]; then
    p=$(sed -E 's/.*\b([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    grep -q skipped <<<"$line" && k=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  echo "$p $f $k" >"$W/$s.counts"
  echo "=== suite $s: $p passed, $f failed, $k skipped ($(( $(date +%s) - t0 )) s, $(cpu "$s") s CPU, exit $rc)"
}

# cpu S: the CPU seconds (user + system) S's make and its children used.
TIMEFORMAT='%U %S'
cpu() { awk 'NF == 2 { printf "%.0f", $1 + $2 }' "$W/$1.cpu" 2>/dev/null; }

# Phase 1: each lane in the background. An item's output goes to a file,
# printed whole (under a lock) when the item ends.
if [ ${#lanes[@]} -gt 0 ]; then
  echo "=== phase 1: ${#lanes[@]} lanes side by side:$(printf ' [%s]' "${lanes[@]}")"
  for i in "${!lanes[@]}"; do
    (
      for s in ${lanes[$i]}; do
        is_suite "$s" || [[ $s == test-builds* ]] || continue
        out="$W/$s.log"; t0=$(date +%s)
        { time "$MAKE_CMD" --no-print-directory -j"$JOBS" "$s" >"$out" 2>&1; } 2>"$W/$s.cpu"
        rc=$?
        if is_suite "$s"; then
          count "$s" "$out" "$rc" "$t0" >>"$out"
        else
          echo "=== build $s: exit $rc ($(( $(date +%s) - t0 )) s, $(cpu "$s") s CPU)" >>"$out"
        fi
        { flock 9; echo "=== suite: $s (lane $((i + 1)))"; cat "$out"; } 9>"$W/print.lock"
      done
    ) &
  done
  wait
  echo "=== phase 1 took $(( $(date +%s) - T0 )) s"
fi

# Phase 2: the suites no lane ran, in order, their output as it comes.
T1=$(date +%s)
for s in "${suites[@]}"; do
  in_lane "$s" && continue
  echo "=== suite: $s"
  out="$W/$s.log"; t0=$(date +%s)
  { time { "$MAKE_CMD" --no-print-directory -j"$JOBS" "$s" 2>&1; echo $? >"$W/$s.rc"; } | tee "$out"; } 2>"$W/$s.cpu"
  count "$s" "$out" "$(cat "$W/$s.rc")" "$t0"
done
[ ${#lanes[@]} -gt 0 ] && echo "=== phase 2 took $(( $(date +%s) - T1 )) s"

tp=0; tf=0; ts=0; bad=()
for s in "${suites[@]}"; do
  if [ -f "$W/$s.counts" ]; then read -r p f k <"$W/$s.counts"
  else p=0; f=1; k=0; echo "=== suite $s: no result (its lane ended early)"; fi
  [ "$f" -ne 0 ] && bad+=("$s")
  tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + k))
done
echo "=== all suites took $(( $(date +%s) - T0 )) s"
# What failed, again at the end, where a reader of a long log (or of only
# its last lines) finds it. A sanitizer report: the test that was running,
# the report's headings and the first 8 frames of each of its stacks (the
# top frames are often libstdc++'s or liburing's, the caller further
# down), at most 60 lines a suite. Other failures: each failure line and
# the few after it (an assertion's values), at most 40 lines a suite.
# Where nothing is marked (a crash), the log's last 15 lines.
san_reports() {
  awk '/^\[ RUN      \] / { run = $0 }
       /WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer/ { rep = 1; print "  while " (run == "" ? "no test ran" : run) }
       rep { if ($0 ~ /^ *#[0-9]+ /) { if (++fr <= 8) print } else { fr = 0; if ($0 != "") print } }
       /^SUMMARY: / { rep = 0 }' "$1" | head -n 60
}
for s in "${bad[@]}"; do
  echo "=== what failed in $s:"
  san='WARNING: ThreadSanitizer|ERROR: (Address|Leak)Sanitizer'
  marks='^\[  FAILED  \] [A-Za-z_0-9/]+\.|Failure$|runtime error:|^WATCHDOG|^FAIL\b|^not ok\b|Traceback'
  found=0
  if grep -a -q -E "$san" "$W/$s.log" 2>/dev/null; then san_reports "$W/$s.log"; found=1; fi
  if grep -a -q -E "$marks" "$W/$s.log" 2>/dev/null; then
    grep -a -E -A4 "$marks" "$W/$s.log" | head -n 40; found=1
  fi
  [ $found -eq 0 ] && tail -n 15 "$W/$s.log" 2>/dev/null
done
[ ${#bad[@]} -ne 0 ] && echo "failed suites: ${bad[*]}"
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
