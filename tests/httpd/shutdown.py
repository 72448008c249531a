#!/usr/bin/env python3
# shutdown.py BINARY STDERR_FILE -- a graceful shutdown under load: starts
# BINARY (parkway-httpd) on 127.0.0.1 with 2 workers and
# --shutdown-timeout 1, opens 32 connections that each pipeline sixteen
# /fib/N requests (N calibrated so that one takes about 0.25 s on the two
# workers, at most 40: with one request a connection, some of the 32 then
# finish within the 1.5 s to the grace period's end and some do not, with
# a margin of 5x either way; less under a sanitizer or on a slow host),
# sends SIGTERM 0.5 s later. Prints PASS/FAIL:
#   - a connection attempted after SIGTERM is refused at once;
#   - the server exits 0 within the grace period plus 2 s;
#   - what each connection got is whole responses only: 200 with fib(N),
#     or 503 (a computation stopped when the grace period ended) with
#     Connection: close, or nothing (accepted by the kernel, never by the
#     server); no response is cut short;
#   - no connection got all sixteen: each ended after the request in hand,
#     and that last answer, a 200 finished after SIGTERM, said
#     Connection: close;
#   - at least one 503 and one 200 came (both ways of ending were taken).
# Then the same with one /fib/N per connection (nothing pipelined) and
# the access log on: every answer the log records as sent was received
# (a 503 must reach its client also when nothing follows it).
import math
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from verdict import verdict

BIN, ERR = sys.argv[1], sys.argv[2]
N, GRACE = 32, 1.0
FIB_SECONDS = 0.25  # one /fib/N on two workers


def fib(n):
  a, b = 0, 1
  for _ in range(n):
      a, b = b, a + b
  return a


def calibrate(port):
  """N such that /fib/N takes about FIB_SECONDS here: from the fastest of
  three /fib/29 (fib's time grows by the golden ratio per step; 29:
  the access log check counts the /fib/N lines, N >= 30)."""
  best = None
  for _ in range(3):
      s = socket.create_connection(("127.0.0.1", port), timeout=20)
      t0 = time.perf_counter()
      s.sendall(b"GET /fib/29 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
      while s.recv(65536):
          pass
      took = time.perf_counter() - t0
      s.close()
      best = took if best is None else min(best, took)
  steps = math.log(FIB_SECONDS / max(best, 1e-6)) / math.log((1 + 5 ** 0.5) / 2)
  return max(30, min(40, 29 + round(steps))), best


def scenario(PIPELINED, mode):
  with open(ERR, mode) as err:
    p = subprocess.Popen([BIN, "--port", "0", "--workers", "2", "--shutdown-timeout", str(int(GRACE))] + (["--access-log"] if PIPELINED == 1 else []),
                         stdout=subprocess.PIPE, stderr=err, text=True)
  line = p.stdout.readline()
  try:
      port = int(line.split("127.0.0.1:")[1].split()[0])
  except (IndexError, ValueError):
      verdict(False, "shutdown server started", repr(line))
      p.kill()
      sys.exit(0)
  F, t29 = calibrate(port)
  what = "%d pipelined /fib/N" % PIPELINED if PIPELINED > 1 else "one /fib/N"
  print("  shutdown: /fib/%d (/fib/29 took %.1f ms)" % (F, t29 * 1e3))

  got = {}


  def client(i):
      data = b""
      try:
          s = socket.create_connection(("127.0.0.1", port), timeout=20)
          s.sendall(b"GET /fib/%d HTTP/1.1\r\nHost: t\r\n\r\n" % F * PIPELINED)
          while True:
              x = s.recv(65536)
              if not x:
                  break
              data += x
      except OSError:
          pass  # a reset after what came
      got[i] = data.decode("latin-1")


  threads = [threading.Thread(target=client, args=(i,)) for i in range(N)]
  for t in threads:
      t.start()
  time.sleep(0.5)
  t0 = time.time()
  p.send_signal(signal.SIGTERM)
  time.sleep(0.2)
  try:
      c = socket.create_connection(("127.0.0.1", port), timeout=2)
      c.close()
      refused = "connected"
  except ConnectionRefusedError:
      refused = "refused"
  except OSError as e:
      refused = repr(e)
  verdict(refused == "refused", "%s each: a connection after SIGTERM is refused" % what, refused)
  try:
      rc = p.wait(timeout=GRACE + 10)
  except subprocess.TimeoutExpired:
      p.kill()
      rc = "hung"
  took = time.time() - t0
  verdict(rc == 0 and took < GRACE + 2, "%s each: SIGTERM, exit 0 within the grace period plus 2 s" % what,
          "exit %s after %.1f s" % (rc, took))
  for t in threads:
      t.join(10)

  ok200 = ok503 = 0
  bad = []
  for i in range(N):
      rest, n = got.get(i, ""), 0
      while rest:
          head, sep, rest = rest.partition("\r\n\r\n")
          fields = dict(l.split(": ", 1) for l in head.split("\r\n")[1:] if ": " in l)
          length = int(fields.get("Content-Length", "-1"))
          body, rest = rest[:length], rest[length:]
          n += 1
          if not sep or length < 0 or len(body) != length:
              bad.append("conn %d: a cut response %r" % (i, head[:40]))
              break
          if head.startswith("HTTP/1.1 200 ") and body == str(fib(F)):
              ok200 += 1
              if PIPELINED > 1 and not rest and fields.get("Connection") != "close":
                  bad.append("conn %d: its last answer, a 200, said Connection: %s" % (i, fields.get("Connection")))
                  break
          elif head.startswith("HTTP/1.1 503 ") and fields.get("Connection") == "close" and not rest:
              ok503 += 1
          else:
              bad.append("conn %d: %r" % (i, head[:60]))
              break
      if PIPELINED > 1 and n >= PIPELINED:
          bad.append("conn %d: all %d answered" % (i, n))
  verdict(not bad, "%s each: whole responses (200 fib(N), or a last 503 with close; a last 200 says close), then the end" % what,
          "; ".join(bad[:3]))
  verdict(ok200 >= 1 and ok503 >= 1, "%s each: both a finished /fib/N (200) and a stopped one (503)" % what,
          "%d 200s, %d 503s" % (ok200, ok503))
  if PIPELINED == 1:
      with open(ERR) as f:
          log = [l for l in f if '"GET /fib/%d HTTP/1.1"' % F in l]
      # ... "GET /fib/N HTTP/1.1" STATUS BYTES
      logged = {st: sum(1 for l in log if re.search(r'" %s (\d+|-)$' % st, l.rstrip())) for st in ("200", "503")}
      verdict(logged["200"] == ok200 and logged["503"] == ok503,
              "one /fib/N each: every answer the access log records reached its client",
              "logged %s, received 200: %d, 503: %d" % (logged, ok200, ok503))


scenario(16, "w")
scenario(1, "a")
