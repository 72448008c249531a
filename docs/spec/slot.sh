#!/usr/bin/env bash
# slot.sh -- the SPIN checks of docs/spec/slot.pml (make spec-slot).
#
#   slot.sh            run every check in the table below
#   slot.sh NAME...    run the named checks only
#   slot.sh -l         list the checks
#   KEEP=1 slot.sh     keep the work directory (pan files, trails)
#
# A check is: name, expectation, mode, spin defines; spin-checks.sh (the
# runner both models share) explains expectations, modes and coverage.
# abl-*: an ablation (slot.pml's header) that must be caught; bug-*: the
# code as it was before a fix (slot.md, "History"), which must still be
# caught.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/slot.pml

CHECKS=(
  # name               expect          mode    defines
  "safety-worker       pass            safety  -DROUNDS=3 -DSPURIOUS=2"
  "safety-outside      pass            safety  -DROUNDS=3 -DHELP=0 -DSPURIOUS=2"
  "safety-x            pass            safety  -DX=1 -DSPURIOUS=1"
  "safety-x-child      pass            safety  -DX=1 -DCHILD=1"
  "alldone-x-child     pass            alldone -DX=1 -DCHILD=1"
  "alldone-worker      pass            alldone -DROUNDS=2"
  "alldone-spurious    pass            alldone -DROUNDS=2 -DSPURIOUS=2"
  "alldone-outside     pass            alldone -DROUNDS=2 -DHELP=0 -DSPURIOUS=1"
  "alldone-x           pass            alldone -DX=1 -DSPURIOUS=1"
  "token-covers        pass            alldone -DROUNDS=2 -DNO_POST_RECHECK=1 -DSPURIOUS=1"
  "child-safety        pass            safety  -DCHILD=1 -DSPURIOUS=1"
  "child-alldone       pass            alldone -DCHILD=1 -DSPURIOUS=1"
  "child-outside       pass            alldone -DCHILD=1 -DHELP=0 -DSPURIOUS=1"
  "abl-g6-store        fail:endstate   safety  -DG6_STORE=1 -DHELP=0"
  "abl-remote-g3o      fail:endstate   safety  -DREMOTE_G3O=1 -DHELP=0"
  "abl-g6-store-live   fail:accept     alldone -DG6_STORE=1 -DHELP=0 -DX=1 -DX_OLD=1 -DXPOLL=1"
  "abl-x-registers     fail:endstate   safety  -DX=1 -DX_REGISTERS=1 -DTHIEF=0"
  "abl-x-takes-place   fail:endstate   safety  -DX=1 -DX_REGISTERS=1 -DROUNDS=1"
  "abl-no-g5-after-g6  fail:endstate   safety  -DNO_G5_AFTER_G6=1 -DHELP=0"
  "abl-free-first      fail:assert:gone  safety  -DFREE_BEFORE_DESTROY=1 -DROUNDS=1"
  "abl-free-first-g2   fail:assert:live  safety  -DFREE_BEFORE_DESTROY=1 -DKEEP_GROUP=1"
  "safety-x-r3         pass            safety  -DX=1 -DROUNDS=3"
  "alldone-x-r3        pass            alldone -DX=1 -DROUNDS=3"
  "bug-x-untimed       fail:endstate   safety  -DX=1 -DX_OLD=1"
  "bug-x-split         fail:endstate   safety  -DX=1 -DX_OLD=2 -DROUNDS=3"
  "bug-child-pending   fail:endstate   safety  -DCHILD=1 -DFIX=0"
)

if [ "${1:-}" = "-l" ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi

# Every search here is short: with pan compiled at -O0 the whole table
# takes 18 s of CPU, 40 s at -O1 (user time, one check at a time).
PAN_OPT=${PAN_OPT:--O0}
PAN_W=${PAN_W:-20}   # 1M hash slots: no search here stores 300k states
. "$HERE/spin-checks.sh"
