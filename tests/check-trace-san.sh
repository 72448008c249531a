#!/usr/bin/env bash
# check-trace-san.sh PARKWAY TSAN_BIN ASAN_BIN -- the trace recorder under
# the sanitizers: each program traced at the task level (with 64-event
# chunks too, so that chunks are handed over and events dropped), no
# sanitizer report, and a file that `parkway trace report` reads.
set -u
parkway=$1; shift
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for bin in "$@"; do
  san=$(basename "$(dirname "$(dirname "$bin")")")
  for args in "schedule" "fib 18" "runtimes 12"; do
    for chunk in "" 64; do
      what="$san: trace_ground_truth $args${chunk:+, PARKWAY_TRACE_CHUNK=$chunk}"
      env PARKWAY_TRACE=$tmp/t.pwt PARKWAY_TRACE_LEVEL=task ${chunk:+PARKWAY_TRACE_CHUNK=$chunk} \
        TSAN_OPTIONS="halt_on_error=1 exitcode=66" ASAN_OPTIONS="exitcode=66" \
        "$bin" $args >"$tmp/out" 2>"$tmp/err"
      rc=$?
      if [ $rc -ne 0 ] || grep -qE 'ThreadSanitizer|AddressSanitizer|runtime error' "$tmp/err"; then
        echo "FAIL: $what: exit $rc"; sed 's/^/  /' "$tmp/err" | head -40; fail=$((fail + 1)); continue
      fi
      if ! "$parkway" trace report "$tmp/t.pwt" >"$tmp/report" 2>"$tmp/rerr"; then
        echo "FAIL: $what: the report: $(cat "$tmp/rerr")"; fail=$((fail + 1)); continue
      fi
      echo "ok: $what"; pass=$((pass + 1))
    done
  done
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
