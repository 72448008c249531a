#!/usr/bin/env bash
# check-cli.sh PARKWAY VERSION [--no-sched] -- the `parkway` command's answers to what a
# user gets wrong, none of which needs root or sched_ext: each is one line
# on stderr naming the word or option at fault, exit code 2 (usage), and
# nothing of getopt's own wording. Also --version and --help.
# One line per check, then "N passed, N failed, N skipped".
set -u
bin=$1; version=$2
no_sched=${3:-}  # --no-sched: a build without the BPF scheduler (sched_absent.c)
pass=0; fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ARGS...: sets out, err (texts) and rc.
run() {
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

# usage_error "MESSAGE" ARGS...: exit 2, nothing on stdout, one line on
# stderr that starts with MESSAGE and has none of getopt's wording.
usage_error() {
  local want=$1; shift
  local what="parkway${*:+ $*}"
  run "$@"
  local lines
  lines=$(printf '%s' "$err" | grep -c '')
  if [ "$rc" -ne 2 ]; then
    bad "$what: exit $rc, want 2 (stderr: $err)"
  elif [ -n "$out" ]; then
    bad "$what: wrote to stdout: $out"
  elif [ "$lines" -ne 1 ]; then
    bad "$what: $lines lines on stderr, want 1:"; sed 's/^/  /' <<<"$err"
  elif [[ "$err" != "$want"* ]]; then
    bad "$what: says '$err', want '$want...'"
  elif grep -qiE 'requires an argument|unrecognized option|invalid option|doesn.t allow' <<<"$err"; then
    bad "$what: getopt's own message: $err"
  else
    ok "$what: $err"
  fi
}

run --version
if [ "$rc" -eq 0 ] && [ "$out" = "parkway $version" ] && [ -z "$err" ]; then
  ok "parkway --version: $out"
else
  bad "parkway --version: exit $rc, printed '$out' '$err', want 'parkway $version'"
fi
run --help
if [ "$rc" -eq 0 ] && grep -q 'parkway --version' <<<"$out" && grep -q 'sched load' <<<"$out"; then
  ok "parkway --help prints the usage"
else
  bad "parkway --help: exit $rc, printed: $out $err"
fi

usage_error "parkway: missing command"
usage_error "parkway: unknown command 'foo'" foo
usage_error "parkway: unknown option '--foo'" --foo
usage_error "parkway: missing sched subcommand" sched
usage_error "parkway: unknown sched subcommand 'bogus'" sched bogus
usage_error "parkway sched status: unexpected argument 'x'" sched status x
usage_error "parkway sched unload: unexpected argument 'x'" sched unload x
usage_error "parkway sched load: option --stats needs a value" sched load --stats
usage_error "parkway sched load: option --slice-us needs a value" sched load -v --slice-us
usage_error "parkway sched load: option -S needs a value" sched load -S
usage_error "parkway sched load: option -s needs a value" sched load -vs
usage_error "parkway sched load: option --debug-stall-comm needs a value" sched load --debug-stall-comm
usage_error "parkway sched load: unknown option '--bogus'" sched load --bogus
usage_error "parkway sched load: unknown option '--bogus'" sched load --bogus=1
usage_error "parkway sched load: unknown option '-q'" sched load -vq
usage_error "parkway sched load: option --verbose takes no value" sched load --verbose=yes
usage_error "parkway sched load: option --s is ambiguous" sched load --s 5
usage_error "parkway sched load: --stats takes 0..86400 seconds, not 'x'" sched load --stats x
usage_error "parkway sched load: --slice-us takes 100..1000000, not '99'" sched load --slice-us=99
usage_error "parkway sched load: unexpected argument 'extra'" sched load --stats 5 extra
usage_error "parkway sched load: --penalty-slices takes 0..64, not '65'" sched load --penalty-slices 65
usage_error "parkway sched load: --max-workers takes 1..4096, not '0'" sched load --max-workers 0
usage_error "parkway sched load: --debug-watchdog-ms takes 1000..30000, not '999'" sched load --debug-watchdog-ms 999
usage_error "parkway sched load: option --debug is ambiguous" sched load --debug 5
usage_error "parkway: unexpected argument 'x'" --version x
# Numbers are digits only (strtoul alone takes blanks, '+' and a '-' that
# wraps: "-18446744073709551615" is 1). The trailing --bogus keeps a
# wrongly accepted value from loading anything.
usage_error "parkway sched load: --max-workers takes 1..4096, not '-18446744073709551615'" sched load --max-workers -18446744073709551615 --bogus
usage_error "parkway sched load: --stats takes 0..86400 seconds, not ' 5'" sched load --stats ' 5' --bogus
usage_error "parkway sched load: --slice-us takes 100..1000000, not '+200'" sched load --slice-us +200 --bogus
usage_error "parkway sched load: --penalty-slices takes 0..64, not '-0'" sched load --penalty-slices -0 --bogus

# --help and -h print the usage after every sched subcommand.
for args in "sched status --help" "sched unload -h" "sched load --help" "sched -h" "sched --help x"; do
  run $args
  if [ "$rc" -eq 0 ] && grep -q 'sched unload' <<<"$out" && [ -z "$err" ]; then
    ok "parkway $args prints the usage"
  else
    bad "parkway $args: exit $rc, printed: $out $err"
  fi
done

# Built without the scheduler: each sched subcommand says what was missing
# at build time, exit 3 (environment).
if [ "$no_sched" = --no-sched ]; then
  for sub in status unload load; do
    run sched $sub
    if [ "$rc" -eq 3 ] && [[ "$err" == "parkway sched $sub: this parkway was built without the sched_ext scheduler"* ]]; then
      ok "no-sched build: parkway sched $sub: exit 3, says why"
    else
      bad "no-sched build: parkway sched $sub: exit $rc, '$err'"
    fi
  done
fi

echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
