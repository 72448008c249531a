// pw_seccomp PROGRAM ARGS... -- runs PROGRAM under a seccomp filter that
// kills the process on bpf(2) (SECCOMP_RET_KILL_PROCESS, systemd's default
// action for SystemCallFilter=) and allows everything else: a hardened
// service, for the VM test that the runtime never calls bpf(2) there.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cerrno>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pw_seccomp PROGRAM [ARGS...]\n");
    return 2;
  }
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    std::fprintf(stderr, "pw_seccomp: cannot install the filter: %s\n", std::strerror(errno));
    return 3;
  }
  execvp(argv[1], argv + 1);
  std::fprintf(stderr, "pw_seccomp: cannot run %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
