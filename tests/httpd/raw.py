#!/usr/bin/env python3
# raw.py PORT TIMEOUT [MARK] -- check-httpd.sh's raw client: sends stdin in
# one write to 127.0.0.1:PORT, prints what comes back until the server
# closes ("<EOF>" last) or TIMEOUT seconds pass ("<OPEN>" last). MARK: a
# file created when the first bytes have come back.
import socket
import sys

from wire import read_until_close

port, limit = int(sys.argv[1]), float(sys.argv[2])
mark = sys.argv[3] if len(sys.argv) > 3 else None
data = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", port), timeout=limit)
s.sendall(data)
got, closed = read_until_close(s, limit, (lambda: open(mark, "w").close()) if mark else None)
sys.stdout.write(got.decode("latin-1") + ("<EOF>" if closed else "<OPEN>") + "\n")
