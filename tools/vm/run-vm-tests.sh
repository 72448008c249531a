#!/usr/bin/env bash
# run-vm-tests.sh BUILD_DIR -- the sched_ext tests against a real kernel.
#
# 1. On the host: case 6's host half (this kernel has no sched_ext, so
#    `parkway sched load` must say so).
# 2. Fetch Debian sid's cloud kernel into the cache (tools/vm/fetch-kernel.sh),
#    pack an initramfs with busybox, the tools and test programs, boot it in
#    QEMU TCG (two guests, see below) and collect the "VMTEST" lines the
#    guests print.
# 3. Print each case and "N passed, N failed, N skipped". When QEMU or the
#    kernel cannot be had, the reason is printed and the cases count as
#    skipped, never as passed.
#
# Env: QEMU (default qemu-system-x86_64), PARKWAY_VM_CACHE (default
# /var/cache/parkway-vm), VM_TESTS=1,3 to run only some cases (a guest with
# none selected is not booted), VM_KERNEL=/path/vmlinuz to boot another
# kernel than sid's, VM_KERNEL_FROM=SUITE[:PACKAGE] to fetch another
# Debian kernel (tools/vm/fetch-kernel.sh), VM_TIMEOUT seconds for each guest (default 420),
# VM_ICOUNT_SHIFT (default 4: 16 ns of guest time per instruction),
# VM_MAIN_CLOCK=host and VM_TCG_THREAD (see below).
set -uo pipefail
cd "$(dirname "$0")/../.."

BUILD=${1:-build}
CACHE=${PARKWAY_VM_CACHE:-/var/cache/parkway-vm}
# Not root and no write access there: cache under $HOME instead.
if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
  CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/parkway-vm
fi
NCASES=18
TIMEOUT=${VM_TIMEOUT:-420}
mkdir -p "$BUILD/vm"
# Each run in its own directory: two runs in one checkout must not share
# the initramfs or the serial logs. The logs are kept as $BUILD/vm/main.log
# and $BUILD/vm/timed.log.
RUN=$(mktemp -d "$BUILD/vm/run.XXXXXX")
trap 'rm -rf "$RUN"' EXIT

# skip_all REASON: no guest can run. Case 6's host half has run already
# (below): a failure there still fails the run.
skip_all() {
  echo "vm-test: SKIP all $NCASES cases: $*"
  if [ "$host6" = fail ] && { [ -z "${VM_TESTS:-}" ] || grep -q ",6," <<<",$VM_TESTS,"; }; then
    echo "VMTEST 6 clear-errors: FAIL host half failed (its guest half was skipped)"
    echo "0 passed, 1 failed, $((NCASES - 1)) skipped"
    exit 1
  fi
  [ "$host6" = pass ] && echo "  case 6 host half: pass (its guest half skipped: the case counts as skipped)"
  echo "0 passed, 0 failed, $NCASES skipped"
  exit 0
}

# Case 6, host half: run only where the host really lacks sched_ext.
host6=skip
if [ ! -e /sys/kernel/sched_ext ]; then
  out=$("$BUILD/parkway" sched load 2>&1); rc=$?
  echo "vm-test: host: \`parkway sched load\` exit $rc: $out"
  if [ $rc -eq 3 ] && grep -q 'built without CONFIG_SCHED_CLASS_EXT' <<<"$out"; then host6=pass; else host6=fail; fi
fi

QEMU=${QEMU:-qemu-system-x86_64}
command -v "$QEMU" >/dev/null || skip_all "$QEMU is not installed (make deps)"
"$QEMU" --version >/dev/null 2>&1 || skip_all "$QEMU does not run: $("$QEMU" --version 2>&1 | head -n 1)"
[ -x /bin/busybox ] || skip_all "busybox-static is not installed (make deps)"
if [ -n "${VM_KERNEL:-}" ]; then
  kdir=$(dirname "$VM_KERNEL")  # another kernel, e.g. to check the compat header
  [ "$(basename "$VM_KERNEL")" = vmlinuz ] || { echo "vm-test: VM_KERNEL must name a file called vmlinuz"; exit 2; }
else
  kdir=$(bash tools/vm/fetch-kernel.sh "$CACHE" | tail -n 1) || skip_all "no sched_ext kernel could be fetched into $CACHE"
  echo "vm-test: booting $(cat "$kdir/package" 2>/dev/null || echo '?') ($kdir/vmlinuz)"
fi
[ -f "$kdir/vmlinuz" ] || skip_all "no vmlinuz in $kdir"

