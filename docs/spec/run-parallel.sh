# run-parallel.sh -- run independent checks SPIN_JOBS at a time (default:
# one per CPU) and print their reports in launch order, each once it and
# every earlier one ended. Sourced by spin-checks.sh and
# priority_tags_check.sh after they set W (their work directory).
#
#   par_run CMD...   run CMD in the background as the next check; its
#                    output is the check's report, its exit status the result
#   par_finish       wait for every check and print the rest
#
# The caller defines par_result I STATUS, called in launch order: STATUS is
# the check's exit status, or "none" if its shell died before it reported
# (a failure).
PAR_JOBS=${SPIN_JOBS:-$(nproc)}
[ "$PAR_JOBS" -ge 1 ] 2>/dev/null || PAR_JOBS=1
par_launched=0; par_shown=0

par_show_done() {
  while [ $par_shown -lt $par_launched ] && [ -f "$W/result.$par_shown" ]; do
    cat "$W/report.$par_shown"
    par_result $par_shown "$(cat "$W/result.$par_shown")"
    par_shown=$((par_shown + 1))
  done
}

par_run() {
  while [ "$(jobs -rp | wc -l)" -ge "$PAR_JOBS" ]; do wait -n; par_show_done; done
  local i=$par_launched
  ( "$@" > "$W/report.$i" 2>&1
    echo $? > "$W/result.$i.tmp" && mv "$W/result.$i.tmp" "$W/result.$i" ) &
  par_launched=$((par_launched + 1))
}

par_finish() {
  wait
  par_show_done
  while [ $par_shown -lt $par_launched ]; do
    cat "$W/report.$par_shown" 2>/dev/null
    par_result $par_shown none
    par_shown=$((par_shown + 1))
  done
}
