#!/usr/bin/env bash
# check-httpd.sh BINARY -- end-to-end checks of parkway-httpd: starts it on
# 127.0.0.1 (port 0) with a temporary document root and talks to it with
# curl and raw sockets (python3), large, small and uncached files
# (tests/httpd/large_files.py, small_files.py), a fuzz client
# (tests/httpd/fuzz.py, about 10 s) and wrk (when installed); meanwhile,
# in the background, a second server gets the checks that wait out its
# timeouts: bodies apart from their heads (tests/httpd/bodies.py), empty
# lines between requests (tests/httpd/empty_lines.py, about 5 s), heads
# and bodies that time out. Then a server shut down under load
# (tests/httpd/shutdown.py, shutdown_head.py), /fib for clients that
# pipeline or go (tests/httpd/fib_clients.py, about 4 s), one under
# `ulimit -n 64` that gets more connections than it has descriptors
# (tests/httpd/exhaust.py); then, while slow readers run in the
# background (tests/httpd/slow_readers.py, about 8 s;
# tests/httpd/slow_pipelining.py, about 5 s), /fib on a separate pool,
# permissions (as nobody), signals (a closed stderr pipe, a second
# SIGTERM, PARKWAY_TRACE on) and a runtime that cannot start. One line
# per check, then "N passed, N failed, N skipped"; exits non-zero when a
# check failed.
#
# HTTPD_CHECK_SANITIZER=1: BINARY is built with -fsanitize=address,undefined;
# the checks are the same (any sanitizer report on a server's stderr fails
# in either mode), leak detection is on, and the exit status at SIGTERM
# (0) is where LeakSanitizer's verdict shows.
set -u
BIN=${1:-build/parkway-httpd}
HERE=$(cd "$(dirname "$0")" && pwd)
SAN=${HTTPD_CHECK_SANITIZER:-0}
FUZZ_SECONDS=${HTTPD_FUZZ_SECONDS:-10}
if [ "$SAN" = 1 ]; then
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  FUZZ_SECONDS=${HTTPD_FUZZ_SECONDS:-8}
fi
pass=0; fail=0; skip=0
ok()      { echo "PASS $1"; pass=$((pass + 1)); }
bad()     { echo "FAIL $1${2:+: $2}"; fail=$((fail + 1)); }
skipped() { echo "SKIP $1${2:+: $2}"; skip=$((skip + 1)); }
check()   { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
finish()  { echo "$pass passed, $fail failed, $skip skipped"; [ "$fail" -eq 0 ]; }

if ! command -v python3 >/dev/null; then skipped "all checks" "python3 missing"; finish; exit; fi
# py ARGS...: python3 run as the interpreter itself (not through a wrapper
# such as a pyenv shim, which costs a tenth of a second a start) and
# without the site module (the checks use the standard library alone):
# most checks here are one short python3 client each.
PY=$(python3 -c 'import sys; print(sys.executable)')
py() { "$PY" -S "$@"; }
HAVE_CURL=1; command -v curl >/dev/null || HAVE_CURL=0

TMP=$(mktemp -d)
PID=; PID2=; PID3=; PID5=; PID6=; PID9=; PIDW=
cleanup() {
  [ -n "$PIDW" ] && kill -KILL "$PIDW" 2>/dev/null
  [ -n "$PID9" ] && kill -KILL "$PID9" 2>/dev/null
  [ -n "$PID6" ] && kill -KILL "$PID6" 2>/dev/null
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
  [ -n "$PID5" ] && kill -KILL "$PID5" 2>/dev/null
  [ -n "$PID2" ] && kill -KILL "$PID2" 2>/dev/null
  [ -n "$PID3" ] && kill -KILL "$PID3" 2>/dev/null
  chmod -R u+rwx "$TMP" 2>/dev/null  # the permission checks' directory that may not be read
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# sanitizer_clean NAME ERRFILE: a check that ERRFILE holds no sanitizer report.
sanitizer_clean() {
  if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: [A-Za-z]+Sanitizer' "$2"; then
    bad "$1" "$(grep -m1 -E 'ERROR: |runtime error:|SUMMARY: ' "$2")"
    sed -n 1,40p "$2" | sed 's/^/  | /'
  else
    ok "$1"
  fi
}
# no_connection_errors NAME ERRFILE: a check that ERRFILE (a server's
# stderr) has no "parkway-httpd: connection:" line.
no_connection_errors() {
  if grep -q 'parkway-httpd: connection:' "$2"; then
    bad "$1" "$(grep -m1 'parkway-httpd: connection:' "$2")"
  else
    ok "$1"
  fi
}
# stop_server NAME PID [SIGNAL]: SIGTERM (or SIGNAL), then a check that it exits 0
# within 8 s.
# Sets STOPPED=1 when it is gone.
stop_server() {
  local rc=timeout
  STOPPED=0
  kill -"${3:-TERM}" "$2"
  for _ in $(seq 80); do
    if ! kill -0 "$2" 2>/dev/null; then wait "$2"; rc=$?; STOPPED=1; break; fi
    sleep 0.1
  done
  if [ "$rc" = 0 ]; then ok "$1"; else bad "$1" "exit: $rc"; fi
}
# py_run OUT CMD...: runs a python3 check script (at most 60 s), its
# output to OUT, its exit status to OUT.rc.
py_run() {
  local out=$1; shift
  timeout 60 "$PY" -S "$@" >"$out" 2>&1; echo $? >"$out.rc"
}
# py_count OUT SCRIPT: counts the PASS/FAIL/SKIP lines of SCRIPT's output
# (py_run's OUT); other lines are shown as they are.
py_count() {
  local verdict rest line rc
  while IFS= read -r line; do
    verdict=${line%% *}; rest=${line#* }
    case $verdict in
      PASS) ok "$rest" ;;
      FAIL) bad "$rest" ;;
      SKIP) skipped "$rest" ;;
      *) echo "$line" ;;
    esac
  done <"$1"
  # A script that died (an exception, the timeout) failed, whatever it printed.
  rc=$(cat "$1.rc")
  [ "$rc" -eq 0 ] || bad "$(basename "$2") ran to its end" "exit status $rc"
}
# py_checks CMD...: py_run, then py_count.
py_checks() { py_run "$TMP/py" "$@"; py_count "$TMP/py" "$1"; }

# start_server NAME OUT ERR CMD...: starts CMD (a parkway-httpd command
# line with --port 0) in the background, stdout to OUT, stderr to ERR
# (- : left as it is); sets SPID and SPORT, and says so when the server
# did not come up (SPORT empty).
start_server() {
  local name=$1 out=$2 err=$3; shift 3
  : >"$out"
  if [ "$err" = - ]; then "$@" >"$out" & else "$@" >"$out" 2>"$err" & fi
  SPID=$!
  for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
  SPORT=$(sed -nE 's/^parkway-httpd: listening on 127\.0\.0\.1:([0-9]+) .*/\1/p' "$out")
  [ -n "$SPORT" ] || bad "$name server started" "$(cat "$out"; [ "$err" = - ] || cat "$err")"
}

ROOT=$TMP/root
mkdir -p "$ROOT/sub" "$ROOT/d ir" "$TMP/outside"
printf 'hello, static world\n' > "$ROOT/hello.txt"
printf '<p>index</p>\n' > "$ROOT/sub/index.html"
printf 'SECRET-OUTSIDE-ROOT\n' > "$TMP/outside/secret.txt"
printf 'decoy: not the file asked for\n' > "$ROOT/zzzzz"
printf 'from the future\n' > "$ROOT/future.txt"
printf 'a file named fib\n' > "$ROOT/fib"
: > "$ROOT/empty.txt"
touch -d '2099-01-01 00:00:00 UTC' "$ROOT/future.txt"
ln -s "$TMP/outside/secret.txt" "$ROOT/escape.txt"
touch -d '2020-01-02 03:04:05 UTC' "$ROOT/hello.txt"

"$BIN" --port 0 --root "$ROOT" --workers 2 --header-timeout 1 --body-timeout 1 --idle-timeout 5 >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 50); do grep -q listening "$TMP/out" && break; sleep 0.1; done
PORT=$(sed -nE 's/^parkway-httpd: listening on 127\.0\.0\.1:([0-9]+) \([0-9]+ workers\)$/\1/p' "$TMP/out")
if [ -z "$PORT" ]; then bad "startup line" "$(cat "$TMP/out" "$TMP/err")"; finish; exit; fi
ok "startup line (port $PORT)"
URL=http://127.0.0.1:$PORT

# raw TIMEOUT [MARK]: sends stdin in one write, prints what comes back until
# the server closes ("<EOF>" last) or TIMEOUT seconds pass ("<OPEN>" last)
# (tests/httpd/raw.py).
raw() { py "$HERE/httpd/raw.py" "$PORT" "$@"; }
has() { grep -qiF -- "$2" <<<"$1"; }
status_is() { head -n1 <<<"$1" | grep -q "^HTTP/1.1 $2 "; }