bins=("$BUILD/parkway" "$BUILD/vm/pw_linkprobe" "$BUILD/vm/pw_abuse" "$BUILD/vm/pw_seccomp" /usr/bin/setpriv)
[ -x "$BUILD/vm/pw_vmprog" ] && bins+=("$BUILD/vm/pw_vmprog")
bash tools/vm/mkinitramfs.sh "$RUN/init.cpio" "${bins[@]}" || { echo "vm-test: initramfs failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

# Two guests, each booted once for its cases, both under -icount: the
# guest's clock advances with the instructions it executes (2^shift ns
# each), whatever the host's load, and `sleep=off` skips its idle time.
# The main guest has 2 vCPUs: the cases that need two CPUs. Its vCPUs
# take turns on one host thread and do not get equal ticks, so it cannot
# time waits; the timed guest (the wait bounds, cases 10 and 12, and the
# CPU shares of case 14) has 1 vCPU, whose ticks come every tick of its
# clock. VM_MAIN_CLOCK=host boots the main guest with the host's clock
# instead (`-accel tcg,thread=$VM_TCG_THREAD`, default single; about twice
# as slow).
MAIN_CASES="1 2 3 4 5 6 7 8 9 11 13 15 16 17 18"
TIMED_CASES="10 12 14"
selected() {  # selected "CASES": those of CASES that VM_TESTS names, comma-separated
  local n out=""
  for n in $1; do
    if [ -z "${VM_TESTS:-}" ] || grep -q ",$n," <<<",$VM_TESTS,"; then out="$out,$n"; fi
  done
  echo "${out#,}"
}

# boot NAME CASES QEMU-ARGS...: one guest running CASES; its log is
# $RUN/NAME.log.txt (kept as $BUILD/vm/NAME.log).
boot() {
  local name=$1 cases=$2 t0 qrc log=$RUN/$1.log; shift 2
  echo "vm-test: booting $(basename "$kdir") under QEMU TCG ($*) for cases $cases, log kept in $BUILD/vm/$name.log"
  t0=$(date +%s)
  timeout --foreground -k 10 "$TIMEOUT" "$QEMU" "$@" -cpu max -m 1G \
    -nographic -no-reboot -nic none -kernel "$kdir/vmlinuz" -initrd "$RUN/init.cpio" \
    -append "console=ttyS0 quiet panic=-1 loglevel=4 parkway_tests=$cases" </dev/null >"$log" 2>&1
  qrc=$?
  # Strip CRs and the terminal escapes SeaBIOS prints.
  sed -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' "$log" >"$log.txt"
  cp -f "$log.txt" "$BUILD/vm/$name.log"
  echo "vm-test: $name guest: QEMU exit $qrc after $(( $(date +%s) - t0 )) s"
  grep -E '^(VMINFO|VMLOG)' "$log.txt" | sed 's/^/  /'
  grep -E 'sched_ext|BUG|panic' "$log.txt" | grep -v -E '^(VMLOG|VMTEST)' | sed 's/^/  kernel: /' | head -n 20
  if ! grep -q '^VMINFO' "$log.txt"; then
    # QEMU ran but the guest never reached /init: its cases fail.
    echo "vm-test: the $name guest did not start (see $BUILD/vm/$name.log)"; tail -n 20 "$log.txt"
  fi
  grep -q '^VMDONE' "$log.txt" || echo "vm-test: the $name guest did not finish its cases"
}

t_all=$(date +%s)
main=$(selected "$MAIN_CASES")
timed=$(selected "$TIMED_CASES")
icount=(-accel tcg -icount "shift=${VM_ICOUNT_SHIFT:-4},sleep=off")
if [ "${VM_MAIN_CLOCK:-icount}" = host ]; then main_accel=(-accel "tcg,thread=${VM_TCG_THREAD:-single}"); else main_accel=("${icount[@]}"); fi
# Under -icount a guest's clock does not see the host's load, so the two
# guests boot side by side (each QEMU is one host thread); their reports
# are printed whole, main first. A main guest on the host's clock boots
# alone.
if [ "${VM_MAIN_CLOCK:-icount}" = host ]; then
  [ -n "$main" ] && boot main "$main" "${main_accel[@]}" -smp 2
  [ -n "$timed" ] && boot timed "$timed" "${icount[@]}" -smp 1
else
  [ -n "$main" ] && boot main "$main" "${main_accel[@]}" -smp 2 >"$RUN/main.report" 2>&1 &
  [ -n "$timed" ] && boot timed "$timed" "${icount[@]}" -smp 1 >"$RUN/timed.report" 2>&1 &
  wait
  cat "$RUN/main.report" "$RUN/timed.report" 2>/dev/null
fi
echo "vm-test: both guests took $(( $(date +%s) - t_all )) s"

pass=0 fail=0 skip=0
for n in $(seq 1 $NCASES); do
  if grep -qw "$n" <<<"$TIMED_CASES"; then g=timed; else g=main; fi
  line=$(grep -sE "^VMTEST $n " "$RUN/$g.log.txt" | tail -n 1)
  if [ -z "$line" ] && ! grep -q ",$n," <<<",$main,$timed,"; then
    line="VMTEST $n -: SKIP not selected (VM_TESTS=${VM_TESTS:-})"
  fi
  res=$(awk '{print $4}' <<<"$line")
  if [ "$n" = 6 ] && [ "$res" != SKIP ]; then
    echo "  case 6 host half: $host6"
    [ "$host6" = fail ] && { res=FAIL; line="$line [host half failed]"; }
  fi
  case $res in
    PASS) pass=$((pass + 1)); echo "$line" ;;
    SKIP) skip=$((skip + 1)); echo "$line" ;;
    FAIL) fail=$((fail + 1)); echo "$line" ;;
    *) fail=$((fail + 1)); echo "VMTEST $n: FAIL no result (guest hung or crashed; see $BUILD/vm/$g.log)" ;;
  esac
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
