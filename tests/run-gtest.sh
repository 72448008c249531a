#!/usr/bin/env bash
# run-gtest.sh BINARY [ARGS] -- run a GoogleTest binary and end with the
# closing line tests/run-suites.sh adds up: "N passed, N failed, N skipped".
set -u
bin=$1; shift
log=$(mktemp)
"$bin" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
passed=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | sed -E 's/.*\] ([0-9]+) .*/\1/')
failed=$(grep -E '^\[  FAILED  \] [0-9]+ tests?, listed below' "$log" | tail -1 | sed -E 's/.*\] ([0-9]+) .*/\1/')
skipped=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | tail -1 | sed -E 's/.*\] ([0-9]+) .*/\1/')
rm -f "$log"
passed=${passed:-0}; skipped=${skipped:-0}; failed=${failed:-0}
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed, $skipped skipped"
exit "$rc"
