#!/usr/bin/env bash
# io_park.sh -- the SPIN checks of docs/spec/io_park.pml, a worker parked
# inside its io_uring ring (make spec-io-park; design: docs/design/io.md).
#
#   io_park.sh            run every check in the table below
#   io_park.sh NAME...    run the named checks only
#   io_park.sh -l         list the checks
#   KEEP=1 io_park.sh     keep the work directory (pan files, trails)
#
# A check is: name, expectation, mode, spin defines; spin-checks.sh (the
# runner the models share) explains expectations, modes and coverage.
# Modes here: safety (the monitor's invariants, and at quiescence nothing
# left behind), or one of the model's ltl claims: nolost (every task runs),
# nocqe (every CQE is reaped), nocancel (every cancel request is drained),
# settles (the worker ends up asleep, not spinning).
# abl-*: a seeded bug (io_park.pml's header) that must be caught; the
# checks of a seeded bug whose point is liveness turn the monitor off
# (MON=0), so that SPIN reports the lost wakeup itself rather than the
# broken invariant, which the matching *-inv or safety check reports.
# assume-*: drops an assumption about the kernel, to show it is needed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/io_park.pml

CHECKS=(
  # name                  expect                      mode     defines
  "safety-futex           pass                        safety   -DEVENTFD=0"
  "safety-eventfd         pass                        safety   -DEVENTFD=1"
  "safety-futex-more      pass                        safety   -DEVENTFD=0 -DNT=2 -DNC=2 -DRESUBMIT=1"
  "safety-eventfd-more    pass                        safety   -DEVENTFD=1 -DNT=2 -DNC=2 -DNRUN=0 -DRESUBMIT=1"
  "nolost-futex           pass                        nolost   -DEVENTFD=0"
  "nolost-eventfd         pass                        nolost   -DEVENTFD=1"
  "nocqe-futex            pass                        nocqe    -DEVENTFD=0"
  "nocqe-eventfd          pass                        nocqe    -DEVENTFD=1"
  "nocancel-futex         pass                        nocancel -DEVENTFD=0"
  "nocancel-eventfd       pass                        nocancel -DEVENTFD=1"
  "settles-futex          pass                        settles  -DEVENTFD=0"
  "settles-eventfd        pass                        settles  -DEVENTFD=1"
  "resubmit-futex         pass                        nolost   -DEVENTFD=0 -DRESUBMIT=1 -DSTRAY=1"
  "resubmit-eventfd       pass                        nolost   -DEVENTFD=1 -DRESUBMIT=1 -DSTRAY=1 -DNSTUCK=0"
  # variants that must still pass: [R1] dropped (the ring's wait covers
  # it), the wait armed before [P0] (even with a kernel that checked no
  # value), armed early with the constant kParked (W spins, see below, but
  # loses nothing), eventfd mode with a plain wait beside the armed read
  # (no task lost; its CQE is: abl-plain-armed-efd)
  "no-ring-recheck        pass                        nocancel -DEVENTFD=0 -DNO_RING_RECHECK=1"
  "no-ring-recheck-efd    pass                        nocancel -DEVENTFD=1 -DNO_RING_RECHECK=1"
  "arm-early              pass                        nolost   -DEVENTFD=0 -DARM_BEFORE_RECHECK=1"
  "arm-early-eventfd      pass                        nolost   -DEVENTFD=1 -DARM_BEFORE_RECHECK=1"
  "arm-early-no-check     pass                        nolost   -DEVENTFD=0 -DARM_BEFORE_RECHECK=1 -DNO_VALUE_CHECK=1"
  "arm-kparked-nolost     pass                        nolost   -DEVENTFD=0 -DARM_BEFORE_RECHECK=2 -DNC=0"
  "plain-armed-efd-nolost pass                        nolost   -DEVENTFD=1 -DPLAIN_WHILE_ARMED=1 -DMON=0"
  # seeded bugs
  "abl-no-rearm           fail:accept                 nolost   -DEVENTFD=0 -DNO_REARM=1 -DMON=0"
  "abl-no-rearm-eventfd   fail:accept                 nolost   -DEVENTFD=1 -DNO_REARM=1 -DMON=0"
  "abl-no-rearm-inv       fail:assert:(armd==         safety   -DEVENTFD=0 -DNO_REARM=1"
  "abl-plain-armed        fail:assert:!((rw&&fw))     safety   -DEVENTFD=0 -DPLAIN_WHILE_ARMED=1"
  "abl-plain-armed-lost   fail:accept                 nolost   -DEVENTFD=0 -DPLAIN_WHILE_ARMED=1 -DMON=0"
  "abl-plain-armed-efd    fail:accept                 nocqe    -DEVENTFD=1 -DPLAIN_WHILE_ARMED=1 -DMON=0"
  "abl-notify-first       fail:accept                 nocancel -DEVENTFD=0 -DNOTIFY_BEFORE_PUSH=1 -DMON=0"
  "abl-notify-first-efd   fail:accept                 nocancel -DEVENTFD=1 -DNOTIFY_BEFORE_PUSH=1 -DMON=0"
  "abl-notify-first-end   fail:assert:(released==     safety   -DEVENTFD=0 -DNOTIFY_BEFORE_PUSH=1 -DNT=0"
  "abl-doorbell-late      fail:accept                 nolost   -DEVENTFD=1 -DDOORBELL_LATE=1 -DMON=0"
  "abl-doorbell-late-inv  fail:assert:(pw!=4)         safety   -DEVENTFD=1 -DDOORBELL_LATE=1"
  "abl-arm-kparked-spins  fail:accept                 settles  -DEVENTFD=0 -DARM_BEFORE_RECHECK=2 -DNC=0"
  "abl-no-settle          fail:accept                 settles  -DEVENTFD=0 -DNO_SETTLE=1"
  "abl-no-settle-eventfd  fail:accept                 settles  -DEVENTFD=1 -DNO_SETTLE=1"
  # kernel behaviour the protocol relies on
  "assume-no-value-check  fail:accept                 nolost   -DEVENTFD=0 -DNO_VALUE_CHECK=1 -DMON=0"
  "assume-cancel-async    fail:accept                 nocancel -DEVENTFD=0 -DCANCEL_ASYNC=1 -DMON=0"
)

