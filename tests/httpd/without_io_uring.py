# without_io_uring.py PROGRAM ARGS...: runs PROGRAM where io_uring_setup(2)
# fails with EPERM, as under a container's seccomp profile that refuses
# io_uring (Docker's default since 2023) or kernel.io_uring_disabled.
# Exits 3 if the filter cannot be installed.
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
NR_IO_URING_SETUP = 425  # the same on every architecture (the syscalls added since 5.1 share numbers)
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


prog = b"".join([
    insn(BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    insn(BPF_JEQ_K, 0, 1, NR_IO_URING_SETUP),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
])
buf = ctypes.create_string_buffer(prog, len(prog))


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


fprog = SockFprog(len(prog) // 8, ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0 or \
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
    print("without_io_uring: cannot install the filter: %s" % os.strerror(ctypes.get_errno()), file=sys.stderr)
    sys.exit(3)
os.execv(sys.argv[1], sys.argv[1:])
