#!/usr/bin/env bash
# run-suites.sh MAKE SUITE... -- run each suite target, add up its closing
# "N passed, N failed, N skipped" line, print the total the same way.
# A suite that exits non-zero without such a line counts as one failure.
# Suites run one after another; within one, make builds MAKE_JOBS targets
# at a time (default: one per CPU). A suite's tests run in its recipe,
# after its builds, so no test shares the machine with a compiler.
set -u
MAKE_CMD=$1; shift
JOBS=${MAKE_JOBS:-$(nproc)}
tp=0; tf=0; ts=0; bad=()
for s in "$@"; do
  echo "=== suite: $s"
  log=$(mktemp)
  t0=$(date +%s)
  "$MAKE_CMD" --no-print-directory -j"$JOBS" "$s" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -n 1)
  rm -f "$log"
  if [ -n "$line" ]; then
    p=$(sed -E 's/.*\b([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    k=0; grep -q skipped <<<"$line" && k=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
  else
    p=0; f=0; k=0
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  [ "$f" -ne 0 ] && bad+=("$s")
  tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + k))
  echo "=== suite $s: $p passed, $f failed, $k skipped ($(( $(date +%s) - t0 )) s, exit $rc)"
done
[ ${#bad[@]} -ne 0 ] && echo "failed suites: ${bad[*]}"
echo "$tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
