#!/usr/bin/env bash
# run-vm-tests.sh BUILD_DIR -- the sched_ext tests against a real kernel.
#
# 1. On the host: case 6's host half (this kernel has no sched_ext, so
#    `parkway sched load` must say so).
# 2. Fetch Debian sid's cloud kernel into the cache (tools/vm/fetch-kernel.sh),
#    pack an initramfs with busybox, the tools and test programs, boot it in
#    QEMU TCG and collect the "VMTEST" lines the guest prints.
# 3. Print each case and "N passed, N failed, N skipped". When QEMU or the
#    kernel cannot be had, the reason is printed and the cases count as
#    skipped, never as passed.
#
# Env: QEMU (default qemu-system-x86_64), PARKWAY_VM_CACHE (default /var/cache/parkway-vm), VM_TESTS=1,3 to run
# only some cases, VM_KERNEL=/path/vmlinuz to boot another kernel than
# sid's, VM_TIMEOUT seconds for the whole boot (default 420).
set -uo pipefail
cd "$(dirname "$0")/../.."

BUILD=${1:-build}
CACHE=${PARKWAY_VM_CACHE:-/var/cache/parkway-vm}
# Not root and no write access there: cache under $HOME instead.
if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
  CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/parkway-vm
fi
NCASES=11
TIMEOUT=${VM_TIMEOUT:-420}
mkdir -p "$BUILD/vm"
# Each run in its own directory: two runs in one checkout must not share
# the initramfs or the serial log. The log is kept as $BUILD/vm/serial.log.
RUN=$(mktemp -d "$BUILD/vm/run.XXXXXX")
LOG=$RUN/serial.log
trap 'cp -f "$LOG" "$BUILD/vm/serial.log" 2>/dev/null; cp -f "$LOG.txt" "$BUILD/vm/serial.log.txt" 2>/dev/null; rm -rf "$RUN"' EXIT

skip_all() {
  echo "vm-test: SKIP all $NCASES cases: $*"
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

append="console=ttyS0 quiet panic=-1 loglevel=4"
[ -n "${VM_TESTS:-}" ] && append="$append parkway_tests=$VM_TESTS"
echo "vm-test: booting $(basename "$kdir") under QEMU TCG (-smp 2), log kept in $BUILD/vm/serial.log"
t0=$(date +%s)
timeout --foreground -k 10 "$TIMEOUT" "$QEMU" -accel tcg,thread=${VM_TCG_THREAD:-single} -cpu max -smp 2 -m 1G \
  -nographic -no-reboot -nic none -kernel "$kdir/vmlinuz" -initrd "$RUN/init.cpio" \
  -append "$append" </dev/null >"$LOG" 2>&1
qrc=$?
# Strip CRs and the terminal escapes SeaBIOS prints.
sed -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' "$LOG" >"$LOG.txt"
echo "vm-test: QEMU exit $qrc after $(( $(date +%s) - t0 )) s"
grep -E '^(VMINFO|VMLOG)' "$LOG.txt" | sed 's/^/  /'
grep -E 'sched_ext|BUG|panic' "$LOG.txt" | grep -v -E '^(VMLOG|VMTEST)' | sed 's/^/  kernel: /' | head -n 20

if ! grep -q '^VMINFO' "$LOG.txt"; then
  # QEMU ran but the guest never reached /init: a failure, not a skip.
  echo "vm-test: the guest did not start (see $BUILD/vm/serial.log)"; tail -n 20 "$LOG.txt"
  echo "0 passed, $NCASES failed, 0 skipped"; exit 1
fi

pass=0 fail=0 skip=0
for n in $(seq 1 $NCASES); do
  line=$(grep -E "^VMTEST $n " "$LOG.txt" | tail -n 1)
  res=$(awk '{print $4}' <<<"$line")
  if [ "$n" = 6 ] && [ "$res" != SKIP ]; then
    echo "  case 6 host half: $host6"
    [ "$host6" = fail ] && { res=FAIL; line="$line [host half failed]"; }
  fi
  case $res in
    PASS) pass=$((pass + 1)); echo "$line" ;;
    SKIP) skip=$((skip + 1)); echo "$line" ;;
    FAIL) fail=$((fail + 1)); echo "$line" ;;
    *) fail=$((fail + 1)); echo "VMTEST $n: FAIL no result (guest hung or crashed; see $BUILD/vm/serial.log)" ;;
  esac
done
grep -q '^VMDONE' "$LOG.txt" || echo "vm-test: the guest did not finish its cases"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
