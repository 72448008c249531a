#!/usr/bin/env bash
# priority_tags_check.sh -- run the SPIN checks of priority_tags.pml.
#
#   priority_tags_check.sh              every check below, then the line
#                                       "N passed, N failed, N skipped"
#   priority_tags_check.sh NAME...      only the named checks
#   priority_tags_check.sh -l           list the checks
#
# Each check: NAME EXPECT MODE "DEFINES"
#   EXPECT  pass      = SPIN must report 0 errors
#           cex:KIND  = SPIN must find a counterexample of that kind (an
#                       ablation or a seeded bug: the check fails if the
#                       error disappears or if SPIN reports another one)
#   KIND    lost        assertion: a task lost (the final delivered == ALL)
#           contract    assertion: the parking-contract monitor
#           recheck     assertion: the recheck process answered "empty"
#           endstate    invalid end state (a deadlock)
#           acceptance  acceptance cycle of the run's LTL property (MODE)
#           nonprogress non-progress cycle
#   MODE    safety | alldone | np | nostarve | survive
#           (safety runs add -DCONTRACT: the parking-contract monitor)
# Exit status: non-zero if any check failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/priority_tags.pml
PAN_MEM=${PAN_MEM:-4096}   # MB for pan's state store (uncompressed: see run_check)

CHECKS=(
  # --- the mechanism on: what must hold -------------------------------
  "safety-2p1w        pass safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2"
  "safety-2p2w        pass safety   -DNPROD=2 -DNWORK=2 -DBUDGET=1"
  "safety-1p2w        pass safety   -DNPROD=1 -DNWORK=2 -DBUDGET=2"
  "alldone-2p1w       pass alldone  -DNPROD=2 -DNWORK=1 -DBUDGET=2"
  "alldone-2p2w       pass alldone  -DNPROD=2 -DNWORK=2 -DBUDGET=1"
  "np-2p1w            pass np       -DNPROD=2 -DNWORK=1 -DBUDGET=2"
  "nostarve-endless   pass nostarve -DNPROD=2 -DNWORK=1 -DINFINITE=1"
  # --- the parking recheck's three loads against claims (RECHECK) -------
  "recheck-1p2w       pass safety   -DNPROD=1 -DNWORK=2 -DBUDGET=2 -DRECHECK=1"
  "recheck-2p1w       pass safety   -DNPROD=2 -DNWORK=1 -DBUDGET=1 -DRECHECK=1"
  # --- tags are not needed for safety, and a bypass keeps it ------------
  "safety-tags-off    pass safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DPRIVILEGE=0"
  "safety-bypass      pass safety   -DNPROD=2 -DNWORK=2 -DBUDGET=1 -DBYPASS=1"
  "alldone-tags-off   pass alldone  -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DPRIVILEGE=0"
  # --- ablations and seeded bugs: SPIN must find the counterexample -----
  "starve-tags-off    cex:acceptance  nostarve -DNPROD=2 -DNWORK=1 -DINFINITE=1 -DPRIVILEGE=0"
  "deadlock-nopreempt cex:endstate    safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DNO_PREEMPT=1"
  "bug-no-revalidate  cex:lost        safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DBUG_NO_REVALIDATE"
  "bug-no-epoch       cex:lost        safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DBUG_NO_EPOCH"
  "bug-order          cex:lost        safety   -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DBUG_ORDER"
  "bug-no-pending-mark cex:recheck    safety   -DNPROD=1 -DNWORK=1 -DBUDGET=2 -DRECHECK=1 -DBUG_NO_PENDING_MARK"
  # a worker that retries [W1] for ever without claiming: only liveness
  # sees it (its loop never ends, so the final asserts never run)
  "never-claim-np     cex:nonprogress np       -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DBUG_NEVER_CLAIM"
  "never-claim-2w     cex:acceptance  alldone  -DNPROD=2 -DNWORK=2 -DBUDGET=1 -DBUG_NEVER_CLAIM"
  # --- a tag holder that stops: blocking, unless waiters bypass ---------
  "crash-blocks       cex:acceptance  survive  -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DCRASH=1"
  "crash-bypass       pass survive  -DNPROD=2 -DNWORK=1 -DBUDGET=2 -DCRASH=1 -DBYPASS=1"
)

if [ "${1:-}" = "-l" ]; then
  printf '%s\n' "${CHECKS[@]}" | awk '{print $1, $2, $3}'
  exit 0
fi

command -v spin >/dev/null || { echo "priority_tags: spin not installed (make deps)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/pt-spin.XXXXXX")
trap 'rm -rf "$W"' EXIT
passed=0; failed=0; failed_names=()

# What pan must print for a counterexample of KIND (see the header).
# Assertions are told apart by a subexpression only they contain.
kind_pattern() {  # KIND MODE
  case $1 in
    lost)        echo 'assertion violated \(delivered==' ;;
    contract)    echo 'assertion violated .*inflight>0.*pend==0' ;;
    recheck)     echo 'assertion violated .*must& ?~' ;;
    endstate)    echo 'invalid end state' ;;
    acceptance)  echo 'acceptance cycle' ;;
    nonprogress) echo 'non-progress cycle' ;;
    *)           echo "unknown kind $1" >&2; echo '^$NEVER' ;;
  esac
}