# ---- the checks that wait: their clients ------------------------------------------------
# Checks that wait out a timeout, or wait to see that one does not fire,
# spend their seconds idle. Their clients start here, side by side,
# against a server of their own (the waits server: the first's options
# but a 4 s idle timeout, which outlasts the longest wait for a
# connection still open, 1.8 s, and lies past closed_after's 3.5 s and
# the 408 checks' 3 s reads: a first head given the idle timeout instead
# of the header timeout fails them), while the checks that follow run
# against the first; their verdicts come in "timeouts and idle
# connections", below.
start_server "waits" "$TMP/outw" "$TMP/errw" "$BIN" --port 0 --root "$ROOT" --workers 2 --header-timeout 1 --body-timeout 1 --idle-timeout 4
PIDW=$SPID PORTW=$SPORT
WAITS=()
# wait_raw NAME TIMEOUT DATA: raw.py against the waits server, in the
# background, sending DATA; what comes back goes to $TMP/w.NAME, the
# client's start and end times (date +%s.%N) to $TMP/w.NAME.t.
wait_raw() {
  ( t0=$(date +%s.%N)
    printf '%s' "$3" | py "$HERE/httpd/raw.py" "$PORTW" "$2" >"$TMP/w.$1"
    echo "$t0 $(date +%s.%N)" >"$TMP/w.$1.t" ) &
  WAITS+=($!)
}
if [ -n "$PORTW" ]; then
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nPOST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n'
  wait_raw answer-before-body 0.6 "$req"
  printf -v req 'HEAD /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nab'
  wait_raw head-body-408 3 "$req"
  printf -v req 'HEAD /plaintext HTTP/1.1\r\nHost: t\r\n'
  wait_raw head-head-408 3 "$req"
  printf -v pad '%60s' ''
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nHEAD /plaintext HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n' "${pad// /a}"
  wait_raw get-head-408 3 "$req"
  printf -v pad '%2004s' ''
  printf -v req 'HEAD /plaintext HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n' "${pad// /a}"
  wait_raw head-2k-408 3 "$req"
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n\r\n'
  wait_raw stray-crlf 1.8 "$req"
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n'
  wait_raw keep-alive 1.5 "$req"
  printf -v pad '%12000s' ''
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost: t\r\nX-Mid: %s\r\n\r\nGET /fib/10 HTTP/1.1\r\nHost: t\r\n\r\n' "${pad// /m}"
  wait_raw head-12k 1.5 "$req"
  printf -v req 'GET /plaintext HTTP/1.1\r\nHost'
  wait_raw slowloris 4 "$req"
  wait_raw silent 4 ''
  py_run "$TMP/w.bodies" "$HERE/httpd/bodies.py" "$PORTW" &
  WAITS+=($!)
  py_run "$TMP/w.empty-lines" "$HERE/httpd/empty_lines.py" "$PORTW" 4 &
  WAITS+=($!)
fi

# ---- /plaintext, HEAD -------------------------------------------------------
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "/plaintext status, headers, body" bash -c '
  r=$1; head -n1 <<<"$r" | grep -q "^HTTP/1.1 200 " && grep -q "^Server: parkway-httpd" <<<"$r" &&
  grep -q "^Date: .* GMT" <<<"$r" && grep -q "^Content-Type: text/plain" <<<"$r" &&
  grep -q "^Content-Length: 13" <<<"$r" && grep -q "Hello, World!<EOF>$" <<<"$r"' _ "$r"
