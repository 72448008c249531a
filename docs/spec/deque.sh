#!/usr/bin/env bash
# deque.sh -- the SPIN checks of docs/spec/deque.pml (make spec-deque):
# the Chase-Lev deque's gate protocol (the owner's pop fences only when a
# thief may be stealing) under x86-TSO store buffers.
#
#   deque.sh            run every check in the table below
#   deque.sh NAME...    run the named checks only
#   deque.sh -l         list the checks
#   KEEP=1 deque.sh     keep the work directory (pan files, trails)
#
# A check is: name, expectation, mode, spin defines; spin-checks.sh (the
# runner the models share) explains expectations, modes and coverage.
# safety-*: the protocol (asymmetric mode: FENCED set and cleared by the
# owner, thieves run membarrier when it is clear); sym-*: the symmetric
# fallback (FENCED for good, no membarrier); sc-*: stores go straight to
# memory (no TSO), to show that the ablations below fail because of the
# store buffer and not because the model is wrong elsewhere; abl-*: an
# ablation (deque.pml's header) that must be caught, as a duplicate take
# unless noted.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/deque.pml

CHECKS=(
  # name                 expect                  mode    defines
  "safety-1thief         pass                    safety  -DNTHIEF=1 -DNSESS=2"
  "safety-2thieves       pass                    safety  -DNTHIEF=2 -DNSESS=2"
  "safety-2thieves-long  pass                    safety  -DNTHIEF=2 -DNSESS=2 -DNSTEAL=3 -DSCRIPT=2"
  "safety-start-fenced  pass                    safety  -DNTHIEF=2 -DNSESS=2 -DSTART_FENCED=1"
  "safety-sb2            pass                    safety  -DNTHIEF=2 -DSB=2"
  "safety-sb4            pass                    safety  -DNTHIEF=2 -DSB=4"
  "sym-1thief            pass                    safety  -DSYM=1 -DNTHIEF=1 -DNSESS=2"
  "sym-2thieves          pass                    safety  -DSYM=1 -DNTHIEF=2 -DNSESS=2"
  "clear-fetch-and       pass                    safety  -DNTHIEF=2 -DNSESS=2 -DPLAIN_CLEAR=2"
  "sc-no-gate            pass                    safety  -DSC=1 -DNO_GATE_CHECK=1 -DNTHIEF=2 -DNSESS=2"
  "abl-no-gate-check     fail:assert:taken[x]==0 safety  -DNO_GATE_CHECK=1"
  "abl-sym-no-fence      fail:assert:taken[x]==0 safety  -DSYM=1 -DNO_GATE_CHECK=1"
  "abl-no-membarrier     fail:assert:taken[x]==0 safety  -DNO_MEMBARRIER=1"
  "abl-plain-clear       fail:assert:taken[x]==0 safety  -DPLAIN_CLEAR=1 -DGATE_END=0"
  "abl-store-zero       fail:assert:taken[x]==0 safety  -DPLAIN_CLEAR=3 -DGATE_END=0"
  "abl-plain-clear-gate  fail:assert:mem[2]==    safety  -DPLAIN_CLEAR=1"
  "abl-fenced-bit-only   fail:assert:taken[x]==0 safety  -DFENCED_BIT_ONLY=1"
  "abl-membarrier-first  fail:assert:taken[x]==0 safety  -DMEMBARRIER_FIRST=1"
  "abl-early-d10         fail:assert:taken[x]==0 safety  -DEARLY_D10=1"
  "abl-top-first         fail:assert:taken[x]==0 safety  -DTOP_FIRST=1"
  "sc-top-first          fail:assert:taken[x]==0 safety  -DSC=1 -DTOP_FIRST=1"
  "abl-gate-first        fail:assert:taken[x]==0 safety  -DGATE_FIRST=1"
  "abl-top-before-gate   fail:assert:taken[x]==0 safety  -DTOP_BEFORE_GATE=1"
)

if [ "${1:-}" = "-l" ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi

# gcc -Og: pan runs as fast as at -O1 (safety-2thieves-long: 2.7 s) and
# gcc takes 0.5 s of CPU against 0.85 s.
PAN_OPT=${PAN_OPT:--Og}
. "$HERE/spin-checks.sh"
