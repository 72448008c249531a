// test_util.hpp -- helpers shared by the tests: a watchdog that fails a
// hung test instead of hanging CI, sanitizer-aware sizes, CPU-time probes.
#pragma once

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "parkway/task_group.hpp"

namespace pwtest {

// fib with one spawn per call: the standard fork/join workload.
inline long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  parkway::TaskGroup g;
  g.spawn([&] { a = fib(n - 1); });
  b = fib(n - 2);
  g.wait();
  return a + b;
}
inline long fib_seq(int n) { return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2); }

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSlow = 5;  // TSAN: shrink iteration counts
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kSlow = 2;
#else
inline constexpr int kSlow = 1;
#endif

// Aborts the process with a message if not destroyed within `seconds`.
class Watchdog {
 public:
  // The message goes to the stderr of the construction (a copy of the
  // descriptor), so that a test capturing stderr meanwhile still shows it.
  Watchdog(const char* what, int seconds) : what_(what), err_(::dup(2)) {
    th_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, std::chrono::seconds(seconds), [this] { return done_; })) {
        ::dprintf(err_ >= 0 ? err_ : 2, "WATCHDOG: %s did not finish within %d s (hang?)\n", what_, seconds);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    th_.join();
    if (err_ >= 0) ::close(err_);
  }

 private:
  const char* what_;
  const int err_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread th_;
};

// Whole-process CPU time (user + system), in seconds.
inline double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU time of this process's threads whose name starts with `prefix`, in
// seconds, from each thread's CPU clock (ns resolution).
inline double threads_cpu_seconds(const char* prefix, int* nthreads = nullptr) {
  double sum = 0;
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = pid_t(std::atoi(e->d_name));
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    // Linux: the CPU clock of thread `tid` (MAKE_THREAD_CPUCLOCK(tid, SCHED)).
    clockid_t cid = clockid_t((~unsigned(tid) << 3) | 6);
    timespec ts{};
    if (clock_gettime(cid, &ts) == 0) {
      sum += double(ts.tv_sec) + ts.tv_nsec / 1e9;
      ++n;
    }
  }
  closedir(d);
  if (nthreads) *nthreads = n;
  return sum;
}

// Runs this test binary's test `name` (a DISABLED_ one) in a fresh process
// (exec, not fork: the test process may have threads); returns its exit
// code, or -1 if it did not exit normally.
inline int run_child_test(const char* name) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);  // (in system(), /proc/self is the shell)
  if (len <= 0) return -1;
  self[len] = 0;
  std::string cmd = std::string("'") + self + "' --gtest_also_run_disabled_tests --gtest_filter=" + name +
                    " >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Binds fd to 127.0.0.1 on a port the kernel picks; the address bound
// (its port filled in), or one with port 0 if bind or getsockname failed.
inline sockaddr_in bind_loopback(int fd) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    a.sin_port = 0;
  return a;
}

}  // namespace pwtest