r=$(printf 'HEAD /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "HEAD: Content-Length, no body" bash -c 'grep -q "^Content-Length: 13" <<<"$1" && ! grep -q "Hello" <<<"$1" && grep -q "<EOF>" <<<"$1"' _ "$r"

# ---- static files -----------------------------------------------------------
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "static file: 200, Content-Length, Last-Modified, body" bash -c '
  grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Content-Length: 20" <<<"$1" &&
  grep -q "^Last-Modified: Thu, 02 Jan 2020 03:04:05 GMT" <<<"$1" && grep -q "hello, static world" <<<"$1"' _ "$r"
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Thu, 02 Jan 2020 03:04:05 GMT\r\nConnection: close\r\n\r\n' | raw 3)
check "If-Modified-Since -> 304, no body" bash -c 'grep -q "^HTTP/1.1 304 " <<<"$1" && ! grep -q "static world" <<<"$1"' _ "$r"
check "304: Last-Modified kept, no Content-Type, Accept-Ranges or Content-Length (RFC 9110 15.4.5)" bash -c '
  grep -q "^Last-Modified: " <<<"$1" && ! grep -qiE "^(Content-Type|Accept-Ranges|Content-Length):" <<<"$1"' _ "$r"
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT\r\nConnection: close\r\n\r\n' | raw 3)
check "older If-Modified-Since -> 200" status_is "$r" 200
# RFC 9110 5.6.7: an RFC 850 date more than 50 years in the future is in
# the past century. Now + 50 years + 1 day (in the year 50 years on, but
# on Dec 31) is 1976 or so: before hello.txt's date, so not a 304.
ims=$(py -c '
import datetime as d
n = d.datetime.now(d.timezone.utc)
try: t = n.replace(year=n.year + 50)
except ValueError: t = n.replace(year=n.year + 50, day=28)  # Feb 29
t += d.timedelta(days=1)
print(t.strftime("%A, %d-%b-%y %H:%M:%S GMT"))')
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\nConnection: close\r\n\r\n' "$ims" | raw 3)
check "If-Modified-Since: $ims (RFC 850, more than 50 years on: the past) -> 200" status_is "$r" 200
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=7-12\r\nConnection: close\r\n\r\n' | raw 3)
check "Range -> 206 with Content-Range and the bytes" bash -c '
  grep -q "^HTTP/1.1 206 " <<<"$1" && grep -q "^Content-Range: bytes 7-12/20" <<<"$1" &&
  grep -q "^Content-Length: 6" <<<"$1" && grep -q "static<EOF>" <<<"$1"' _ "$r"
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=500-\r\nConnection: close\r\n\r\n' | raw 3)
check "unsatisfiable Range -> 416" bash -c 'grep -q "^HTTP/1.1 416 " <<<"$1" && grep -q "^Content-Range: bytes \*/20" <<<"$1"' _ "$r"
# The one satisfiable range of an empty file, a suffix (RFC 9110 14.1.1),
# which no 206 can describe: the whole, empty file.
r=$(printf 'GET /empty.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-5\r\nConnection: close\r\n\r\n' | raw 3)
check "suffix Range of an empty file -> 200, Content-Length: 0" bash -c '
  grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Content-Length: 0"$'"'"'\r'"'"'"$" <<<"$1"' _ "$r"
# RFC 9110 13.2.2: the 304 conditions come before Range; If-Range is the
# Last-Modified date exactly or the whole file is sent; HEAD ignores Range.
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=7-12\r\nIf-Range: Thu, 02 Jan 2020 03:04:05 GMT\r\nConnection: close\r\n\r\n' | raw 3)
check "If-Range equal to Last-Modified -> 206" bash -c 'grep -q "^HTTP/1.1 206 " <<<"$1" && grep -q "^Content-Range: bytes 7-12/20" <<<"$1"' _ "$r"
for ir in 'Wed, 01 Jan 2020 00:00:00 GMT' '"an-etag"' 'not a date'; do
  r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=7-12\r\nIf-Range: %s\r\nConnection: close\r\n\r\n' "$ir" | raw 3)
  check "If-Range: $ir (no match) -> 200, the whole file" bash -c '
    grep -q "^HTTP/1.1 200 " <<<"$1" && ! grep -q "^Content-Range" <<<"$1" && grep -q "^hello, static world" <<<"$1"' _ "$r"
done
# get_status NAME STATUS FIELDS: GET /hello.txt with the header FIELDS
# (each ending in \r\n) is answered STATUS.
get_status() {
  local r
  r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\n%bConnection: close\r\n\r\n' "$3" | raw 3)
  check "$1" status_is "$r" "$2"
}
get_status "If-Modified-Since with Range -> 304" 304 \
  'Range: bytes=0-1\r\nIf-Modified-Since: Thu, 02 Jan 2020 03:04:05 GMT\r\n'
get_status "If-None-Match: * -> 304" 304 'If-None-Match: *\r\n'
get_status "If-None-Match: * after an empty line -> 304" 304 'If-None-Match:\r\nIf-None-Match: *\r\n'
# "*" is the whole value or nothing: within a list of tags (its lines taken
# together) or inside a tag's quotes it is no wildcard (RFC 9110 13.1.2).
get_status "If-None-Match over two lines, * in the second (a list) -> 200" 200 'If-None-Match: "a"\r\nIf-None-Match: *\r\n'
get_status "If-Match over two lines, * in the second (a list) -> 412" 412 'If-Match: "a"\r\nIf-Match: *\r\n'
get_status "If-None-Match with a tag holding \", *,\" -> 200" 200 'If-None-Match: "a, *, b"\r\n'
get_status "If-Match with a tag holding \", *,\" -> 412" 412 'If-Match: "a, *, b"\r\n'
# The answer to a HEAD whose head is malformed has no content either
# (RFC 9110 9.3.2): a 400 for the missing Host, then the close.
no_body_then_close() { [[ "$1" == *$'\r\n\r\n<EOF>' ]]; }
r=$(printf 'HEAD /hello.txt HTTP/1.1\r\n\r\n' | raw 3)
check "HEAD with no Host -> 400, no body" bash -c 'grep -q "^HTTP/1.1 400 " <<<"$1"' _ "$r"
check "HEAD with no Host: the head, then the close" no_body_then_close "$r"
get_status "If-None-Match present: If-Modified-Since ignored -> 200" 200 \
  'If-None-Match: "x"\r\nIf-Modified-Since: Thu, 02 Jan 2020 03:04:05 GMT\r\n'
r=$(printf 'HEAD /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-3\r\nConnection: close\r\n\r\n' | raw 3)
check "HEAD with Range -> 200, the whole length, no body" bash -c '
  grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Content-Length: 20" <<<"$1" && ! grep -q "^hello" <<<"$1"' _ "$r"
get_status "If-Match with a tag that cannot match -> 412" 412 'If-Match: "nope"\r\n'
get_status "If-Match: * -> 200" 200 'If-Match: *\r\n'
get_status "If-Unmodified-Since before Last-Modified (with Range) -> 412" 412 \
  'If-Unmodified-Since: Wed, 01 Jan 2020 00:00:00 GMT\r\nRange: bytes=0-3\r\n'
get_status "If-Unmodified-Since equal to Last-Modified -> 200" 200 \
  'If-Unmodified-Since: Thu, 02 Jan 2020 03:04:05 GMT\r\n'
# A Last-Modified in the current second (here: a future mtime announced as
# now) is a weak validator: If-Range with it gets the whole file.
lm=$(printf 'HEAD /future.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3 | sed -n 's/^Last-Modified: \(.*\)\r$/\1/p')
r=$(printf 'GET /future.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-3\r\nIf-Range: %s\r\nConnection: close\r\n\r\n' "$lm" | raw 3)
check "If-Range with a Last-Modified of this second (weak) -> 200, the whole file" bash -c '
  [ -n "$2" ] && grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^from the future" <<<"$1"' _ "$r" "$lm"
r=$(printf 'GET /hello.txt/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "a file named with a slash after it (/hello.txt/) -> 404" status_is "$r" 404
r=$(printf 'GET /future.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "a file modified in the future: Last-Modified is not after Date" py -c '
import sys, email.utils as u
h = dict(l.split(": ", 1) for l in sys.argv[1].split("\r\n")[1:] if ": " in l)
sys.exit(0 if u.parsedate_to_datetime(h["Last-Modified"]) <= u.parsedate_to_datetime(h["Date"]) else 1)' "$r"
r=$(printf 'GET /sub/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "directory -> index.html" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Content-Type: text/html" <<<"$1" && grep -q "<p>index</p>" <<<"$1"' _ "$r"
r=$(printf 'GET /missing.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "missing file -> 404" status_is "$r" 404
# A directory named without its slash is redirected to it (relative links
# in its index would otherwise resolve against the parent); the query stays.
r=$(printf 'GET /sub?a=1%%20b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "directory without its slash -> 301, Location: /sub/ with the query" bash -c '
  grep -q "^HTTP/1.1 301 " <<<"$1" && grep -q "^Location: /sub/?a=1%20b"$'"'"'\r'"'"'"$" <<<"$1"' _ "$r"
# Bytes of the query that a URI's query may not hold are percent-encoded
# in Location (RFC 9110 10.2.2, RFC 3986 3.4); a valid escape stays.
r=$(printf 'GET /sub?q="<x>"{|}^%%ZZ&ok=%%41 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "301 with a query a URI may not hold -> Location percent-encodes it" bash -c '
  grep -q "^HTTP/1.1 301 " <<<"$1" && grep -q "^Location: /sub/?q=%22%3Cx%3E%22%7B%7C%7D%5E%25ZZ&ok=%41"$'"'"'\r'"'"'"$" <<<"$1"' _ "$r"
r=$(printf 'HEAD /sub HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "HEAD of a directory without its slash -> 301, no body" bash -c '
  grep -q "^HTTP/1.1 301 " <<<"$1" && grep -q "^Location: /sub/" <<<"$1" && [[ "$1" == *$'"'"'\r\n\r\n<EOF>'"'"' ]]' _ "$r"
r=$(printf 'GET /d%%20ir HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "redirect Location percent-encodes the path (/d%20ir/)" bash -c 'grep -q "^Location: /d%20ir/" <<<"$1"' _ "$r"
# A FIFO under the root: opened without waiting for a writer, not a
# regular file -> 404, and the server goes on serving.
if mkfifo "$ROOT/pipe" 2>/dev/null; then
  r=$(printf 'GET /pipe HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
  check "a FIFO under the root -> 404 at once" status_is "$r" 404
  r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
  check "after the FIFO request: files still served" status_is "$r" 200
else
  skipped "FIFO under the root" "mkfifo failed here"
fi

# ---- the way out of the root --------------------------------------------------
for target in '/../etc/passwd' '/%2e%2e/%2e%2e/etc/passwd' '/escape.txt' '/..%2f..%2fetc%2fpasswd'; do
  r=$(printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$target" | raw 3)
  check "$target -> 4xx, never the file" bash -c '
    head -n1 <<<"$1" | grep -q "^HTTP/1.1 4[0-9][0-9] " && ! grep -q "root:" <<<"$1" && ! grep -q SECRET <<<"$1"' _ "$r"
done

# ---- /fib -------------------------------------------------------------------------
r=$(printf 'GET /fib/20 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 5)
check "/fib/20 -> 6765" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^6765<EOF>" <<<"$1"' _ "$r"
r=$(printf 'GET /fib/30 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 10)
check "/fib/30 -> 832040 (parallel)" bash -c 'grep -q "^832040<EOF>" <<<"$1"' _ "$r"
for n in abc 99 -1 -0 +1 41 '' 10/ 1/0; do
  r=$(printf 'GET /fib/%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$n" | raw 3)
  check "/fib/$n -> 400" status_is "$r" 400
done

# ---- other spellings of a route's path -----------------------------------------
# Matched on the decoded, normalized path, as nginx matches its locations.
for target in '/plain%74ext' '//plaintext' '/x/../plaintext' '/./plaintext?q=1' 'http://t/plaintext'; do
  r=$(printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$target" | raw 3)
  check "$target -> /plaintext" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Hello, World!<EOF>" <<<"$1"' _ "$r"
done
for target in '/fib/%31%30' '/fib//10' '/x/../fib/10'; do
  r=$(printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$target" | raw 3)
  check "$target -> /fib/10" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^55<EOF>" <<<"$1"' _ "$r"
done
r=$(printf 'GET /plaintext/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "/plaintext/ -> 404 (another path)" status_is "$r" 404
# An absolute-form target of another scheme is not this plain-HTTP
# server's to answer (RFC 9110 7.4): 421, not the file.
for target in 'https://t/plaintext' 'HTTPS://t/hello.txt' 'ftp://t/hello.txt'; do
  r=$(printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$target" | raw 3)
  check "$target -> 421" status_is "$r" 421
done
r=$(printf 'GET HTTP://t/plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "HTTP://t/plaintext -> 200 (schemes are case-insensitive)" status_is "$r" 200
# RFC 9112 3.2: a Host that is not uri-host [ ":" port ] is a 400.
for host in 'a:b:c' 'h:port' '[::1' 'h%zz' ':80'; do
  r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: %s\r\n\r\n' "$host" | raw 3)
  check "Host: $host -> 400" status_is "$r" 400
done
# RFC 9110 4.2.1: an "http" URI with an empty host is invalid, to be rejected.
r=$(printf 'GET http://:80/plaintext HTTP/1.1\r\nHost: t\r\n\r\n' | raw 3)
check "GET http://:80/plaintext (no host) -> 400" status_is "$r" 400

# ---- a client that never reads ----------------------------------------------------
if [ "$SAN" = 1 ]; then
  skipped "a client that never reads, bodies split across sends: answers do not pile up in memory" \
    "AddressSanitizer's quarantine keeps freed memory in the RSS"
else
py - "$PORT" "$PID" >"$TMP/paced" 2>&1 <<'PY'
# A client that never reads sends, every 2 ms, 30 requests whose last
# body byte comes in its next send (each send within the server's first
# buffer, so each read ends inside a body): the answers must go out (into
# the socket, where they wait for the client), not pile up in the
# server's memory. Prints the server's RSS growth in KiB.
import socket, sys, time
port, pid = int(sys.argv[1]), sys.argv[2]
def rss_kib():
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
req = b"GET /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n"
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(2)
before = rss_kib()
sent = 0
try:
    s.sendall(req)
    t0 = time.time()
    while time.time() - t0 < 3:
        s.sendall(b"x" + req * 30)
        sent += 30
        time.sleep(0.002)
except OSError as e:
    print("stopped:", e)
time.sleep(0.2)
print("requests", sent, "growth_kib", rss_kib() - before)
s.close()
PY
check "a client that never reads, bodies split across sends: answers do not pile up in memory" bash -c '
  g=$(sed -n "s/.*growth_kib //p" "$1"); [ -n "$g" ] && [ "$g" -lt 2048 ] || { cat "$1"; false; }' _ "$TMP/paced"
  sed "s/^/  paced client: /" "$TMP/paced"
fi

# ---- a field of one value given twice is ignored (RFC 9110 13.1.3, 13.1.4, 14.2) ---------
later='Sat, 01 Jan 2050 00:00:00 GMT'
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\nConnection: close\r\n\r\n' "$later" | raw 3)
check "one If-Modified-Since after the file's date -> 304" status_is "$r" 304
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\nIf-Modified-Since: %s\r\nConnection: close\r\n\r\n' "$later" "$later" | raw 3)
check "If-Modified-Since given twice -> ignored, 200" status_is "$r" 200
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\nIf-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\nConnection: close\r\n\r\n' | raw 3)
check "If-Unmodified-Since given twice -> ignored, 200 (once: 412)" status_is "$r" 200
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-4\r\nRange: bytes=0-4\r\nConnection: close\r\n\r\n' | raw 3)
check "Range given twice -> the whole file, 200" status_is "$r" 200

# ---- other statuses ------------------------------------------------------------------
r=$(printf '%s / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$(head -c 9000 /dev/zero | tr '\0' G)" | raw 3)
check "a method longer than the request-line limit -> 501 (RFC 9112 3)" status_is "$r" 501
if py -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$ROOT/sock" 2>/dev/null; then
  r=$(printf 'GET /sock HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
  check "a Unix socket under the root -> 404" status_is "$r" 404
else
  skipped "a Unix socket under the root" "could not bind one"
fi
r=$(printf 'GET /fi%%62 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "/fi%62 -> the file named fib (only /fib/N is the route)" bash -c 'head -n1 <<<"$1" | grep -q "^HTTP/1.1 200 " && grep -q "^a file named fib$" <<<"$1"' _ "$r"

# ---- connection handling ----------------------------------------------------------
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nGET /fib/10 HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 5)
check "pipelining: 3 requests in one write, 3 responses in order" bash -c '
  [ "$(grep -o "HTTP/1.1 200 " <<<"$1" | wc -l)" = 3 ] &&
  tr -d "\r\n" <<<"$1" | grep -q "Hello, World!HTTP/1.1 200.*55HTTP/1.1 200.*hello, static world<EOF>"' _ "$r"
r=$(printf 'GET /plaintext HTTP/1.0\r\n\r\n' | raw 3)
check "HTTP/1.0 (raw) closes" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "<EOF>$" <<<"$1"' _ "$r"
if [ "$HAVE_CURL" = 1 ]; then
  r=$(curl -si -m 3 --http1.0 "$URL/plaintext")
  check "HTTP/1.0 (curl --http1.0): Connection: close" bash -c 'grep -qi "^Connection: close" <<<"$1" && grep -q "Hello, World!" <<<"$1"' _ "$r"
  r=$(curl -s -m 3 -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' "$URL/plaintext" "$URL/hello.txt" | tail -n1)
  check "curl: two requests over one connection" test "$r" = "200 0"
  r=$(curl -s -m 3 -D - -o /dev/null -r 0-4 "$URL/hello.txt")
  check "curl: -r 0-4 -> 206" bash -c 'grep -q "^HTTP/1.1 206" <<<"$1"' _ "$r"
  r=$(curl -s -m 3 --path-as-is -o /dev/null -w '%{http_code}' "$URL/../etc/passwd")
  check "curl --path-as-is /../etc/passwd -> 4xx" bash -c '[[ $1 == 4* ]]' _ "$r"
else
  skipped "curl checks" "curl not installed"
fi
r=$(printf 'POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "POST with a body -> 405 with Allow; the next request still served" bash -c '
  grep -q "^HTTP/1.1 405 " <<<"$1" && grep -q "^Allow: GET, HEAD" <<<"$1" && grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"
r=$(printf 'POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "chunked body decoded and dropped" bash -c 'grep -q "^HTTP/1.1 405 " <<<"$1" && grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"
# A chunk line ended by a bare LF: a proxy could frame it otherwise, so it
# is a 400 and the connection closes; what followed it is not answered.
r=$(printf 'POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2;\nAB\r\n0\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n' | raw 3)
check "chunk line ended by a bare LF -> 400, close, nothing after it served" bash -c '
  grep -q "^HTTP/1.1 400 " <<<"$1" && ! grep -q "Hello, World!" <<<"$1" && grep -q "<EOF>" <<<"$1"' _ "$r"
r=$(printf 'BREW /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "unknown method -> 501" status_is "$r" 501

# ---- timeouts and idle connections (the waits server) ------------------------------
if [ -n "$PORTW" ]; then
  wait "${WAITS[@]}"
  # The answer to the first request goes out while the second one's body
  # is awaited (before: only at the 1 s body timeout).
  r=$(<"$TMP/w.answer-before-body")
  check "an answer goes out while the next request's body is awaited" bash -c '
    grep -q "^Hello, World!<OPEN>$" <<<"$1" && [ "$(grep -c "^HTTP/1.1 " <<<"$1")" = 1 ]' _ "$r"
  r=$(<"$TMP/w.head-body-408")
  check "HEAD whose body times out -> 408 with no content" bash -c '
    head -n1 <<<"$1" | grep -q "^HTTP/1.1 408 " && grep -q "^<EOF>$" <<<"$1" && ! grep -q "Request Timeout<" <<<"$1" && [ "$(tail -n2 <<<"$1" | head -n1 | tr -d "\r")" = "" ]' _ "$r"
  r=$(<"$TMP/w.head-head-408")
  check "HEAD whose head times out -> 408 with no content" bash -c '
    head -n1 <<<"$1" | grep -q "^HTTP/1.1 408 " && grep -q "^<EOF>$" <<<"$1" && ! grep -q "Request Timeout<" <<<"$1" && [ "$(tail -n2 <<<"$1" | head -n1 | tr -d "\r")" = "" ]' _ "$r"
  # The head's method is read before the wait for its rest, which moves the
  # buffered bytes (behind an answered request) or frees the buffer (a head
  # that filled the first 2 KiB: under ASAN a use after free).
  r=$(<"$TMP/w.get-head-408")
  check "a GET, then a HEAD whose head times out -> 200, then 408 with no content" bash -c '
    head -n1 <<<"$1" | grep -q "^HTTP/1.1 200 " && grep -q "HTTP/1.1 408 " <<<"$1" && grep -q "^<EOF>$" <<<"$1" && ! grep -q "Request Timeout<" <<<"$1" && [ "$(tail -n2 <<<"$1" | head -n1 | tr -d "\r")" = "" ]' _ "$r"
  r=$(<"$TMP/w.head-2k-408")
  check "a HEAD head of 2 KiB that times out -> 408 with no content" bash -c '
    head -n1 <<<"$1" | grep -q "^HTTP/1.1 408 " && grep -q "^<EOF>$" <<<"$1" && ! grep -q "Request Timeout<" <<<"$1" && [ "$(tail -n2 <<<"$1" | head -n1 | tr -d "\r")" = "" ]' _ "$r"
  r=$(<"$TMP/w.stray-crlf")
  check "a stray CRLF after a request: one answer, no 408 past the header timeout, still open" bash -c '
    [ "$(grep -c "^HTTP/1.1 " <<<"$1")" = 1 ] && grep -q "<OPEN>$" <<<"$1"' _ "$r"
  r=$(<"$TMP/w.keep-alive")
  check "HTTP/1.1 keeps the connection open" bash -c 'grep -q "^Connection: keep-alive" <<<"$1" && grep -q "<OPEN>$" <<<"$1"' _ "$r"
  # A head larger than a connection's first buffer (which grows to hold it,
  # then shrinks while the connection waits), then a small pipelined one.
  r=$(<"$TMP/w.head-12k")
  check "a 12 KB head and a pipelined request after it: both answered, connection open" bash -c '
    [ "$(grep -o "HTTP/1.1 200 " <<<"$1" | wc -l)" = 2 ] && tr -d "\r\n" <<<"$1" | grep -q "Hello, World!HTTP/1.1 200.*55<OPEN>$"' _ "$r"
  # A body that comes after its head, in a later read: the answer is to the
  # head (the body read reuses the buffer the head was parsed in), and a
  # body trickled slower than --body-timeout (1 s) is answered 408.
  py_count "$TMP/w.bodies" bodies.py
  py_count "$TMP/w.empty-lines" empty_lines.py
  # closed_after NAME: the client NAME saw the close, 0.8 to 3.5 s after it started.
  closed_after() {
    local t0 t1
    read -r t0 t1 <"$TMP/w.$1.t"
    grep -q "<EOF>$" "$TMP/w.$1" && awk -v t0="$t0" -v t1="$t1" 'BEGIN { d = t1 - t0; exit !(0.8 <= d && d <= 3.5) }'
  }
  check "slowloris: partial head closed after the header timeout (1 s)" closed_after slowloris
  check "silent new connection closed after the header timeout" closed_after silent
  r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | py "$HERE/httpd/raw.py" "$PORTW" 3)
  check "after those, the waits server still serves /plaintext" bash -c 'grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"
  stop_server "waits server: SIGTERM -> exit 0 within 8 s" "$PIDW"
  [ "$STOPPED" = 1 ] && PIDW=
  sanitizer_clean "waits server stderr: no sanitizer report" "$TMP/errw"
  no_connection_errors "waits server stderr: no connection errors" "$TMP/errw"
fi

# File bodies larger than the socket buffers (io::send_file waits for
# room), a Range inside one, pipelined, one not in the page cache, and
# clients that reset mid-body.
py_checks "$HERE/httpd/large_files.py" "$PORT" "$ROOT"

# File bodies up to 8 KiB, read into the answer when cached: whole at
# the size limit and past it, a Range, pipelined with a HEAD, rewritten
# between requests, and one not in the page cache (send_file's path).
py_checks "$HERE/httpd/small_files.py" "$PORT" "$ROOT"
# Clients that pipeline requests for small files and read nothing.
if [ "$SAN" = 1 ]; then
  skipped "40 pipelining clients that read nothing: resident memory grows < 8 MiB" \
    "AddressSanitizer's quarantine keeps freed memory in the RSS"
else
  py_checks "$HERE/httpd/slow_readers.py" pipeline "$PORT" "$PID" "$ROOT"
fi

# ---- malformed requests: the parser's status, then close ---------------------------------
r=$(printf 'GARBAGE\r\n\r\n' | raw 3)
check "malformed request line -> 400 and close" bash -c 'grep -q "^HTTP/1.1 400 " <<<"$1" && grep -q "^Connection: close" <<<"$1" && grep -q "<EOF>$" <<<"$1"' _ "$r"
big=$(head -c 20000 /dev/zero | tr '\0' a)
r=$(printf 'GET / HTTP/1.1\r\nHost: t\r\nX-Big: %s\r\n\r\n' "$big" | raw 3)
check "oversized header -> 431 and close" bash -c 'grep -q "^HTTP/1.1 431 " <<<"$1" && grep -q "<EOF>$" <<<"$1"' _ "$r"
many=$(for i in $(seq 150); do printf 'X-H%d: v\r\n' "$i"; done)
r=$(printf 'GET / HTTP/1.1\r\nHost: t\r\n%s\r\n\r\n' "$many" | raw 3)
check "too many headers -> 431 and close" bash -c 'grep -q "^HTTP/1.1 431 " <<<"$1" && grep -q "<EOF>$" <<<"$1"' _ "$r"
r=$(printf 'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 12abc\r\n\r\n' | raw 3)
check "bad Content-Length -> 400 and close" bash -c 'grep -q "^HTTP/1.1 400 " <<<"$1" && grep -q "<EOF>$" <<<"$1"' _ "$r"
r=$(printf 'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999\r\n\r\n' | raw 3)
check "body over the limit -> 413" status_is "$r" 413
# Answers decided before the body comes: a whole upload before reading
# gets its 413; Expect: 100-continue gets an error at once, with no 100.
py_checks "$HERE/httpd/early_answers.py" "$PORT"

r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "after all that, /plaintext still served" bash -c 'grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"

# ---- fuzz: random bytes, mutated requests, bad bodies, dropped connections ----------
# Every response must be well formed (tests/httpd/fuzz.py says what that means).
fuzz_out=$(timeout $((FUZZ_SECONDS + 60)) "$PY" -S "$HERE/httpd/fuzz.py" "$PORT" "$FUZZ_SECONDS" "${HTTPD_FUZZ_SEED:-$$}" 2>&1)
fuzz_rc=$?
echo "$fuzz_out" | sed 's/^/  /'
if [ "$fuzz_rc" = 0 ]; then ok "fuzz (${FUZZ_SECONDS} s): every response well formed, /plaintext served afterwards"
else bad "fuzz (${FUZZ_SECONDS} s): every response well formed, /plaintext served afterwards" "exit $fuzz_rc"; fi
check "fuzz: server still running" kill -0 "$PID"

# ---- wrk: a real client under load ------------------------------------------------------------
if command -v wrk >/dev/null; then
  w=$(timeout 30 wrk -t1 -c64 -d3s --timeout 10s "$URL/plaintext" 2>&1)
  echo "$w" | grep -E 'requests in|Requests/sec|Socket errors|Non-2xx' | sed 's/^ */  wrk: /'
  check "wrk -t1 -c64 -d3s /plaintext: requests done, 0 socket errors, 0 non-2xx" bash -c '
    grep -qE "^ *[1-9][0-9]* requests in" <<<"$1" && ! grep -q "Socket errors" <<<"$1" &&
    ! grep -q "Non-2xx" <<<"$1"' _ "$w"
  r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
  check "after wrk, /plaintext still served" bash -c 'grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"
else
  skipped "wrk load check" "wrk not installed"
fi

# ---- a graceful exit ---------------------------------------------------------------------
# An idle keep-alive connection must not hold the shutdown up.
rm -f "$TMP/idle.mark"
(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n' | raw 6 "$TMP/idle.mark" >"$TMP/idle") &
IDLE=$!
for _ in $(seq 50); do [ -e "$TMP/idle.mark" ] && break; sleep 0.1; done
stop_server "SIGTERM -> exit 0 within 8 s" "$PID"
[ "$STOPPED" = 1 ] && PID=
wait "$IDLE" 2>/dev/null
check "SIGTERM closes an idle keep-alive connection" bash -c 'grep -q "Hello, World!<EOF>" "$1"' _ "$TMP/idle"
sanitizer_clean "server stderr: no sanitizer report" "$TMP/err"
no_connection_errors "server stderr: no connection errors" "$TMP/err"

# ---- a graceful exit under load -------------------------------------------------------------
# Computations that outlast --shutdown-timeout stop with a 503; each busy
# connection ends after the request in hand; new connections are refused.
py_checks "$HERE/httpd/shutdown.py" "$BIN" "$TMP/err4"
sanitizer_clean "shutdown-under-load server stderr: no sanitizer report" "$TMP/err4"
# A head the grace period cuts short did not time out: no 408.
py_checks "$HERE/httpd/shutdown_head.py" "$BIN" "$TMP/err-head"
sanitizer_clean "shutdown_head server stderr: no sanitizer report" "$TMP/err-head"

# ---- /fib for clients that pipeline or go ------------------------------------------------
# The answers batched before a /fib/40 go out before it is computed (a
# client that has gone is noticed there), and the access log has the
# address of a client that reset before its answer was made.
py_checks "$HERE/httpd/fib_clients.py" "$BIN" "$TMP/err-fib"
sanitizer_clean "fib_clients server stderr: no sanitizer report" "$TMP/err-fib"

# ---- descriptor exhaustion -------------------------------------------------------------------
# 150 held connections against a server with 64 descriptors: accept fails
# with EMFILE; the server must wait and retry (not spin, not die), keep
# serving what it has, and accept again once the clients are gone.
start_server "ulimit -n 64" "$TMP/out2" "$TMP/err2" \
  bash -c 'ulimit -n 64 && exec "$@"' _ "$BIN" --port 0 --workers 2 --header-timeout 10 --idle-timeout 10
PID2=$SPID PORT2=$SPORT
if [ -n "$PORT2" ]; then
  py_checks "$HERE/httpd/exhaust.py" "$PORT2" "$PID2" 150 1.5
  stop_server "ulimit -n 64 server: SIGTERM -> exit 0" "$PID2"
  [ "$STOPPED" = 1 ] && PID2=
  sanitizer_clean "ulimit -n 64 server stderr: no sanitizer report" "$TMP/err2"
fi

# ---- slow readers: their clients ------------------------------------------------------------
# Slow clients spend their seconds idle: they run in the background, side
# by side, each against servers of its own, while the checks that follow
# (none measures CPU time or a latency) run; their verdicts come at the
# end.
# A large answer read slowly but steadily is sent whole (a send's timeout
# counts progress).
start_server "--idle-timeout 1" "$TMP/out-reader" "$TMP/err-reader" "$BIN" --port 0 --root "$ROOT" --workers 2 --idle-timeout 1
PID9=$SPID PORT9=$SPORT
SLOW=()
if [ -n "$PORT9" ]; then
  py_run "$TMP/slow-readers" "$HERE/httpd/slow_readers.py" slow "$PORT9" "$ROOT" &
  SLOW+=($!)
fi
# Clients that pipeline and read the answers slowly: the next request's
# head and body timeouts count from the answers' send, and a shutdown
# with a request unread ends the connection without a reset.
py_run "$TMP/slow-pipelining" "$HERE/httpd/slow_pipelining.py" "$BIN" "$TMP/err-slow" &
SLOW+=($!)

# ---- /fib on a separate pool (--fib-pool) -----------------------------------------------
# Each /fib request moves its coroutine to the pool and back (resume_on);
# concurrent ones must all come back with the right value.
"$BIN" --port 0 --workers 2 --fib-pool 2 --access-log >"$TMP/out3" 2>"$TMP/err3" &
PID3=$!
for _ in $(seq 50); do grep -q listening "$TMP/out3" && break; sleep 0.1; done
PORT3=$(sed -nE 's/^parkway-httpd: listening on 127\.0\.0\.1:([0-9]+) \(2 workers, \/fib on a separate pool\)$/\1/p' "$TMP/out3")
if [ -z "$PORT3" ]; then
  bad "--fib-pool server started" "$(cat "$TMP/out3" "$TMP/err3")"
else
  FIB3=()
  for i in $(seq 8); do
    (printf 'GET /fib/%d HTTP/1.1\r\nHost: t\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' $((18 + i)) |
       py "$HERE/httpd/raw.py" "$PORT3" 10 >"$TMP/fib3.$i") &
    FIB3+=($!)
  done
  wait "${FIB3[@]}"
  good=0
  for i in $(seq 8); do
    a=0 b=1
    for _ in $(seq $((18 + i))); do c=$((a + b)); a=$b; b=$c; done
    want=$a
    tr -d '\r\n' <"$TMP/fib3.$i" | grep -q "HTTP/1.1 200 .*${want}HTTP/1.1 200 .*Hello, World!<EOF>" && good=$((good + 1))
  done
  check "--fib-pool: 8 concurrent /fib/19..26 right, each followed by /plaintext" test "$good" = 8
  # The access log quotes the request line: a '"' in the target (which
  # the parser allows) must not end the field and forge the rest.
  r=$(printf 'GET /a"_200_"x\\y HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' |
        py "$HERE/httpd/raw.py" "$PORT3" 3)
  check "access log: '\"' and '\\\\' in a target are written \\xHH" \
    grep -qF '"GET /a\x22_200_\x22x\x5Cy HTTP/1.1" 404 ' "$TMP/err3"
  # Each line: the peer, the time (UTC, Common Log Format), the request
  # line, the status and the body's bytes.
  check "access log: peer [time] \"request line\" status bytes" \
    grep -qE '^127\.0\.0\.1:[0-9]+ \[[0-3][0-9]/[A-Z][a-z]{2}/[0-9]{4}:[0-2][0-9]:[0-5][0-9]:[0-6][0-9] \+0000\] "GET /a\\x22_200_\\x22x\\x5Cy HTTP/1\.1" 404 [0-9]+$' "$TMP/err3"
  stop_server "--fib-pool server: SIGTERM -> exit 0" "$PID3"
  [ "$STOPPED" = 1 ] && PID3=
  sanitizer_clean "--fib-pool server stderr: no sanitizer report" "$TMP/err3"
fi

# ---- the access log's bytes: what went, not what was announced ------------------------
# A client that reads the head and a few bytes of a 16 MiB file, then
# resets the connection: its line has the status and fewer bytes than the
# file's (it had the whole length, logged before the send).
LOGROOT=$TMP/logroot
mkdir -p "$LOGROOT"
head -c $((16 << 20)) /dev/zero > "$LOGROOT/big.bin"
start_server "access-log bytes" "$TMP/outlb" "$TMP/errlb" "$BIN" --port 0 --workers 2 --root "$LOGROOT" --access-log
if [ -n "$SPORT" ]; then
  py - "$SPORT" <<'PYEOF'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
s.recv(1000)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
s.close()
PYEOF
  curl -s -o /dev/null "http://127.0.0.1:$SPORT/big.bin"  # whole: its line has every byte
  for _ in $(seq 50); do [ "$(grep -c '"GET /big.bin' "$TMP/errlb")" -ge 2 ] && break; sleep 0.1; done
  check "access log: a download cut short logs the bytes sent, not the file's length" \
    bash -c 'n=$(grep -m1 "\"GET /big.bin HTTP/1.1\" 200 " "$1" | sed -E "s/.* //"); [ -n "$n" ] && [ "$n" -lt $((16 << 20)) ]' _ "$TMP/errlb"
  check "access log: a whole download logs the file's length" grep -q '"GET /big.bin HTTP/1.1" 200 16777216$' "$TMP/errlb"
  # Pipelined answers batched for one send, to a client that reset while
  # the /fib/34 among them was computed: their batch fails, and their
  # lines say that none of their bodies went (logged as each joined the
  # batch, they would read the whole length). The answer before the /fib
  # went out first, whole, before the reset.
  py - "$SPORT" <<'PYEOF'
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /plaintext?before-fib HTTP/1.1\r\nHost: t\r\n\r\n"
          b"GET /fib/34 HTTP/1.1\r\nHost: t\r\n\r\n"
          b"GET /plaintext?after-fib HTTP/1.1\r\nHost: t\r\n\r\n")
got = b""
while b"Hello, World!" not in got:
    got += s.recv(1000)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset
s.close()
PYEOF
  for _ in $(seq 100); do grep -q 'plaintext?after-fib' "$TMP/errlb" && break; sleep 0.1; done
  check "access log: an answer sent before the client reset logs its body's bytes" \
    grep -q '"GET /plaintext?before-fib HTTP/1.1" 200 13$' "$TMP/errlb"
  check "access log: answers batched for a client that reset log no bytes" \
    bash -c 'grep -q "\"GET /fib/34 HTTP/1.1\" 200 0$" "$1" && grep -q "\"GET /plaintext?after-fib HTTP/1.1\" 200 0$" "$1"' _ "$TMP/errlb"
  stop_server "access-log bytes server: SIGTERM -> exit 0" "$SPID"
fi

# ---- a kernel that refuses io_uring ---------------------------------------------------------
# Under a seccomp filter that fails io_uring_setup with EPERM (a
# container's profile), the server says so and exits 1 before its startup
# line: every one of its operations would fail, the signal's read too.
timeout 10 "$PY" -S "$HERE/httpd/without_io_uring.py" "$BIN" --port 0 >"$TMP/outnu" 2>"$TMP/errnu"; rc=$?
if [ "$rc" = 3 ]; then
  skipped "no io_uring: the refusal and no startup line" "$(cat "$TMP/errnu")"
else
  check "no io_uring: exit 1, not a server that serves nothing (exit $rc)" test "$rc" = 1
  check "no io_uring: the error names io_uring, no startup line" \
    bash -c 'grep -q "parkway-httpd: io_uring: .*Operation not permitted" "$1" && ! grep -q listening "$2"' _ "$TMP/errnu" "$TMP/outnu"
fi

# ---- a root that a deploy switches --------------------------------------------------------
# --root names a symlink to a release; a deploy points it at the next one
# (ln -sfn, then mv -T: atomic) and deletes the old one. The server serves
# the new release within a second or so, not the old one (then 404s).
SWAP=$TMP/swap
mkdir -p "$SWAP/rel1" "$SWAP/rel2" "$SWAP/rel3"
printf 'release 1\n' > "$SWAP/rel1/version.txt"
printf 'release 2\n' > "$SWAP/rel2/version.txt"
printf 'release 3\n' > "$SWAP/rel3/version.txt"
ln -s rel1 "$SWAP/current"
start_server "switched root" "$TMP/outsw" "$TMP/errsw" "$BIN" --port 0 --workers 2 --root "$SWAP/current"
if [ -n "$SPORT" ]; then
  r=$(curl -s "http://127.0.0.1:$SPORT/version.txt")
  check "switched root: the first release served" test "$r" = "release 1"
  ln -s rel2 "$SWAP/current.new" && mv -T "$SWAP/current.new" "$SWAP/current" && rm -r "$SWAP/rel1"
  for _ in $(seq 30); do
    r=$(curl -s "http://127.0.0.1:$SPORT/version.txt")
    [ "$r" = "release 2" ] && break
    sleep 0.1
  done
  check "switched root: the next release served within 3 s of the switch" test "$r" = "release 2"
  # SIGHUP (nginx's reload, a systemd unit's ExecReload) looks the root up
  # at once: the first request after the server's note of it gets the
  # next release. SIGUSR1 (nginx's reopening of its logs) is only noted
  # here, with no log file to reopen.
  kill -USR1 "$SPID"
  for _ in $(seq 30); do grep -q "SIGUSR1" "$TMP/errsw" && break; sleep 0.1; done
  check "switched root: SIGUSR1 noted on stderr" grep -q "parkway-httpd: SIGUSR1: no log file to reopen" "$TMP/errsw"
  r=$(curl -s "http://127.0.0.1:$SPORT/version.txt")
  check "switched root: still serving after SIGUSR1" test "$r" = "release 2"
  ln -s rel3 "$SWAP/current.new" && mv -T "$SWAP/current.new" "$SWAP/current" && rm -r "$SWAP/rel2"
  kill -HUP "$SPID"
  for _ in $(seq 30); do grep -q "SIGHUP" "$TMP/errsw" && break; sleep 0.1; done
  check "switched root: SIGHUP noted on stderr" grep -q "parkway-httpd: SIGHUP: the root is looked up again" "$TMP/errsw"
  r=$(curl -s "http://127.0.0.1:$SPORT/version.txt")
  check "switched root: after SIGHUP the next request gets the next release ($r)" test "$r" = "release 3"
  stop_server "switched root server: SIGQUIT (nginx's graceful stop) -> exit 0" "$SPID" QUIT
fi

# ---- open-file cache -----------------------------------------------------------------------
# Each worker keeps the files it served open for a second (--file-cache,
# tools/httpd/open_file_cache.hpp): a file written in place is served as
# written at once; a path renamed over, deleted or a directory's index
# replaced is served as it is now within a second or so; an answer from
# a cached descriptor of a file too large for the answer's own send
# (send_file) is the file's bytes and leaves no descriptor behind; the
# cache holds at most --file-cache descriptors a worker; --file-cache 0
# opens every file.
FC=$TMP/filecache
mkdir -p "$FC/sub"
printf 'first\n' > "$FC/a.txt"
printf 'index one\n' > "$FC/sub/index.html"
head -c 200000 /dev/urandom > "$FC/big.bin"
for i in $(seq 20); do printf 'file %s\n' "$i" > "$FC/f$i.txt"; done
# fc_wait URL WANT: fetches URL until its body is WANT, for at most 3 s; the last body in $r.
fc_wait() {
  for _ in $(seq 30); do r=$(curl -s "$1"); [ "$r" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
start_server "open-file cache" "$TMP/outfc" "$TMP/errfc" "$BIN" --port 0 --workers 1 --root "$FC" --file-cache 8
if [ -n "$SPORT" ]; then
  U=http://127.0.0.1:$SPORT
  r=$(curl -s "$U/a.txt")
  check "open-file cache: served" test "$r" = "first"
  printf 'FIRST\n' > "$FC/a.txt"
  r=$(curl -s "$U/a.txt")
  check "open-file cache: written in place, same length: served as written at once ($r)" test "$r" = "FIRST"
  printf 'a longer second version\n' > "$FC/a.txt"
  r=$(curl -s "$U/a.txt")
  check "open-file cache: written in place, longer: served whole at once ($r)" test "$r" = "a longer second version"
  printf 'renamed over\n' > "$FC/a.new" && mv "$FC/a.new" "$FC/a.txt"
  check "open-file cache: a file renamed over the path served within 3 s" fc_wait "$U/a.txt" "renamed over"
  rm "$FC/a.txt"
  code=0
  for _ in $(seq 30); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$U/a.txt"); [ "$code" = 404 ] && break; sleep 0.1
  done
  check "open-file cache: a deleted file is a 404 within 3 s ($code)" test "$code" = 404
  r=$(curl -s "$U/sub/")
  check "open-file cache: a directory's index served" test "$r" = "index one"
  printf 'index two\n' > "$FC/sub/i.new" && mv "$FC/sub/i.new" "$FC/sub/index.html"
  check "open-file cache: a directory's index replaced served within 3 s" fc_wait "$U/sub/" "index two"
  want=$(md5sum < "$FC/big.bin")
  got1=$(curl -s "$U/big.bin" | md5sum); got2=$(curl -s "$U/big.bin" | md5sum)
  check "open-file cache: a 200 KB file sent twice, the same bytes both times" test "$got1 $got2" = "$want $want"
  for i in $(seq 20); do curl -s -o /dev/null "$U/f$i.txt"; done
  r=$(curl -s "$U/f20.txt")
  check "open-file cache: twenty files in turn, the last served right" test "$r" = "file 20"
  # Descriptors of regular files the server holds: at most 8 cached (one
  # worker), none left from the sends of big.bin.
  held=$(find "/proc/$SPID/fd" -lname "$FC/*" 2>/dev/null | wc -l)
  check "open-file cache: at most 8 files held open ($held)" test "$held" -le 8
  stop_server "open-file cache server: SIGTERM -> exit 0" "$SPID"
fi
# Under a descriptor limit of 96 with 2 workers, the default 64 a worker
# comes down to 96 / 8 / 2 = 6.
start_server "open-file cache, 96 descriptors" "$TMP/outfc1" "$TMP/errfc1" \
  bash -c 'ulimit -n 96 && exec "$@"' _ "$BIN" --port 0 --workers 2 --root "$FC"
if [ -n "$SPORT" ]; then
  for i in $(seq 20); do curl -s -o /dev/null "http://127.0.0.1:$SPORT/f$i.txt"; done
  held=$(find "/proc/$SPID/fd" -lname "$FC/*" 2>/dev/null | wc -l)
  check "open-file cache: at most 2 x 6 files held open under 96 descriptors ($held)" test "$held" -le 12
  stop_server "open-file cache, 96 descriptors server: SIGTERM -> exit 0" "$SPID"
fi
start_server "no open-file cache" "$TMP/outfc0" "$TMP/errfc0" "$BIN" --port 0 --workers 1 --root "$FC" --file-cache 0
if [ -n "$SPORT" ]; then
  U=http://127.0.0.1:$SPORT
  printf 'one\n' > "$FC/b.txt"
  r1=$(curl -s "$U/b.txt")
  printf 'two\n' > "$FC/b.new" && mv "$FC/b.new" "$FC/b.txt"
  r2=$(curl -s "$U/b.txt")
  check "--file-cache 0: a file renamed over the path served at once ($r1, $r2)" test "$r1 $r2" = "one two"
  held=$(find "/proc/$SPID/fd" -lname "$FC/*" 2>/dev/null | wc -l)
  check "--file-cache 0: no file held open ($held)" test "$held" = 0
  stop_server "no open-file cache server: SIGTERM -> exit 0" "$SPID"
fi

# ---- permissions ---------------------------------------------------------------------------
# A directory that may be searched but not read (no read bit for anyone)
# serves its index.html and redirects its name without the slash, as a
# readable one does; a file nobody may read is a 403. The server runs as
# nobody when this script runs as root, for whom no permission bit counts.
PERM=$TMP/perm
mkdir -p "$PERM/xonly"
printf 'index of a searchable directory\n' > "$PERM/xonly/index.html"
printf 'unreadable\n' > "$PERM/locked.txt"
chmod 0644 "$PERM/xonly/index.html"; chmod 0311 "$PERM/xonly"; chmod 0000 "$PERM/locked.txt"; chmod 0755 "$PERM"
AS=()
if [ "$(id -u)" = 0 ]; then
  AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  chmod 0711 "$TMP"  # nobody may pass through to the root
fi
if [ "${#AS[@]}" -gt 0 ] && ! command -v setpriv >/dev/null; then
  skipped "permission checks" "running as root and setpriv (util-linux) is missing"
else
  start_server "permissions" "$TMP/out5" "$TMP/err5" "${AS[@]}" "$BIN" --port 0 --root "$PERM" --workers 1
  PID5=$SPID PORT5=$SPORT
  if [ -n "$PORT5" ]; then
    raw5() { printf 'GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$1" | py "$HERE/httpd/raw.py" "$PORT5" 3; }
    r=$(raw5 /xonly/)
    check "a directory without read permission: its index.html -> 200" bash -c '
      grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^index of a searchable directory" <<<"$1"' _ "$r"
    r=$(raw5 /xonly)
    check "a directory without read permission, no slash -> 301 to /xonly/" bash -c '
      grep -q "^HTTP/1.1 301 " <<<"$1" && grep -q "^Location: /xonly/" <<<"$1"' _ "$r"
    r=$(raw5 /locked.txt)
    check "a file without read permission -> 403" status_is "$r" 403
    stop_server "permissions server: SIGTERM -> exit 0" "$PID5"
    [ "$STOPPED" = 1 ] && PID5=
    sanitizer_clean "permissions server stderr: no sanitizer report" "$TMP/err5"
  fi
  # The same directory as the root itself: served as it is below the root
  # (the server refused to start, "Permission denied", before).
  start_server "a root without read permission" "$TMP/out5" "$TMP/err5" "${AS[@]}" "$BIN" --port 0 --root "$PERM/xonly" --workers 1
  PID5=$SPID PORT5=$SPORT
  if [ -n "$PORT5" ]; then
    r=$(raw5 /)
    check "a root without read permission (0311): its index.html -> 200" bash -c '
      grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^index of a searchable directory" <<<"$1"' _ "$r"
    stop_server "root without read permission server: SIGTERM -> exit 0" "$PID5"
    [ "$STOPPED" = 1 ] && PID5=
  else
    kill -KILL "$PID5" 2>/dev/null; PID5=
  fi
fi

# ---- signals and start-up errors -----------------------------------------------------------
get6() { printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | py "$HERE/httpd/raw.py" "$SPORT" 3; }
# pipeline48 C: 48 pipelined GETs of /plaintext on one connection, each with
# a 2 KB query of the letter C, so that their access lines (96 KB) overfill
# a pipe's 64 KiB; prints how many were answered 200.
pipeline48() {
  local q; q=$(head -c 2000 /dev/zero | tr '\0' "$1")
  for _ in $(seq 48); do printf 'GET /plaintext?%s HTTP/1.1\r\nHost: t\r\n\r\n' "$q"; done |
    py "$HERE/httpd/raw.py" "$SPORT" 3 | grep -o "HTTP/1.1 200 " | wc -l
}

# The access log on a pipe whose reader is gone: its writes fail (EPIPE),
# the server goes on answering (no SIGPIPE).
start_server "closed-pipe" "$TMP/out6" - "$BIN" --port 0 --workers 1 --access-log 2> >(exit 0)
PID6=$SPID
if [ -n "$SPORT" ]; then
  sleep 0.3  # the pipe's reader has gone
  r=$(get6); r2=$(get6)
  check "stderr a pipe nobody reads, access log on: answered, twice" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^HTTP/1.1 200 " <<<"$2"' _ "$r" "$r2"
  stop_server "closed-pipe server: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
fi

# The access log on a pipe whose reader holds it open and never reads:
# once the pipe is full, lines are dropped (and counted), and the server
# goes on answering and stops at SIGTERM (a worker blocked in write(2)
# held every operation of its ring, SIGTERM's read among them).
mkfifo "$TMP/logfifo"
( exec 3<>"$TMP/logfifo"; exec sleep 60 ) &
HOLDLOG=$!
start_server "stalled-log" "$TMP/out6b" "$TMP/logfifo" "$BIN" --port 0 --workers 2 --access-log
PID6=$SPID
if [ -n "$SPORT" ]; then
  n=$(pipeline48 a)
  check "access log to a pipe nobody reads: 48 pipelined requests answered (got $n)" test "$n" = 48
  r=$(get6)
  check "access log to a pipe nobody reads: a new connection answered" status_is "$r" 200
  stop_server "access log to a pipe nobody reads: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
fi
kill "$HOLDLOG" 2>/dev/null; wait "$HOLDLOG" 2>/dev/null

# The access log on a pipe someone made non-blocking (O_NONBLOCK belongs to
# the open file, shared with whoever else holds it), whose reader starts
# late: a write that finds the pipe full fails with EAGAIN. The log waits
# for room and loses no line (it dropped the rest of its batch).
mkfifo "$TMP/nbfifo"
( exec 3<"$TMP/nbfifo"; sleep 2; cat <&3 >"$TMP/nblog" ) &
NBREADER=$!
start_server "non-blocking log" "$TMP/out6c" "$TMP/nbfifo" "$PY" -S -c 'import fcntl, os, sys
fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_NONBLOCK)
os.execv(sys.argv[1], sys.argv[1:])' "$BIN" --port 0 --workers 2 --access-log
PID6=$SPID
if [ -n "$SPORT" ]; then
  n=$(pipeline48 b)
  check "access log to a non-blocking pipe read late: 48 pipelined requests answered (got $n)" test "$n" = 48
  sleep 1.5  # the reader has begun
  stop_server "access log to a non-blocking pipe read late: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
  for _ in $(seq 50); do kill -0 "$NBREADER" 2>/dev/null || break; sleep 0.1; done
  n=$(grep -c '"GET /plaintext?bbbb' "$TMP/nblog" 2>/dev/null)
  check "access log to a non-blocking pipe read late: all 48 lines written (got ${n:-0})" test "${n:-0}" = 48
fi
kill "$NBREADER" 2>/dev/null; wait "$NBREADER" 2>/dev/null

# The access log to a file that reaches its size limit (RLIMIT_FSIZE,
# SIGXFSZ ignored): writes fail with EFBIG. The lines they carried are
# counted and reported at SIGTERM, which the file has room for again (it
# was truncated; stderr appends): written and lost add up to every line.
start_server "size-limited log" "$TMP/out6d" - bash -c 'trap "" XFSZ; ulimit -f 16; exec "$@" 2>>"$0"' \
  "$TMP/fszlog" "$BIN" --port 0 --workers 2 --access-log
PID6=$SPID
if [ -n "$SPORT" ]; then
  n=$(pipeline48 c)
  check "access log past its file's size limit: 48 pipelined requests answered (got $n)" test "$n" = 48
  sleep 1  # the log's writes have failed
  k=$(tr -cd '\n' <"$TMP/fszlog" | wc -c)
  : >"$TMP/fszlog"
  stop_server "access log past its file's size limit: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
  # Lines still waiting at the truncation went in after it: not lost.
  k2=$(grep -c '"GET /plaintext?cccc' "$TMP/fszlog")
  check "access log past its file's size limit: $((k + k2)) lines written, the other $((48 - k - k2)) reported lost" \
    grep -q "^parkway-httpd: access log: $((48 - k - k2)) lines lost (write: File too large)\$" "$TMP/fszlog"
fi

# The access log to a file (--access-log-file), rotated as logrotate does:
# the file renamed, then SIGUSR1. The lines before the signal stay in the
# renamed file, the lines after go to a new one under the path; stderr
# gets no line. A reopen that fails (the directory moved away) says so,
# and the lines go on to the file open before. A path that cannot be
# opened at startup is refused, named, before the server listens.
getq() { printf 'GET /plaintext?%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$1" | py "$HERE/httpd/raw.py" "$SPORT" 3 >/dev/null; }
LOGDIR=$TMP/logs; mkdir -p "$LOGDIR"
start_server "file log" "$TMP/out6e" "$TMP/err6e" "$BIN" --port 0 --workers 2 --access-log-file "$LOGDIR/access.log"
PID6=$SPID
if [ -n "$SPORT" ]; then
  getq before1; getq before2; getq before3
  for _ in $(seq 30); do [ "$(grep -c 'plaintext?before' "$LOGDIR/access.log" 2>/dev/null)" = 3 ] && break; sleep 0.1; done
  mv "$LOGDIR/access.log" "$LOGDIR/access.log.1"
  kill -USR1 "$PID6"
  for _ in $(seq 30); do grep -q "SIGUSR1" "$TMP/err6e" && break; sleep 0.1; done
  check "file log: SIGUSR1 reopens it, and says so" grep -qF "parkway-httpd: SIGUSR1: the access log $LOGDIR/access.log is reopened" "$TMP/err6e"
  getq after1; getq after2
  for _ in $(seq 30); do [ "$(grep -c 'plaintext?after' "$LOGDIR/access.log" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
  check "file log: the renamed file has the 3 lines before the signal, and no other" \
    test "$(grep -c 'plaintext?before' "$LOGDIR/access.log.1"):$(grep -c 'plaintext?after' "$LOGDIR/access.log.1")" = 3:0
  check "file log: the new file has the 2 lines after it, and no other" \
    test "$(grep -c 'plaintext?after' "$LOGDIR/access.log"):$(grep -c 'plaintext?before' "$LOGDIR/access.log")" = 2:0
  mv "$LOGDIR" "$TMP/logs.moved"
  kill -USR1 "$PID6"
  for _ in $(seq 30); do grep -q "cannot reopen" "$TMP/err6e" && break; sleep 0.1; done
  check "file log: a reopen that fails says so, and why" \
    grep -qF "parkway-httpd: SIGUSR1: cannot reopen the access log $LOGDIR/access.log: No such file or directory; its lines go on to the file open before" "$TMP/err6e"
  getq later1
  for _ in $(seq 30); do grep -q 'plaintext?later1' "$TMP/logs.moved/access.log" 2>/dev/null && break; sleep 0.1; done
  check "file log: after a failed reopen the lines go on to the file open before" grep -q '"GET /plaintext?later1 HTTP/1.1" 200 ' "$TMP/logs.moved/access.log"
  stop_server "file log: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
  check "file log: no access line on stderr" bash -c '! grep -q "plaintext?" "$1"' _ "$TMP/err6e"
fi
# The same rotation with stderr a pipe that is full (4 KiB, nobody reads
# it: SIGHUP's notes filled it): the reopen's note would wait, and the
# log's thread with it; the note is dropped and the lines go on to the new
# file (a plain write blocked the thread, and every line after the
# rotation was lost).
LOGDIR2=$TMP/logs2; mkdir -p "$LOGDIR2"
start_server "file log, stderr full" "$TMP/out6g" - "$PY" -S -c 'import fcntl, os, sys
r, w = os.pipe()
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
os.set_inheritable(r, True)  # the server holds the read end and never reads it
os.dup2(w, 2)
os.execv(sys.argv[1], sys.argv[1:])' "$BIN" --port 0 --workers 2 --access-log-file "$LOGDIR2/access.log"
PID6=$SPID
if [ -n "$SPORT" ]; then
  for _ in $(seq 80); do kill -HUP "$PID6"; sleep 0.005; done  # 80 notes of some 85 bytes: past 4 KiB
  sleep 0.3
  getq before1
  for _ in $(seq 30); do grep -q 'plaintext?before1' "$LOGDIR2/access.log" 2>/dev/null && break; sleep 0.1; done
  mv "$LOGDIR2/access.log" "$LOGDIR2/access.log.1"
  kill -USR1 "$PID6"
  sleep 0.3
  getq after1; getq after2
  for _ in $(seq 30); do [ "$(grep -c 'plaintext?after' "$LOGDIR2/access.log" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
  check "file log, stderr a full pipe: SIGUSR1 reopens it, the lines after it in the new file (got $(grep -c 'plaintext?after' "$LOGDIR2/access.log" 2>/dev/null))" \
    test "$(grep -c 'plaintext?after' "$LOGDIR2/access.log" 2>/dev/null):$(grep -c 'plaintext?before1' "$LOGDIR2/access.log.1")" = 2:1
  stop_server "file log, stderr full: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
fi
"$BIN" --port 0 --access-log-file "$TMP/no-such-dir/access.log" >"$TMP/out6f" 2>"$TMP/err6f"
rc=$?
check "file log: a path that cannot be opened: exit 1, named, not listening (exit $rc)" bash -c \
  '[ "$1" = 1 ] && grep -qF -- "parkway-httpd: --access-log-file $2/no-such-dir/access.log: No such file or directory" "$3" && ! grep -q listening "$4"' \
  _ "$rc" "$TMP" "$TMP/err6f" "$TMP/out6f"

# A second signal ends the grace period at once: a request whose body
# never comes would hold a 60 s grace period.
start_server "grace" "$TMP/out7" "$TMP/err7" "$BIN" --port 0 --workers 1 --shutdown-timeout 60 --body-timeout 60
PID6=$SPID
if [ -n "$SPORT" ]; then
  # The head is sent (the client says so: python's start-up alone may
  # take more than a fixed wait on a loaded host), then the server has a
  # moment to read it, then the signal.
  rm -f "$TMP/held"
  "$PY" -S -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
open(sys.argv[2], "w").close()
time.sleep(12)' "$SPORT" "$TMP/held" &
  HOLD=$!
  for _ in $(seq 100); do [ -e "$TMP/held" ] && break; sleep 0.1; done
  sleep 0.3
  kill -TERM "$PID6"
  sleep 0.5
  check "one SIGTERM with a request in hand: in its grace period" kill -0 "$PID6"
  stop_server "a second signal ends the grace period: exit 0 within 8 s" "$PID6"  # its SIGTERM is the second
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
  kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null
  sanitizer_clean "grace server stderr: no sanitizer report" "$TMP/err7"
fi

# With the trace recorder on (PARKWAY_TRACE), SIGTERM still reaches the
# server's signalfd, not the recorder's thread (whose default action
# would end the process: status 143).
export PARKWAY_TRACE=$TMP/httpd.pwt
start_server "traced" "$TMP/out8" "$TMP/err8" "$BIN" --port 0 --workers 1
unset PARKWAY_TRACE
PID6=$SPID
if [ -n "$SPORT" ]; then
  r=$(get6)
  check "traced server: answered" status_is "$r" 200
  stop_server "traced server: SIGTERM -> exit 0" "$PID6"
  [ "$STOPPED" = 1 ] || kill -KILL "$PID6" 2>/dev/null; PID6=
fi

# Bad arguments: status 2 and a first line that names the option.
bad_args() {
  local want=$1; shift
  "$BIN" "$@" >/dev/null 2>"$TMP/args"
  local rc=$?
  check "parkway-httpd $* -> status 2, \"$want\" (got $rc, \"$(head -n1 "$TMP/args")\")" \
    bash -c '[ "$1" = 2 ] && [ "$(head -n1 "$2")" = "$3" ]' _ "$rc" "$TMP/args" "$want"
}
bad_args "parkway-httpd: --port: expected 0..65535" --port 70000
bad_args "parkway-httpd: --root: missing its value" --port 0 --root
bad_args "parkway-httpd: unknown option --bogus" --port 0 --bogus
bad_args "parkway-httpd: --port is required" --root /

# A runtime that cannot start its threads (4096 workers in 1 GB of
# address space) is an error message and status 1, not an abort.
if [ "$SAN" = 1 ]; then
  skipped "a runtime that cannot start: status 1" "the sanitizers' shadow memory needs more address space than the limit"
else
  ( ulimit -v 1000000 && exec "$BIN" --port 0 --workers 4096 ) >"$TMP/out9" 2>"$TMP/err9"
  rc=$?
  check "a runtime that cannot start: status 1 and a message (got $rc)" bash -c '[ "$1" = 1 ] && grep -q "^parkway-httpd: " "$2"' _ "$rc" "$TMP/err9"
fi

# ---- slow readers: their verdicts ----------------------------------------------------------
wait "${SLOW[@]}"
if [ -n "$PORT9" ]; then
  py_count "$TMP/slow-readers" slow_readers.py
  stop_server "--idle-timeout 1 server: SIGTERM -> exit 0" "$PID9"
  [ "$STOPPED" = 1 ] && PID9=
  sanitizer_clean "--idle-timeout 1 server stderr: no sanitizer report" "$TMP/err-reader"
fi
py_count "$TMP/slow-pipelining" slow_pipelining.py
for f in "$TMP"/err-slow.*; do
  sanitizer_clean "slow pipelining server ($(basename "$f")) stderr: no sanitizer report" "$f"
done

finish
