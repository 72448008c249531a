#!/usr/bin/env bash
# check-trace-san.sh READER TSAN_BIN ASAN_BIN -- the trace recorder under
# the sanitizers: each program traced at the task level (with 64-event
# chunks too, so that chunks are handed over and events dropped), no
# sanitizer report, and a file that `parkway trace report` and `export`
# read. READER is `parkway trace` built with ASan + UBSan: it also reads
# 30 damaged copies of one file (cut, bytes changed), each an exit 0 or 1
# with no sanitizer report, and a file of damaged task counts.
set -u
reader=$1; shift
pass=0; fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS="exitcode=66" UBSAN_OPTIONS="halt_on_error=1 exitcode=66"
# The reader on $1: report and export, exit 0 (or 0/1 with $2 = damaged), no sanitizer report.
read_ok() {
  local f=$1 damaged=${2:-}
  for cmd in report export; do
    if [ $cmd = report ]; then
      "$reader" report "$f" >"$tmp/report" 2>"$tmp/rerr"
    else
      "$reader" export --json "$tmp/t.json" --svg "$tmp/t.svg" "$f" >/dev/null 2>"$tmp/rerr"
    fi
    rc=$?
    if grep -qE 'AddressSanitizer|runtime error|LeakSanitizer' "$tmp/rerr" || [ $rc -gt 1 ] ||
       { [ -z "$damaged" ] && [ $rc -ne 0 ]; }; then
      echo "  the reader's $cmd: exit $rc"; sed 's/^/  /' "$tmp/rerr" | head -30
      return 1
    fi
  done
  return 0
}
for bin in "$@"; do
  san=$(basename "$(dirname "$(dirname "$bin")")")
  for args in "schedule" "fib 18" "runtimes 12"; do
    for chunk in "" 64; do
      what="$san: trace_ground_truth $args${chunk:+, PARKWAY_TRACE_CHUNK=$chunk}"
      env PARKWAY_TRACE=$tmp/t.pwt PARKWAY_TRACE_LEVEL=task ${chunk:+PARKWAY_TRACE_CHUNK=$chunk} \
        TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
        "$bin" $args >"$tmp/out" 2>"$tmp/err"
      rc=$?
      if [ $rc -ne 0 ] || grep -qE 'ThreadSanitizer|AddressSanitizer|runtime error' "$tmp/err"; then
        echo "FAIL: $what: exit $rc"; sed 's/^/  /' "$tmp/err" | head -40; fail=$((fail + 1)); continue
      fi
      if ! read_ok "$tmp/t.pwt"; then
        echo "FAIL: $what: the reader (ASan + UBSan)"; fail=$((fail + 1)); continue
      fi
      [ "$args" = "fib 18" ] && [ -n "$chunk" ] && cp "$tmp/t.pwt" "$tmp/base.pwt"
      echo "ok: $what, read and exported"; pass=$((pass + 1))
    done
  done
done
if [ -f "$tmp/base.pwt" ]; then
  bad=0
  for i in $(seq 1 30); do
    python3 - "$tmp/base.pwt" "$tmp/d.pwt" "$i" <<'PY'
import random, sys
d = bytearray(open(sys.argv[1], "rb").read())
rng = random.Random(int(sys.argv[3]))
for _ in range(rng.randrange(1, 5)):
    d[rng.randrange(48, len(d))] = rng.randrange(256)
if rng.random() < 0.4:
    d = d[:rng.randrange(48, len(d))]
open(sys.argv[2], "wb").write(d)
PY
    read_ok "$tmp/d.pwt" damaged || { echo "  (damaged copy $i)"; bad=$((bad + 1)); }
  done
  if [ $bad -eq 0 ]; then
    echo "ok: the reader (ASan + UBSan) on 30 damaged copies: exit 0 or 1, no report"; pass=$((pass + 1))
  else
    echo "FAIL: the reader (ASan + UBSan) on damaged copies: $bad of 30"; fail=$((fail + 1))
  fi
fi
# Damaged counts (a steal or injection take of 2^31 or 2^32 - 1 tasks): no
# overflow in the queue lengths.
python3 - "$tmp/counts.pwt" <<'PY'
import struct, sys
evs = [(0, 2, 0, 1, 0x80000000), (100, 3, 0, 0, 0x80000000), (200, 2, 0, 1, 0xFFFFFFFF), (300, 3, 0, 0, 0xFFFFFFFF),
       (400, 21, 0, 0, 64), (500, 22, 0, 0, 64)]
out = bytearray(b"PWTRACE\0" + struct.pack("<IIIIII", 4, 48, 2, 2, 1, 0) + struct.pack("<QQ", 0, 0))
info = struct.pack("<iIQ16s", 0, 100, 1, b"w0")
out += struct.pack("<IHHII", 0x43525750, 1, 0, len(info), 1) + info
body = struct.pack("<Q", 0) + b"".join(struct.pack("<QBBHI", *e) for e in evs)
out += struct.pack("<IHHII", 0x43525750, 2, 0, len(body), 1) + body
out += struct.pack("<IHHII", 0x43525750, 4, 0, 32, 0) + struct.pack("<QQQQ", len(evs), 0, 500, 500)
open(sys.argv[1], "wb").write(out)
PY
if read_ok "$tmp/counts.pwt"; then
  echo "ok: the reader (ASan + UBSan) on counts of 2^31 and 2^32 - 1 tasks"; pass=$((pass + 1))
else
  echo "FAIL: the reader (ASan + UBSan) on counts of 2^31 and 2^32 - 1 tasks"; fail=$((fail + 1))
fi
# A damaged pid in the header (2^31 - 1), with two runtimes: the export
# numbers a process per runtime from it, without overflow.
python3 - "$tmp/pid.pwt" <<'PY'
import struct, sys
out = bytearray(b"PWTRACE\0" + struct.pack("<IIIIII", 4, 48, 2, 1, 0x7FFFFFFF, 0) + struct.pack("<QQ", 0, 0))
for sid, rt in ((1, 1), (2, 2)):
    info = struct.pack("<iIQ16s", 0, 100 + sid, rt, b"w0")
    out += struct.pack("<IHHII", 0x43525750, 1, 0, len(info), sid) + info
    body = struct.pack("<Q", 0) + struct.pack("<QBBHI", 100 * sid, 4, 0, 0, 0) + struct.pack("<QBBHI", 500, 5, 1, 0, 0)
    out += struct.pack("<IHHII", 0x43525750, 2, 0, len(body), sid) + body
out += struct.pack("<IHHII", 0x43525750, 4, 0, 32, 0) + struct.pack("<QQQQ", 4, 0, 500, 500)
open(sys.argv[1], "wb").write(out)
PY
if read_ok "$tmp/pid.pwt" damaged; then
  echo "ok: the reader (ASan + UBSan) on a header pid of 2^31 - 1 with two runtimes"; pass=$((pass + 1))
else
  echo "FAIL: the reader (ASan + UBSan) on a header pid of 2^31 - 1 with two runtimes"; fail=$((fail + 1))
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
