// test_sched_ext_link.cpp -- the runtime's side of the optional sched_ext
// scheduler, on a machine where it is not loaded (the loaded case runs in
// the VM: make vm-test).
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "parkway/parkway.hpp"
#include "sched_ext_link.hpp"
#include "test_util.hpp"

// A service under a seccomp filter without bpf(2) (systemd's
// @system-service is one) must be able to use parkway: with no parkway
// scheduler enabled, building a Runtime makes no bpf call. (With the
// scheduler loaded, the VM test case 7 runs the same filter.)
TEST(SchedExtLink, DISABLED_RuntimeUnderASeccompFilterWithoutBpf) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    std::_Exit(3);  // cannot install the filter
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::_Exit(rt.run([] { return 7; }) == 7 ? 0 : 1);
}

TEST(SchedExtLink, NoBpfCallWithoutTheScheduler) {
  int st = pwtest::run_child_test("SchedExtLink.DISABLED_RuntimeUnderASeccompFilterWithoutBpf");
  if (st == 3) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(st, 0) << "the child was killed by the filter (-1) or failed";
}

// Inside a child pid namespace the scheduler would not recognise our ids,
// so the link must know it is in one.
TEST(SchedExtLink, DISABLED_InANewPidNamespace) {
  if (unshare(CLONE_NEWPID) != 0) std::_Exit(3);  // needs CAP_SYS_ADMIN
  pid_t pid = fork();  // the first child is pid 1 of the new namespace
  if (pid == 0) _exit(parkway::detail::SchedExtLink::in_child_pid_namespace() ? 0 : 1);
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) std::_Exit(4);
  std::_Exit(WIFEXITED(st) ? WEXITSTATUS(st) : 5);
}

TEST(SchedExtLink, KnowsAChildPidNamespace) {
  EXPECT_FALSE(parkway::detail::SchedExtLink::in_child_pid_namespace()) << "the test itself runs in the root namespace";
  int st = pwtest::run_child_test("SchedExtLink.DISABLED_InANewPidNamespace");
  if (st == 3) GTEST_SKIP() << "unshare(CLONE_NEWPID) not permitted here";
  EXPECT_EQ(st, 0);
}

// The link stays away from bpf(2) under any seccomp filter; it must see one.
TEST(SchedExtLink, DISABLED_SeesASeccompFilter) {
  sock_filter filter[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  sock_fprog prog{1, filter};
  if (parkway::detail::SchedExtLink::under_seccomp()) std::_Exit(4);  // already under one: cannot tell
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    std::_Exit(3);
  std::_Exit(parkway::detail::SchedExtLink::under_seccomp() ? 0 : 1);
}

TEST(SchedExtLink, KnowsASeccompFilter) {
  int st = pwtest::run_child_test("SchedExtLink.DISABLED_SeesASeccompFilter");
  if (st == 3) GTEST_SKIP() << "cannot install a seccomp filter here";
  if (st == 4) GTEST_SKIP() << "the tests already run under a seccomp filter";
  EXPECT_EQ(st, 0) << "under_seccomp() did not see the filter";
}

// Runtime::sched_ext_status() says how many workers the scheduler knows
// and why not the others; here the scheduler is never loaded (the host
// kernel has no sched_ext), so none, with the reason.
TEST(SchedExtLink, StatusSaysWhyNotRegistered) {
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    rt.run([] {});
    parkway::SchedExtStatus st = rt.sched_ext_status();
    EXPECT_EQ(st.workers, 2u);
    EXPECT_EQ(st.registered, 0u);
    EXPECT_STREQ(st.reason, "the parkway scheduler is not loaded");
  }
  ::setenv("PARKWAY_SCHED_EXT", "off", 1);
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    parkway::SchedExtStatus st = rt.sched_ext_status();
    EXPECT_EQ(st.registered, 0u);
    EXPECT_STREQ(st.reason, "PARKWAY_SCHED_EXT turns it off");
  }
  ::unsetenv("PARKWAY_SCHED_EXT");
}
