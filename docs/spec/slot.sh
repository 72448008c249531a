#!/usr/bin/env bash
# slot.sh -- the SPIN checks of docs/spec/slot.pml (make spec-slot).
#
#   slot.sh            run every check in the table below
#   slot.sh NAME...    run the named checks only
#   slot.sh -l         list the checks
#   KEEP=1 slot.sh     keep the work directory (pan files, trails)
#
# A check is: name, expectation, mode, spin defines. Expectations:
#   pass          SPIN must explore the whole state space and find nothing
#   fail:KIND[:TEXT]  SPIN must find a counterexample of that kind (assert,
#                 endstate, accept, nonprogress) and, for an assertion, the
#                 violated expression must contain TEXT; an ablation or a
#                 recorded bug that is no longer caught is a FAILED check.
# Modes: safety (assertions, monitor invariants, invalid end states),
# alldone (LTL <>(every round done and X returned), weak fairness), np
# (non-progress cycles, weak fairness). abl-*: an ablation (slot.pml's
# header) that must be caught; bug-*: the code as it is, in a scenario
# where the model finds a lost wake-up (slot.md, "SPIN model").
# After a full run, "coverage" checks that every model statement is reached
# by some passing check (a check that never gets somewhere proves nothing
# there). Output ends with "N passed, N failed, N skipped"; exit 1 if any
# check failed.
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
  "bug-x-untimed       fail:endstate   safety  -DX=1 -DX_OLD=1"
  "bug-child-pending   fail:endstate   safety  -DCHILD=1 -DFIX=0"
)

if [ "${1:-}" = "-l" ]; then printf '%s\n' "${CHECKS[@]}"; exit 0; fi

command -v spin >/dev/null || { echo "spin not installed (make deps)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/slot-spin.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

now() { date +%s.%N; }
dt() { printf '%.2f' "$(echo "$2 - $1" | bc)"; }

# run_check NAME EXPECT MODE DEFS... ; sets RESULT (PASS/FAIL) and prints a line
run_check() {
  local name=$1 expect=$2 mode=$3; shift 3
  local defs="$*" d="$W/$name"
  mkdir -p "$d"
  local cf rf
  case $mode in
    safety)  cf="-DSAFETY -DNOCLAIM"; rf="" ;;
    nolost)  cf="";                   rf="-a -f -N nolost" ;;
    alldone) cf="";                   rf="-a -f -N alldone" ;;
    np)      cf="-DNP -DNOCLAIM";     rf="-l -f" ;;
    *) echo "bad mode $mode"; RESULT=FAIL; return ;;
  esac
  local t0 t1 t2
  t0=$(now)
  cp "$MODEL" "$d/slot.pml"   # local copy: spin -t finds the trail next to it
  (cd "$d" && spin $defs -a slot.pml > spin.out 2>&1) || { cat "$d/spin.out"; RESULT=FAIL; echo "FAIL  $name: spin -a failed"; return; }
  # must-fail checks stop early: a fast compile beats a fast pan
  local opt=-O1
  [ "$expect" = pass ] || opt=-O0
  (cd "$d" && gcc $opt -w $cf -DCOLLAPSE -o pan pan.c) || { RESULT=FAIL; echo "FAIL  $name: gcc failed"; return; }
  t1=$(now)
  (cd "$d" && ./pan -m200000 $rf > pan.out 2>&1)
  t2=$(now)
  local out=$d/pan.out
  local states errs kind
  states=$(sed -nE 's/^ *([0-9e.+]+) states, stored.*/\1/p' "$out" | head -1)
  errs=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' "$out" | head -1)
  local first
  first=$(grep -m1 '^pan:1:' "$out")
  case $first in
    *'assertion violated'*) kind=assert ;;
    *'invalid end state'*)  kind=endstate ;;
    *'acceptance cycle'*)   kind=accept ;;
    *'non-progress cycle'*) kind=nonprogress ;;
    *) kind=none ;;
  esac
  local trunc=0
  grep -q 'max search depth too small' "$out" && trunc=1
  local verdict why
  if [ -z "$errs" ]; then
    verdict=FAIL; why="pan did not finish (see $out)"
  elif [ "$expect" = pass ]; then
    if [ "$errs" = 0 ] && [ $trunc = 0 ]; then verdict=PASS; why="no counterexample"
    elif [ $trunc = 1 ]; then verdict=FAIL; why="search depth too small: incomplete"
    else verdict=FAIL; why="counterexample: $first"
    fi
  else
    local want=${expect#fail:} text=
    case $want in *:*) text=${want#*:}; want=${want%%:*} ;; esac
    if [ "$errs" != 0 ] && [ "$kind" = "$want" ] && [[ "$first" == *"$text"* ]]; then
      verdict=PASS; why="caught as required: ${first#pan:1: }"
    elif [ "$errs" != 0 ]; then verdict=FAIL; why="caught, but as: ${first#pan:1: } (want $want $text)"
    else verdict=FAIL; why="NOT caught: the check no longer finds the expected $want"
    fi
  fi
  if [ "$expect" = pass ] && [ "$verdict" = PASS ]; then
    # coverage: model lines with at least one reached state in this run
    (cd "$d" && ./pan -d > states.txt 2>&1)
    awk -f - "$d/states.txt" "$out" > "$d/reached.txt" <<'AWK'
FNR == 1 { f++ }
f == 1 && /^proctype / { p = $2; next }
f == 1 && /^init/ { p = ":init:"; next }
f == 1 && /^claim/ { p = "claim"; next }
f == 1 && /slot\.pml:[0-9]+/ {
  match($0, /slot\.pml:[0-9]+/); l = substr($0, RSTART + 9, RLENGTH - 9)
  split($0, a, " "); line[p SUBSEP a[2]] = l; all[l] = 1; next
}
f == 2 && /^unreached in proctype / { p = $4; next }
f == 2 && /^unreached in init/ { p = ":init:"; next }
f == 2 && /^unreached in claim/ { p = "claim"; next }
f == 2 && /slot\.pml:[0-9]+, state [0-9]+/ {
  match($0, /slot\.pml:[0-9]+, state [0-9]+/); m = substr($0, RSTART, RLENGTH)
  split(m, b, " "); unr[p SUBSEP b[3]] = 1; next
}
END {
  for (k in line) if (!(k in unr)) print "R", line[k]
  for (l in all) print "A", l
}
AWK
  fi
  if [ "$kind" != none ] && [ "$errs" != 0 ]; then
    (cd "$d" && spin -t $defs -p -g -l slot.pml > trail.txt 2>&1)
  fi
  printf '%-4s  %-18s %-7s %-11s %10s states  pan %6ss  build %5ss  %s\n' \
    "$verdict" "$name" "$mode" "${expect%%:(*}" "${states:-?}" "$(dt "$t1" "$t2")" "$(dt "$t0" "$t1")" "$why"
  printf '      spin %s -a slot.pml; gcc %s %s -DCOLLAPSE; ./pan -m200000 %s\n' "$defs" "$opt" "$cf" "$rf"
  [ "$verdict" = FAIL ] && [ "${KEEP:-0}" != 1 ] && { sed -n '1,40p' "$out" | sed 's/^/      | /'; }
  RESULT=$verdict
}

