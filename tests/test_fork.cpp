// test_fork.cpp -- a process that forks after making runtimes: the child has
// none of their worker threads (fork copies only the calling thread).
// Without care the child hangs: work given to the parent's runtime waits
// for workers that do not exist, and the default runtime's shutdown at exit
// joins threads that are not there. Each test runs the child's part in a
// real fork() and checks its exit status; an alarm() in the child turns a
// hang into a failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

// TSAN kills a child of a multi-threaded process once it starts a thread
// (its die_after_fork), which every child here that makes a runtime does.
#if defined(__SANITIZE_THREAD__)
#define PW_SKIP_IF_TSAN() GTEST_SKIP() << "ThreadSanitizer does not support starting threads in a child of a multi-threaded fork"
#else
#define PW_SKIP_IF_TSAN() (void)0
#endif

// Runs body() in a forked child that exits with its return value through
// exit() (so atexit handlers, the default runtime's shutdown among them,
// run). Returns a description of how the child ended: "exit N" or
// "signal S" (SIGALRM: the child hung).
//
// Under AddressSanitizer the child ends with _Exit instead: LeakSanitizer's
// check at exit would report what the parent's other threads held (a task
// one of its workers was running, say) as leaked, since those threads'
// stacks are not in the child; and its stop-the-world step looks for those
// threads and can hang. The plain build covers the exit() path.
template <class F>
std::string in_child(F body, unsigned timeout_s = 20) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t p = fork();
  if (p < 0) return "fork failed";
  if (p == 0) {
    alarm(timeout_s);
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: uncaught exception: %s\n", e.what());
      code = 98;
    }
#if defined(__SANITIZE_ADDRESS__)
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
#else
    std::exit(code);
#endif
  }
  int st = 0;
  if (waitpid(p, &st, 0) != p) return "waitpid failed";
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "signal " + std::to_string(WTERMSIG(st)) + (WTERMSIG(st) == SIGALRM ? " (hung)" : "");
  return "?";
}

int fan_out_sum(int n) {
  std::atomic<int> sum{0};
  parkway::TaskGroup g;
  for (int i = 1; i <= n; ++i) g.spawn([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); });
  g.wait();
  return sum.load();
}

}  // namespace

// The parent used the default runtime (a TaskGroup outside any pool); the
// child gets a default runtime of its own that runs work, and exit() in
// the child (the default runtime's at-exit shutdown) returns.
TEST(Fork, ChildGetsItsOwnDefaultRuntime) {
  PW_SKIP_IF_TSAN();
  pwtest::Watchdog dog("Fork.ChildGetsItsOwnDefaultRuntime", 60);
  ASSERT_EQ(fan_out_sum(100), 5050);
  parkway::Runtime* parents = &parkway::Runtime::default_runtime();
  EXPECT_EQ(in_child([parents] {
              if (&parkway::Runtime::default_runtime() == parents) return 1;
              if (fan_out_sum(1000) != 500500) return 2;
              std::vector<int> hit(10007, 0);
              parkway::parallel_for(0, hit.size(), 7, [&](std::size_t i) { hit[i] += 1; });
              for (int h : hit)
                if (h != 1) return 3;
              if (pwtest::fib(20) != 6765) return 4;
              return 0;
            }),
            "exit 0");
  // The parent's default runtime is the same one and still works.
  EXPECT_EQ(&parkway::Runtime::default_runtime(), parents);
  EXPECT_EQ(fan_out_sum(100), 5050);
}

// A child that never touches parkway exits normally: the at-exit handler
// finds the parent's default runtime, which must not wait for its workers.
TEST(Fork, ChildThatDoesNotUseParkwayExits) {
  pwtest::Watchdog dog("Fork.ChildThatDoesNotUseParkwayExits", 60);
  ASSERT_EQ(fan_out_sum(10), 55);
  EXPECT_EQ(in_child([] { return 0; }), "exit 0");
}

// A runtime made by the parent refuses work in the child with an error
// that names fork, from submit, run and a TaskGroup bound to it; its
// shutdown and destructor return there; the parent's copy is unaffected.
TEST(Fork, ParentsRuntimeRefusesWorkInTheChild) {
  pwtest::Watchdog dog("Fork.ParentsRuntimeRefusesWorkInTheChild", 60);
  auto* rt = new parkway::Runtime(parkway::Options{.workers = 2});
  ASSERT_EQ(rt->run([] { return 7; }), 7);
  EXPECT_EQ(in_child([rt] {
              int refused = 0;
              auto named = [](const parkway::RuntimeShutdown& e) {
                return std::string(e.what()).find("fork()") != std::string::npos;
              };
              try {
                (void)rt->submit([] { return 1; });
              } catch (const parkway::RuntimeShutdown& e) {
                refused += named(e);
              }
              try {
                rt->run([] {});
              } catch (const parkway::RuntimeShutdown& e) {
                refused += named(e);
              }
              try {
                parkway::TaskGroup g(*rt);
                g.spawn([] {});
                g.wait();
              } catch (const parkway::RuntimeShutdown& e) {
                refused += named(e);
              }
              if (refused != 3) return 10 + refused;
              rt->shutdown();  // returns: nothing to join here
              delete rt;       // so does the destructor
              return 0;
            }),
            "exit 0");
  EXPECT_EQ(rt->run([] { return 8; }), 8);
  delete rt;
}

// A runtime the child makes itself works like any other, and a fork with
// tasks in flight in the parent loses none of them there.
TEST(Fork, ForkWithWorkInFlight) {
  PW_SKIP_IF_TSAN();
  pwtest::Watchdog dog("Fork.ForkWithWorkInFlight", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::atomic<int> ran{0};
  std::vector<parkway::Future<void>> fs;
  for (int i = 0; i < 200; ++i)
    fs.push_back(rt.submit([&ran] {
      usleep(100);
      ran.fetch_add(1, std::memory_order_relaxed);
    }));
  EXPECT_EQ(in_child([] {
              parkway::Runtime mine(parkway::Options{.workers = 2});
              return mine.run([] { return fan_out_sum(100) == 5050 ? 0 : 1; });
            }),
            "exit 0");
  for (auto& f : fs) f.get();
  EXPECT_EQ(ran.load(), 200);
}