# The model compiles an ltl claim only when asked (-DLTL_name, io_park.pml's
# end): each check that checks a claim gets that define.
for i in "${!CHECKS[@]}"; do
  read -r n e m d <<<"${CHECKS[$i]}"
  case $m in safety|np) ;; *) CHECKS[$i]="$n $e $m $d -DLTL_$m" ;; esac
done

if [ "${1:-}" = "-l" ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi

# Every switch of the model (its #ifndef lines) is either a knob or a
# seeded bug / dropped assumption; each of the latter must have a
# must-fail row, which the run below then requires SPIN to catch.
KNOBS="EVENTFD NT NC NRUN NSTUCK RESUBMIT SPURIOUS STRAY MON NO_RING_RECHECK ARM_BEFORE_RECHECK"
SEEDED="NO_REARM PLAIN_WHILE_ARMED NOTIFY_BEFORE_PUSH DOORBELL_LATE NO_SETTLE ARM_BEFORE_RECHECK=2 NO_VALUE_CHECK CANCEL_ASYNC"
seeded_ok=1
for f in $(sed -nE 's/^#ifndef ([A-Z_]+)$/\1/p' "$MODEL"); do
  case " $KNOBS $SEEDED " in *" $f "*|*" $f="*) ;; *) echo "FAIL  seeded: switch $f of $(basename "$MODEL") is neither a knob nor a seeded bug"; seeded_ok=0 ;; esac
done
for s in $SEEDED; do
  case $s in *=*) ;; *) s=$s=1 ;; esac
  hit=0
  for c in "${CHECKS[@]}"; do
    read -r _ e _ d <<<"$c"
    case "$e $d " in fail:*" -D$s "*) hit=1 ;; esac
  done
  [ $hit = 1 ] || { echo "FAIL  seeded: no must-fail check sets -D$s"; seeded_ok=0; }
done
if [ $seeded_ok = 0 ]; then echo "0 passed, 1 failed, 0 skipped"; exit 1; fi
[ $# -eq 0 ] && echo "seeded bugs: each of $SEEDED has a must-fail check"

# arm-kparked-nolost searches 3k states: a fast compile beats a fast pan
declare -A PAN_OPT_OF=([arm-kparked-nolost]=-O0)
. "$HERE/spin-checks.sh"
