# spin-checks.sh -- the check runner shared by the SPIN models' scripts
# (deque.sh, io_park.sh, park_fence.sh, parking.sh, slot.sh). Source it
# after setting MODEL (the .pml path) and CHECKS (rows: name, expectation,
# mode, spin defines); the caller's arguments select checks by name.
#
# Expectations:
#   pass          SPIN must explore the whole state space and find nothing
#   fail:KIND[:TEXT]  SPIN must find a counterexample of that kind (assert,
#                 endstate, accept, nonprogress) and, for an assertion, the
#                 violated expression must contain TEXT; an ablation or a
#                 recorded bug that is no longer caught is a FAILED check.
# Modes: safety (assertions, invalid end states), np (non-progress cycles,
# weak fairness), or the name of one of the model's ltl claims (checked
# with acceptance cycles under weak fairness).
# After a full run, "coverage" checks that every model statement is
# reached by some passing check. Output ends with "N passed, N failed, N
# skipped"; the script exits 1 if any check failed. KEEP=1 keeps the work
# directory (pan files, and each counterexample replayed: trail.txt).
#
# PAN_OPT is the gcc optimization of the pan of a check that must pass
# (default -O1), must-fail checks use -O0 (they stop early), and the
# model's script may set PAN_OPT_OF[name] for a check that runs long
# either way. PAN_W sets pan's hash table to 2^PAN_W slots for a check
# that must pass (default 24; must-fail checks use 22).

command -v spin >/dev/null || { echo "spin not installed (make deps)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
MB=$(basename "$MODEL")
W=$(mktemp -d "${TMPDIR:-/tmp}/${MB%.pml}-spin.XXXXXX")
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
    np)      cf="-DNP -DNOCLAIM";     rf="-l -f" ;;
    *)       cf="";                   rf="-a -f -N $mode" ;;  # an ltl claim of the model
  esac
  local t0 t1 t2
  t0=$(now)
  # must-fail checks stop early: a fast compile beats a fast pan. A model
  # whose exhaustive searches are short sets PAN_OPT=-O0 for them too.
  local opt=${PAN_OPT:--O1}
  [ "$expect" = pass ] || opt=-O0
  [ -n "${PAN_OPT_OF[$name]:-}" ] && opt=${PAN_OPT_OF[$name]}
  # pan's hash table: 2^PAN_W slots (default 24, 128 MB, which pan clears
  # before it starts: 0.07 s of CPU) for a check that must pass, 2^22 for
  # one that must fail. The store is exhaustive at any size (a state whose
  # slot is taken is chained: "hash conflicts ... (resolved)"); a table
  # sized to the search only saves the clearing.
  local w=${PAN_W:-24}
  [ "$expect" = pass ] || w=22
  [ "$w" = 24 ] || rf="-w$w${rf:+ $rf}"
  # States are stored whole, not compressed (-DCOLLAPSE): parking.pml's
  # largest check (nolost-n2, 11.9M states) takes 15.0 s of CPU and 1.35
  # GB that way against 18.0 s and 0.77 GB.
  cp "$MODEL" "$d/$MB"   # local copy: spin -t finds the trail next to it
  (cd "$d" && spin $defs -a "$MB" > spin.out 2>&1) || { cat "$d/spin.out"; RESULT=FAIL; echo "FAIL  $name: spin -a failed"; return; }
  (cd "$d" && gcc $opt -w $cf -o pan pan.c) || { RESULT=FAIL; echo "FAIL  $name: gcc failed"; return; }
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
    awk -v mb="$MB" -f - "$d/states.txt" "$out" > "$d/reached.txt" <<'AWK'
BEGIN { e = mb; gsub(/\./, "\\.", e); re1 = e ":[0-9]+"; re2 = e ":[0-9]+, state [0-9]+"; n = length(mb) + 1 }
FNR == 1 { f++ }
f == 1 && /^proctype / { p = $2; next }
f == 1 && /^init/ { p = ":init:"; next }
f == 1 && /^claim/ { p = "claim"; next }
f == 1 && $0 ~ re1 {
  match($0, re1); l = substr($0, RSTART + n, RLENGTH - n)
  split($0, a, " "); line[p SUBSEP a[2]] = l; all[l] = 1; next
}
f == 2 && /^unreached in proctype / { p = $4; next }
f == 2 && /^unreached in init/ { p = ":init:"; next }
f == 2 && /^unreached in claim/ { p = "claim"; next }
f == 2 && $0 ~ re2 {
  match($0, re2); m = substr($0, RSTART, RLENGTH)
  split(m, b, " "); unr[p SUBSEP b[3]] = 1; next
}
END {
  for (k in line) if (!(k in unr)) print "R", line[k]
  for (l in all) print "A", l
}
AWK
  fi
  if [ "${KEEP:-0}" = 1 ] && [ "$kind" != none ] && [ "$errs" != 0 ]; then
    (cd "$d" && spin -t $defs -p -g -l "$MB" > trail.txt 2>&1)
  fi
  printf '%-4s  %-18s %-7s %-11s %10s states  pan %6ss  build %5ss  %s\n' \
    "$verdict" "$name" "$mode" "${expect%%:(*}" "${states:-?}" "$(dt "$t1" "$t2")" "$(dt "$t0" "$t1")" "$why"
  printf '      spin %s -a '"$MB"'; gcc %s %s; ./pan -m200000 %s\n' "$defs" "$opt" "$cf" "$rf"
  [ "$verdict" = FAIL ] && [ "${KEEP:-0}" != 1 ] && { sed -n '1,40p' "$out" | sed 's/^/      | /'; }
  RESULT=$verdict
}

# The checks are independent (each its own work directory and pan): they
# run several at a time (run-parallel.sh), reported in the order of CHECKS.
. "$(dirname "${BASH_SOURCE[0]}")/run-parallel.sh"
declare -A PAN_OPT_OF   # keeps what the model's script set
pass=0; fail=0
T0=$(now)
echo "$MB: SPIN $(spin -V | sed -nE 's/Spin Version ([0-9.]+).*/\1/p'), work dir $W, $PAR_JOBS at a time"
check_passes() { RESULT=FAIL; run_check "$@"; [ "$RESULT" = PASS ]; }
par_result() {
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  [ "$2" = none ] && echo "FAIL  check #$1 ended without a result"
  return 0
}
for c in "${CHECKS[@]}"; do
  read -r name expect mode defs <<<"$c"
  if [ $# -gt 0 ]; then
    hit=0; for a in "$@"; do [ "$a" = "$name" ] && hit=1; done
    [ $hit = 1 ] || continue
  fi
  # shellcheck disable=SC2086
  par_run check_passes "$name" "$expect" "$mode" $defs
done
par_finish
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