pass=0; fail=0
T0=$(now)
echo "slot.pml: SPIN $(spin -V | sed -nE 's/Spin Version ([0-9.]+).*/\1/p'), work dir $W"
for c in "${CHECKS[@]}"; do
  read -r name expect mode defs <<<"$c"
  if [ $# -gt 0 ]; then
    hit=0; for a in "$@"; do [ "$a" = "$name" ] && hit=1; done
    [ $hit = 1 ] || continue
  fi
  run_check "$name" "$expect" "$mode" $defs
  if [ "$RESULT" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
# Coverage: every statement of the model is reached by some passing check
# (else a check could pass because the model never gets there). Lines
# marked "ablation only" or "bug only" and closing braces are exempt.
if [ $# -eq 0 ] || [ "${COVER:-0}" = 1 ]; then
  cat "$W"/*/reached.txt 2>/dev/null | sort -u > "$W/cover.txt"
  unreached=$(awk '$1 == "A" { a[$2] = 1 } $1 == "R" { r[$2] = 1 }
                   END { for (l in a) if (!(l in r)) print l }' "$W/cover.txt" | sort -n |
              while read -r l; do
                src=$(sed -n "${l}p" "$MODEL")
                case $src in *"ablation only"*|*"bug only"*|"}"|"  }") ;; *) printf '%s ' "$l" ;; esac
              done)
  if [ -z "$unreached" ]; then
    echo "PASS  coverage           every model statement is reached by a passing check"
    pass=$((pass + 1))
  else
    echo "FAIL  coverage           model lines reached by no passing check: $unreached"
    fail=$((fail + 1))
  fi
fi
echo "total $(dt "$T0" "$(now)") s"
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