run_check() {  # NAME EXPECT MODE DEFINES...
  local name=$1 expect=$2 mode=$3 shown=$2; shift 3
  local kind=
  case $expect in cex:*) kind=${expect#cex:}; expect=cex ;; esac
  local defs="$*" d="$W/$name"
  mkdir -p "$d"
  local cf rf depth=1000000   # the endless (nostarve) search goes ~225k deep
  case $mode in
    safety)   cf="-DSAFETY -DNOCLAIM"; rf=""; depth=100000 ;;
    np)       cf="-DNP -DNOCLAIM";     rf="-l -f" ;;
    alldone)  cf="";                   rf="-a -f -N alldone" ;;
    nostarve) cf="";                   rf="-a -f -N nostarve" ;;
    survive)  cf="";                   rf="-a -f -N survive" ;;
    *) echo "unknown mode $mode"; return 2 ;;
  esac
  local t0 t1
  t0=$(date +%s.%N)
  local sdefs=$defs
  [ "$mode" = safety ] && sdefs="$defs -DCONTRACT"   # the contract monitor: safety runs only
  ( cd "$d" && spin $sdefs -a "$MODEL" > spin.out 2>&1 ) || { echo "FAIL $name: spin -a failed"; cat "$d/spin.out"; return 1; }
  # a counterexample is found early: a fast compile beats a fast pan
  # (crash-blocks: 0.7 s to compile and 0.8 s to run at -O0, 3.3 s and
  # 0.4 s at -O2). An exhaustive search runs about as fast at -O1 as at
  # -O2 (pan CPU: alldone-2p1w 13.2 s and 13.8 s, safety-2p1w 4.2 s and
  # 4.1 s), and gcc takes 1.2 s of CPU against 1.8 s.
  local opt=-O1
  [ "$expect" = cex ] && opt=-O0
  # States are stored whole, not compressed (-DCOLLAPSE): alldone-2p2w
  # (2.98M states) takes 22.2 s of CPU and 467 MB that way against 30.7 s
  # and 352 MB.
  ( cd "$d" && gcc $opt -w $cf -DMEMLIM=$PAN_MEM -o pan pan.c ) || { echo "FAIL $name: gcc failed"; return 1; }
  # hash slots: 2^24 (128 MB, cleared before the search: 0.07 s of CPU)
  # for an exhaustive search, 2^22 for a counterexample (the largest
  # stores 230k states); the store is exhaustive at any size (a state
  # whose slot is taken is chained)
  local w=24
  [ "$expect" = cex ] && w=22
  ( cd "$d" && ./pan -m$depth -w$w $rf > pan.out 2>&1 )
  t1=$(date +%s.%N)
  local errors states what verdict ok
  errors=$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' "$d/pan.out" | tail -1)
  states=$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' "$d/pan.out" | tail -1)
  what=$(grep -oE 'assertion violated.*|invalid end state|acceptance cycle|non-progress cycle' "$d/pan.out" | head -1)
  if grep -qE 'max search depth too small|Search not completed' "$d/pan.out" && [ "${errors:-x}" = 0 ]; then
    verdict="search incomplete (depth or memory): not a proof"; ok=0
  elif [ -z "$errors" ]; then
    verdict="pan did not finish"; ok=0
  elif [ "$expect" = pass ]; then
    if [ "$errors" = 0 ]; then verdict="holds"; ok=1; else verdict="VIOLATED: $what"; ok=0; fi
  else
    if [ "$errors" = 0 ]; then
      verdict="NO counterexample (expected $kind)"; ok=0
    elif ! grep -qE "$(kind_pattern "$kind" "$mode")" "$d/pan.out"; then
      verdict="WRONG counterexample (expected $kind): $what"; ok=0
    elif [ "$kind" = acceptance ] && ! grep -qE "never claim[[:space:]]+\+ \($mode\)" "$d/pan.out"; then
      verdict="acceptance cycle, but not of the LTL property $mode"; ok=0
    else
      verdict="counterexample found ($kind): $what"; ok=1
    fi
  fi
  printf '%-4s %-19s %-8s %-15s states %-8s %5.1f s  %s\n' \
    "$([ $ok = 1 ] && echo ok || echo FAIL)" "$name" "$mode" "$shown" "${states:-?}" \
    "$(echo "$t1 - $t0" | bc)" "$verdict"
  if [ $ok = 1 ]; then
    return 0
  else
    echo "     spin $sdefs -a; gcc $cf; pan $rf -- output:"
    sed 's/^/     | /' "$d/pan.out" | head -40
    return 1
  fi
}

# The checks are independent: they run several at a time
# (run-parallel.sh), reported in the order above.
. "$HERE/run-parallel.sh"
want=("$@")
names=()
par_result() {
  if [ "$2" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); failed_names+=("${names[$1]}")
    [ "$2" = none ] && echo "FAIL ${names[$1]}: ended without a result"
  fi
  return 0
}
for c in "${CHECKS[@]}"; do
  read -r name expect mode defs <<<"$c"
  if [ ${#want[@]} -gt 0 ]; then
    sel=0; for w in "${want[@]}"; do [ "$w" = "$name" ] && sel=1; done
    [ $sel = 1 ] || continue
  fi
  names+=("$name")
  # shellcheck disable=SC2086
  par_run run_check "$name" "$expect" "$mode" $defs
done
par_finish
[ $failed -ne 0 ] && echo "priority_tags: failed checks: ${failed_names[*]}"
echo "$passed passed, $failed failed, 0 skipped"
[ $failed -eq 0 ]
