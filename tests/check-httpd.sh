#!/usr/bin/env bash
# check-httpd.sh BINARY -- end-to-end checks of parkway-httpd: starts it on
# 127.0.0.1 (port 0) with a temporary document root and talks to it with
# curl and raw sockets (python3). One line per check, then
# "N passed, N failed, N skipped"; exits non-zero when a check failed.
set -u
BIN=${1:-build/parkway-httpd}
pass=0; fail=0; skip=0
ok()      { echo "PASS $1"; pass=$((pass + 1)); }
bad()     { echo "FAIL $1${2:+: $2}"; fail=$((fail + 1)); }
skipped() { echo "SKIP $1${2:+: $2}"; skip=$((skip + 1)); }
check()   { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
finish()  { echo "$pass passed, $fail failed, $skip skipped"; [ "$fail" -eq 0 ]; }

if ! command -v python3 >/dev/null; then skipped "all checks" "python3 missing"; finish; exit; fi
HAVE_CURL=1; command -v curl >/dev/null || HAVE_CURL=0

TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

ROOT=$TMP/root
mkdir -p "$ROOT/sub" "$TMP/outside"
printf 'hello, static world\n' > "$ROOT/hello.txt"
printf '<p>index</p>\n' > "$ROOT/sub/index.html"
printf 'SECRET-OUTSIDE-ROOT\n' > "$TMP/outside/secret.txt"
ln -s "$TMP/outside/secret.txt" "$ROOT/escape.txt"
touch -d '2020-01-02 03:04:05 UTC' "$ROOT/hello.txt"

"$BIN" --port 0 --root "$ROOT" --workers 2 --header-timeout 1 --idle-timeout 5 >"$TMP/out" 2>"$TMP/err" &
PID=$!
for _ in $(seq 50); do grep -q listening "$TMP/out" && break; sleep 0.1; done
PORT=$(sed -nE 's/^parkway-httpd: listening on 127\.0\.0\.1:([0-9]+) \([0-9]+ workers\)$/\1/p' "$TMP/out")
if [ -z "$PORT" ]; then bad "startup line" "$(cat "$TMP/out" "$TMP/err")"; finish; exit; fi
ok "startup line (port $PORT)"
URL=http://127.0.0.1:$PORT

# raw TIMEOUT: sends stdin in one write, prints what comes back until the
# server closes ("<EOF>" last) or TIMEOUT seconds pass ("<OPEN>" last).
cat >"$TMP/raw.py" <<'PY'
import socket, sys, time
port, limit = int(sys.argv[1]), float(sys.argv[2])
data = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", port), timeout=limit)
s.sendall(data)
end, got, tail = time.time() + limit, b"", "<OPEN>"
while time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        x = s.recv(65536)
    except socket.timeout:
        break
    except ConnectionResetError:
        tail = "<EOF>"; break
    if not x:
        tail = "<EOF>"; break
    got += x
sys.stdout.write(got.decode("latin-1") + tail + "\n")
PY
raw() { python3 "$TMP/raw.py" "$PORT" "$1"; }
has() { grep -qiF -- "$2" <<<"$1"; }
status_is() { head -n1 <<<"$1" | grep -q "^HTTP/1.1 $2 "; }

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
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT\r\nConnection: close\r\n\r\n' | raw 3)
check "older If-Modified-Since -> 200" status_is "$r" 200
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=7-12\r\nConnection: close\r\n\r\n' | raw 3)
check "Range -> 206 with Content-Range and the bytes" bash -c '
  grep -q "^HTTP/1.1 206 " <<<"$1" && grep -q "^Content-Range: bytes 7-12/20" <<<"$1" &&
  grep -q "^Content-Length: 6" <<<"$1" && grep -q "static<EOF>" <<<"$1"' _ "$r"
r=$(printf 'GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=500-\r\nConnection: close\r\n\r\n' | raw 3)
check "unsatisfiable Range -> 416" bash -c 'grep -q "^HTTP/1.1 416 " <<<"$1" && grep -q "^Content-Range: bytes \*/20" <<<"$1"' _ "$r"
r=$(printf 'GET /sub/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "directory -> index.html" bash -c 'grep -q "^HTTP/1.1 200 " <<<"$1" && grep -q "^Content-Type: text/html" <<<"$1" && grep -q "<p>index</p>" <<<"$1"' _ "$r"
r=$(printf 'GET /missing.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "missing file -> 404" status_is "$r" 404

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
for n in abc 99 -1 41; do
  r=$(printf 'GET /fib/%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' "$n" | raw 3)
  check "/fib/$n -> 400" status_is "$r" 400
done

# ---- connection handling ----------------------------------------------------------
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\nGET /fib/10 HTTP/1.1\r\nHost: t\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 5)
check "pipelining: 3 requests in one write, 3 responses in order" bash -c '
  [ "$(grep -o "HTTP/1.1 200 " <<<"$1" | wc -l)" = 3 ] &&
  tr -d "\r\n" <<<"$1" | grep -q "Hello, World!HTTP/1.1 200.*55HTTP/1.1 200.*hello, static world<EOF>"' _ "$r"
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n' | raw 1.5)
check "HTTP/1.1 keeps the connection open" bash -c 'grep -q "^Connection: keep-alive" <<<"$1" && grep -q "<OPEN>$" <<<"$1"' _ "$r"
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
r=$(printf 'BREW /pot HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "unknown method -> 501" status_is "$r" 501

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

# ---- timeouts -----------------------------------------------------------------------
t0=$(date +%s.%N)
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost' | raw 4)
t1=$(date +%s.%N)
check "slowloris: partial head closed after the header timeout (1 s)" bash -c '
  grep -q "<EOF>$" <<<"$1" && python3 -c "import sys; d=float(sys.argv[2])-float(sys.argv[1]); sys.exit(0 if 0.8 <= d <= 3.5 else 1)" "$2" "$3"' _ "$r" "$t0" "$t1"
t0=$(date +%s.%N)
r=$(printf '' | raw 4)
t1=$(date +%s.%N)
check "silent new connection closed after the header timeout" bash -c '
  grep -q "<EOF>$" <<<"$1" && python3 -c "import sys; d=float(sys.argv[2])-float(sys.argv[1]); sys.exit(0 if 0.8 <= d <= 3.5 else 1)" "$2" "$3"' _ "$r" "$t0" "$t1"

# ---- still alive, then a graceful exit ---------------------------------------------------------
r=$(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n' | raw 3)
check "after all that, /plaintext still served" bash -c 'grep -q "Hello, World!<EOF>" <<<"$1"' _ "$r"

# An idle keep-alive connection must not hold the shutdown up.
(printf 'GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n' | raw 4 >"$TMP/idle") &
IDLE=$!
sleep 0.3
kill -TERM "$PID"
rc=timeout
for _ in $(seq 50); do
  if ! kill -0 "$PID" 2>/dev/null; then wait "$PID"; rc=$?; break; fi
  sleep 0.1
done
if [ "$rc" = 0 ]; then ok "SIGTERM -> exit 0 within 5 s"; PID=; else bad "SIGTERM -> exit 0 within 5 s" "exit: $rc"; fi
wait "$IDLE" 2>/dev/null
check "SIGTERM closes an idle keep-alive connection" bash -c 'grep -q "Hello, World!<EOF>" "$1"' _ "$TMP/idle"

finish
