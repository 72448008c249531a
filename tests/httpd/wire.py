# wire.py -- reading what parkway-httpd sends until it closes, shared by the
# check scripts (raw.py, bodies.py, empty_lines.py).
import socket
import time


def read_until_close(s, limit, on_first_bytes=None):
    """What s receives until the peer closes (EOF or a reset) or `limit`
    seconds pass: (bytes, closed). on_first_bytes() is called once, when
    the first bytes have come."""
    got, end = b"", time.time() + limit
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            x = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            return got, True
        if not x:
            return got, True
        if not got and on_first_bytes:
            on_first_bytes()
        got += x
    return got, False


def trickle_until_close(s, data, every, limit):
    """Sends `data` on s every `every` seconds, reading between sends,
    until the peer closes (EOF, a reset, a failed send) or `limit` seconds
    pass: (bytes received, closed, seconds taken)."""
    got, closed, t0 = b"", False, time.time()
    s.settimeout(every)
    while time.time() - t0 < limit:
        try:
            s.sendall(data)
        except OSError:
            closed = True
            break
        try:
            x = s.recv(4096)
            if not x:
                closed = True
                break
            got += x
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed = True
            break
    return got, closed, time.time() - t0
