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

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "parkway/parkway.hpp"
#include "runtime_impl.hpp"
#include "sched_ext_link.hpp"
#include "test_util.hpp"
#include "worker.hpp"

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

namespace {
using parkway::detail::Parking;
using parkway::detail::Worker;
using parkway::detail::WorkerState;

// A helping wait's done(), called on the worker's own thread wherever its
// loop looks whether the wait is over; the second call comes after the
// worker first looked for work (search() returned nothing).
struct PublishedAtDone {
  parkway::Runtime* rt;
  int calls = 0;
  WorkerState second = WorkerState::Off;  // what the worker had published then
  unsigned searchers = 0;                 // workers counted as searching then
};
bool record_published(void* p) noexcept {
  auto* c = static_cast<PublishedAtDone*>(p);
  if (++c->calls == 2) {
    c->second = Worker::current()->published();
    c->searchers = Parking::searching_of(c->rt->impl().parking.snapshot());
  }
  return c->calls >= 2;
}

parkway::Task<void> set_flag(std::atomic<bool>* f) {
  f->store(true);
  co_return;
}

// On a worker of a two-worker runtime (one searcher at most): spawns a
// task, which wakes the other worker; once that one has run it and
// searches again, this worker looks for work in a helping wait, over
// the searcher cap.
parkway::Task<bool> look_over_the_cap(parkway::Runtime* rt, PublishedAtDone* ctx) {
  std::atomic<bool> ran{false};
  auto u = parkway::spawn(set_flag(&ran), *rt);  // onto this worker's deque
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(ran.load() && Parking::searching_of(rt->impl().parking.snapshot()) == 1))
    if (std::chrono::steady_clock::now() > deadline) co_return false;
  Worker::current()->run_until(&record_published, ctx);
  co_await std::move(u);
  co_return true;
}
}  // namespace

// A worker that finds nothing to run is a thief to the sched_ext
// scheduler, whether or not the searcher cap let it count as a searcher:
// published Busy, it would be promoted ahead of its program's clock when
// preempted and counted as a busy worker its siblings yield to. One over
// the cap (search() took only the injection queue and found nothing)
// stayed published Busy from its last task until it parked.
TEST(SchedExtLink, AWorkerOverTheSearcherCapIsNotPublishedBusyWhileItFindsNothing) {
  pwtest::Watchdog wd("SchedExtLink.AWorkerOverTheSearcherCapIsNotPublishedBusyWhileItFindsNothing", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2, .search_rounds = 1000000});
  int over_cap = 0, busy = 0;
  for (int round = 0; round < 5; ++round) {
    PublishedAtDone ctx{&rt};
    auto f = parkway::spawn(look_over_the_cap(&rt, &ctx), rt);
    if (!f.get()) continue;  // the other worker never searched again
    ASSERT_GE(ctx.calls, 2);
    if (ctx.searchers != 1) continue;  // the cap was not reached this time
    ++over_cap;
    if (ctx.second == WorkerState::Busy) ++busy;
  }
  ASSERT_GT(over_cap, 0) << "no round looked for work over the searcher cap";
  EXPECT_EQ(busy, 0) << "of " << over_cap << " rounds over the searcher cap, those in which the worker "
                     << "was still published Busy after it found nothing";
}
