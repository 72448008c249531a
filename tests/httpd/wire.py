# wire.py -- writing requests to parkway-httpd and reading its answers,
# shared by the check scripts (raw.py, bodies.py, empty_lines.py,
# large_files.py, small_files.py, fib_clients.py, shutdown_head.py).
import ctypes
import os
import socket
import subprocess
import time


def start_server(binary, args, err_path):
    """Starts `binary --port 0 ARGS` on 127.0.0.1, its stderr to err_path;
    returns (process, port), port None when it did not say where it
    listens (then the process is killed)."""
    with open(err_path, "w") as err:
        p = subprocess.Popen([binary, "--port", "0"] + args, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        return p, int(p.stdout.readline().split("127.0.0.1:")[1].split()[0])
    except (IndexError, ValueError):
        p.kill()
        return p, None


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


def request(path, extra=""):
    return ("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (path, extra)).encode()


def read_answer(s, buf, slow=False):
    """One answer from s (buf: bytes already read); returns (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        x = s.recv(65536)
        if not x:
            raise EOFError("connection closed in a head")
        buf += x
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(buf) < n:
        if slow:
            time.sleep(0.002)
        x = s.recv(16384 if slow else 262144)
        if not x:
            raise EOFError("connection closed in a body (%d of %d bytes)" % (len(buf), n))
        buf += x
    return status, headers, buf[:n], buf[n:]


def cached_pages(path):
    """Pages of the file in the page cache, by cachestat(2) (Linux 6.5); -1 when it cannot tell."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        rng = (ctypes.c_uint64 * 2)(0, 0)
        st = (ctypes.c_uint64 * 5)()
        r = libc.syscall(ctypes.c_long(451), ctypes.c_int(fd), rng, st, ctypes.c_uint(0))
        return int(st[0]) if r == 0 else -1
    finally:
        os.close(fd)


def write_evicted(path, data):
    """Writes data to path and drops its pages from the page cache where
    the file system lets it; returns cached_pages(path) after (0: evicted)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return cached_pages(path)
