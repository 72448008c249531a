#!/usr/bin/env bash
# park_fence.sh -- the SPIN checks of docs/spec/park_fence.pml (make
# spec-park-fence): parking's asymmetric [N1] barrier under x86-TSO, and
# the rule by which the [P2] and [S3] rechecks skip membarrier(2) when
# every other worker is idle or its deque's pushes are fenced
# (docs/design/parking.md).
#
#   park_fence.sh            run every check in the table below
#   park_fence.sh NAME...    run the named checks only
#   park_fence.sh -l         list the checks
#   KEEP=1 park_fence.sh     keep the work directory (pan files, trails)
#
# A check is: name, expectation, mode, spin defines; spin-checks.sh (the
# runner the models share) explains expectations, modes and coverage.
# park-*: a searcher that parks ([P1], [P2]); baton-*: the last searcher
# that found work ([S2], [S3]); -pidle: the producer may also run its task
# and park, so every worker can end idle and the skip is taken; rule0: the
# fence is never skipped (a membarrier before every recheck); -gate: the
# code's rule (the count, or every other gate fenced; the others use the
# count alone); -xbusy: X starts busy, so an earlier push of P can turn
# its gate off while X searches; -ybusy: Y starts busy too and parks, so
# that P's gate can turn off [D2] around the baton's [S2] while someone is
# idle at its [S3]; sc-*: no store buffer; reach-*: a state the scenario
# must reach (the check expects the assertion that it is never reached to
# fail); abl-*: an ablation that must lose the wakeup (t never runs).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/park_fence.pml

CHECKS=(
  # name                    expect                 mode    defines
  "park-3                   pass                   safety  -DSCEN=1 -DN=3 -DRULE=1"
  "park-2                   pass                   safety  -DSCEN=1 -DN=2 -DRULE=1"
  "park-3-pidle             pass                   safety  -DSCEN=1 -DN=3 -DRULE=1 -DPIDLE=1"
  "park-2-pidle             pass                   safety  -DSCEN=1 -DN=2 -DRULE=1 -DPIDLE=1"
  "park-3-gate              pass                   safety  -DSCEN=1 -DN=3 -DRULE=5"
  "park-2-gate              pass                   safety  -DSCEN=1 -DN=2 -DRULE=5"
  "park-3-gate-pidle        pass                   safety  -DSCEN=1 -DN=3 -DRULE=5 -DPIDLE=1"
  "park-2-gate-pidle        pass                   safety  -DSCEN=1 -DN=2 -DRULE=5 -DPIDLE=1"
  "park-2-gate-xbusy        pass                   safety  -DSCEN=1 -DN=2 -DRULE=5 -DXBUSY=1"
  "park-2-gate-xbusy-pidle  pass                   safety  -DSCEN=1 -DN=2 -DRULE=5 -DXBUSY=1 -DPIDLE=1"
  "park-3-rule0             pass                   safety  -DSCEN=1 -DN=3 -DRULE=0 -DPIDLE=1"
  "baton-3                  pass                   safety  -DSCEN=2 -DN=3 -DRULE=1"
  "baton-3-pidle            pass                   safety  -DSCEN=2 -DN=3 -DRULE=1 -DPIDLE=1"
  "baton-3-gate             pass                   safety  -DSCEN=2 -DN=3 -DRULE=5"
  "baton-3-gate-pidle       pass                   safety  -DSCEN=2 -DN=3 -DRULE=5 -DPIDLE=1"
  "baton-3-rule0            pass                   safety  -DSCEN=2 -DN=3 -DRULE=0 -DPIDLE=1"
  "baton-3-ybusy            pass                   safety  -DSCEN=2 -DN=3 -DRULE=1 -DXBUSY=1 -DYBUSY=1"
  "baton-3-gate-ybusy       pass                   safety  -DSCEN=2 -DN=3 -DRULE=5 -DXBUSY=1 -DYBUSY=1"
  "baton-3-gate-ybusy-pidle pass                   safety  -DSCEN=2 -DN=3 -DRULE=5 -DXBUSY=1 -DYBUSY=1 -DPIDLE=1"
  "reach-baton-gate-d2      fail:assert:bskip      safety  -DSCEN=2 -DN=3 -DRULE=5 -DXBUSY=1 -DYBUSY=1 -DREACH=1"
  "sc-park-always-skip      pass                   safety  -DSCEN=1 -DN=3 -DRULE=3 -DSC=1 -DPIDLE=1"
  "sc-baton-always-skip     pass                   safety  -DSCEN=2 -DN=3 -DRULE=3 -DSC=1 -DPIDLE=1"
  "sc-baton-gate-early      pass                   safety  -DSCEN=2 -DN=3 -DRULE=8 -DSC=1 -DXBUSY=1 -DYBUSY=1"
  "abl-park-some-idle       fail:assert:taken==1   safety  -DSCEN=1 -DN=3 -DRULE=2"
  "abl-park-always-skip     fail:assert:taken==1   safety  -DSCEN=1 -DN=2 -DRULE=3"
  "abl-park-off-by-one      fail:assert:taken==1   safety  -DSCEN=1 -DN=2 -DRULE=4"
  "abl-baton-some-idle      fail:assert:taken==1   safety  -DSCEN=2 -DN=3 -DRULE=2"
  "abl-baton-always-skip    fail:assert:taken==1   safety  -DSCEN=2 -DN=3 -DRULE=3"
  "abl-park-light-fenced    fail:assert:taken==1   safety  -DSCEN=1 -DN=2 -DRULE=6"
  "abl-baton-light-fenced   fail:assert:taken==1   safety  -DSCEN=2 -DN=3 -DRULE=6"
  "abl-park-gate-early      fail:assert:taken==1   safety  -DSCEN=1 -DN=2 -DRULE=7 -DXBUSY=1"
  "abl-baton-gate-early     fail:assert:taken==1   safety  -DSCEN=2 -DN=3 -DRULE=8 -DXBUSY=1 -DYBUSY=1"
)

if [ "${1:-}" = "-l" ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi

# Every search here is short (at most a few hundred states): pan at -O0
# (9 s of CPU for the table against 15 s at -O1).
PAN_OPT=${PAN_OPT:--O0}
PAN_W=${PAN_W:-18}   # 256k hash slots: no search here stores 40k states
. "$HERE/spin-checks.sh"
