#!/usr/bin/env bash
# check-usdt.sh LIB DEMO [PROG...] -- the USDT probes are in the library,
# and fire.
#  1. readelf: every probe of userspace/probes.hpp is in LIB's stapsdt notes.
#  2. bpftrace (root, tracefs): attach to spawn/steal/park/unpark/wake/run/
#     notify while each PROG and then DEMO run (each must exit 0), and see
#     each fire at least once, and park with worker -1 (the demo's main
#     thread sleeping in Runtime::run). usdt_steal (a PROG) makes a steal
#     certain; the demo alone does not on a loaded machine.
#     Skipped, with the reason, where bpftrace cannot attach.
set -u
lib=$1; demo=$2; shift 2; progs=("$@")
pass=0; fail=0; skip=0
want="spawn inject run steal inject_take search_begin search_end park unpark withdrawn wake notify steal_fence park_fence slice_yield"
notes=$(readelf -n "$lib" 2>/dev/null | awk '/Provider: parkway/{getline; print $2}' | sort -u)
for p in $want; do
  if grep -qx "$p" <<<"$notes"; then pass=$((pass+1)); else echo "FAIL: probe parkway:$p missing from $lib"; fail=$((fail+1)); fi
done
echo "readelf: $(wc -w <<<"$notes") probe names in $lib"

# perf takes a probe only if every site of it passes its arguments with
# the same sizes and none as an immediate (which perf drops): `perf probe
# sdt_parkway:steal` failed with "File exists" when one site passed a
# constant (PW_PROBE_CONST, userspace/probes.hpp).
shapes=$(readelf -n "$lib" 2>/dev/null | awk '
  /Provider: parkway/ { getline; name = $2; getline; getline
    sub(/^ *Arguments: */, ""); sizes = ""; imm = 0
    for (i = 1; i <= NF; i++) { split($i, a, "@"); sizes = sizes " " a[1]; if (a[2] ~ /^\$/) imm = 1 }
    print name, imm, sizes }')
bad_imm=$(awk '$2 == 1 { print $1 }' <<<"$shapes" | sort -u | tr '\n' ' ')
bad_mixed=$(awk '{ $2 = ""; print }' <<<"$shapes" | sort -u | awk '{ print $1 }' | uniq -d | tr '\n' ' ')
if [ -z "$bad_imm" ]; then pass=$((pass+1)); echo "ok: no probe argument is an immediate (perf drops those)"
else fail=$((fail+1)); echo "FAIL: probes with an immediate argument, which perf drops: $bad_imm"; fi
if [ -z "$bad_mixed" ]; then pass=$((pass+1)); echo "ok: every site of a probe passes arguments of the same sizes"
else fail=$((fail+1)); echo "FAIL: probes whose sites differ in argument sizes (perf refuses them): $bad_mixed"; fi

reason=""
command -v bpftrace >/dev/null || reason="bpftrace is not installed"
[ -z "$reason" ] && [ "$(id -u)" -ne 0 ] && reason="not root"
if [ -z "$reason" ] && [ ! -e /sys/kernel/tracing/uprobe_events ]; then
  mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
  [ -e /sys/kernel/tracing/uprobe_events ] || reason="tracefs is not available"
fi
fired=(spawn steal park unpark wake run notify park_outside)
if [ -n "$reason" ]; then
  echo "SKIP: live probe check: $reason"
  skip=$((skip + ${#fired[@]}))
else
  out=$(mktemp)
  prog=""
  for p in "${fired[@]}"; do
    case $p in
      park_outside) prog="$prog usdt:$lib:parkway:park /arg0 == -1/ { @[\"$p\"] = count(); }" ;;
      *) prog="$prog usdt:$lib:parkway:$p { @[\"$p\"] = count(); }" ;;
    esac
  done
  ulimit -l unlimited 2>/dev/null || true
  # Attach by library path (system-wide), run the demo, then stop bpftrace
  # (-c cannot resolve probes in a library the child has not loaded yet).
  timeout 90 bpftrace -e "$prog" >"$out" 2>&1 &
  bt=$!
  for _ in $(seq 1 100); do grep -q 'Attaching' "$out" && break; sleep 0.1; done
  sleep 1
  # The PROGs first: a process started after the demo was not traced in
  # our runs (its probes did not count; the reason is not known), while
  # the demo after them is.
  for p in "${progs[@]}" "$demo"; do
    "$p" >/dev/null
    rc=$?
    if [ "$rc" -ne 0 ]; then echo "FAIL: $p exited $rc"; fail=$((fail+1)); fi
  done
  kill -INT "$bt" 2>/dev/null
  wait "$bt" 2>/dev/null
  for p in "${fired[@]}"; do
    n=$(grep -E "^@\[$p\]: [0-9]+" "$out" | sed -E 's/.*: //')
    if [ -n "$n" ] && [ "$n" -gt 0 ]; then
      echo "ok: parkway:$p fired $n times"; pass=$((pass+1))
    else
      echo "FAIL: parkway:$p did not fire"; fail=$((fail+1))
    fi
  done
  if [ "$fail" -ne 0 ]; then sed 's/^/  bpftrace: /' "$out" | tail -20; fi
  rm -f "$out"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
