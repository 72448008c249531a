// pw_abuse -- what a hostile or merely heavy local program can do to the
// parkway scheduler, for the VM tests. Each mode prints what it saw; the
// cases in tools/vm/guest/cases.sh judge it.
//
//   pw_abuse bad-register     run the registration program with bad values
//                             (a kernel address, an unaligned one, an
//                             unmapped one, an index and an op out of
//                             range): each must be refused; then register
//                             one thread honestly and publish 99 for 1 s
//                             (out of range: must read as Off). Also tries
//                             to open the scheduler's maps. Exit 1 if any
//                             bad value was accepted.
//   pw_abuse exec-registered [SHELL]
//                             register the main thread with a state word of
//                             2 (Searching), then execve a shell (SHELL, a
//                             name for busybox; default /bin/busybox) that
//                             counts to 300 and sleeps 3 s: the scheduler
//                             must drop the registration (the word named
//                             the old image) and show the program under
//                             its new name.
//   pw_abuse flood N SECONDS  N threads register themselves and hold their
//                             registration for SECONDS (a program over the
//                             per-program cap sees the rest refused).
//   pw_abuse liar N SECONDS   N threads register and publish Busy for ever
//                             while spinning: a program lying to the
//                             scheduler; prints the CPU it got.
//   pw_abuse spin N SECONDS [GATE]
//                             N plain threads, all created (asleep on a
//                             futex) before any spins, then all spin for
//                             SECONDS; prints the least and most CPU one
//                             got and the longest time one waited between
//                             two of its turns. With GATE (a FIFO), it
//                             prints "created" and waits until a writer
//                             opens GATE, so many processes start at once.
#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "sched_ext_link.hpp"

using parkway::detail::SchedExtLink;
using parkway::detail::WorkerState;
using Clock = std::chrono::steady_clock;

namespace {

long sys_bpf(int cmd, bpf_attr* a) { return ::syscall(__NR_bpf, cmd, a, sizeof(*a)); }

int obj_get(const char* path) {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.pathname = reinterpret_cast<std::uint64_t>(path);
  return static_cast<int>(sys_bpf(BPF_OBJ_GET, &a));
}

// Runs pw_register with r; returns r.result (or -1000 - errno if bpf(2) failed).
int run_register(int fd, parkway_register r) {
  bpf_attr a;
  std::memset(&a, 0, sizeof(a));
  a.test.prog_fd = static_cast<std::uint32_t>(fd);
  a.test.ctx_in = reinterpret_cast<std::uint64_t>(&r);
  a.test.ctx_size_in = sizeof(r);
  if (sys_bpf(BPF_PROG_TEST_RUN, &a) != 0) return -1000 - errno;
  return r.result;
}

long thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void spin_until(Clock::time_point end) {
  while (Clock::now() < end) {
  }
}

int bad_register() {
  int fd = obj_get(PARKWAY_PIN_REGISTER);
  if (fd < 0) {
    std::printf("abuse: cannot open %s: %s\n", PARKWAY_PIN_REGISTER, std::strerror(errno));
    return 2;
  }
  alignas(64) static std::atomic<std::uint32_t> word{0};
  void* unmapped = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(unmapped, 4096);
  const auto good = reinterpret_cast<std::uint64_t>(&word);
  struct Try {
    const char* what;
    parkway_register r;
    int want;
  } tries[] = {
      {"kernel address", {0xffffffff81000000ULL, PARKWAY_OP_REGISTER, 0, 0, 0}, -22},
      {"unaligned address", {good + 1, PARKWAY_OP_REGISTER, 0, 0, 0}, -22},
      {"null address", {0, PARKWAY_OP_REGISTER, 0, 0, 0}, -22},
      {"unmapped address", {reinterpret_cast<std::uint64_t>(unmapped), PARKWAY_OP_REGISTER, 0, 0, 0}, -14},
      {"index out of range", {good, PARKWAY_OP_REGISTER, PARKWAY_MAX_WORKER_INDEX + 1, 0, 0}, -22},
      {"unknown op", {good, 7, 0, 0, 0}, -22},
  };
  int bad = 0;
  for (auto& t : tries) {
    int got = run_register(fd, t.r);
    std::printf("abuse: %s: result %d (want %d)\n", t.what, got, t.want);
    if (got != t.want) ++bad;
  }
  // Honest registration, then a value out of range in our own word.
  int got = run_register(fd, {good, PARKWAY_OP_REGISTER, 0, 0, 0});
  std::printf("abuse: honest registration: result %d\n", got);
  if (got != 0) ++bad;
  word.store(99, std::memory_order_relaxed);
  spin_until(Clock::now() + std::chrono::seconds(1));
  run_register(fd, {0, PARKWAY_OP_UNREGISTER, 0, 0, 0});
  for (const char* pin : {PARKWAY_PIN_PROCS, PARKWAY_PIN_STATS, PARKWAY_PIN_RUNTIME}) {
    int m = obj_get(pin);
    std::printf("abuse: open %s: %s\n", pin, m >= 0 ? "opened" : std::strerror(errno));
    if (m >= 0) close(m);
  }
  std::printf("abuse bad-register: %d accepted that should not be\n", bad);
  return bad ? 1 : 0;
}

int exec_registered(const char* shell) {
  int fd = obj_get(PARKWAY_PIN_REGISTER);
  alignas(64) static std::atomic<std::uint32_t> word{PARKWAY_W_SEARCHING};
  if (fd < 0) {
    std::printf("abuse: cannot open %s: %s\n", PARKWAY_PIN_REGISTER, std::strerror(errno));
    return 2;
  }
  int got = run_register(fd, {reinterpret_cast<std::uint64_t>(&word), PARKWAY_OP_REGISTER, 0, 0, 0});
  std::printf("abuse exec-registered pid %d: registration result %d, now execve\n", static_cast<int>(getpid()), got);
  std::fflush(stdout);
  if (got != 0) return 1;
  // A short loop first: over 1 ms of CPU, so `parkway sched status` lists
  // the program although its registration is gone. `exit` last: the shell
  // would exec a last `sleep` itself, and the program be named sleep.
  execl(shell, "sh", "-c", "i=0; while [ $i -lt 300 ]; do i=$((i + 1)); done; sleep 3; exit 0",
        static_cast<char*>(nullptr));
  std::printf("abuse: execl failed: %s\n", std::strerror(errno));
  return 1;
}

int flood(unsigned n, int seconds) {
  SchedExtLink link(n);
  std::atomic<unsigned> ready{0};
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      link.register_worker(i);
      link.publish(i, WorkerState::Parked);
      ready.fetch_add(1);
      std::this_thread::sleep_until(end);
      link.unregister_worker(i);
    });
  while (ready.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  parkway::SchedExtStatus st = link.status();
  std::printf("abuse flood pid %d: registered %u of %u: %s\n", static_cast<int>(getpid()), st.registered, st.workers,
              st.reason[0] ? st.reason : "all");
  std::fflush(stdout);
  for (auto& t : ts) t.join();
  return 0;
}

int liar(unsigned n, int seconds) {
  SchedExtLink link(n);
  std::vector<long> cpu(n, 0);
  std::atomic<unsigned> registered{0};
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      link.register_worker(i);
      registered.store(link.status().registered > registered.load() ? link.status().registered : registered.load());
      link.publish(i, WorkerState::Busy);
      spin_until(end);
      cpu[i] = thread_cpu_ms();
      link.unregister_worker(i);
    });
  for (auto& t : ts) t.join();
  long total = 0;
  for (long c : cpu) total += c;
  std::printf("abuse liar: %u threads published Busy for %d s: cpu_ms=%ld (registered %u)\n", n, seconds, total,
              registered.load());
  return 0;
}

int spin(unsigned n, int seconds, const char* gate) {
  std::atomic<unsigned> created{0}, late{0};
  std::atomic<bool> go{false};
  Clock::time_point start;
  std::vector<long> cpu(n, 0);
  std::vector<long> longest_wait_ms(n, 0);
  std::vector<std::thread> ts;
  ts.reserve(n);
  Clock::time_point end;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      created.fetch_add(1);
      // Woken one by one (a waker can be preempted while it wakes many),
      // then asleep again until the common start time: all start at once.
      go.wait(false, std::memory_order_acquire);
      if (Clock::now() > start) late.fetch_add(1);
      std::this_thread::sleep_until(start);
      // A jump of the clock between two reads is time spent off the CPU.
      auto last = Clock::now();
      auto longest = Clock::duration::zero();
      while (last < end) {
        auto t = Clock::now();
        if (t - last > longest) longest = t - last;
        last = t;
      }
      cpu[i] = thread_cpu_ms();
      longest_wait_ms[i] = std::chrono::duration_cast<std::chrono::milliseconds>(longest).count();
    });
  while (created.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("abuse spin pid %d: %u threads created\n", static_cast<int>(getpid()), n);
  std::fflush(stdout);
  if (gate) {
    int fd = open(gate, O_RDONLY);  // blocks until the starter opens it for writing
    if (fd < 0) {
      std::printf("abuse spin: cannot open %s: %s\n", gate, std::strerror(errno));
      std::fflush(stdout);
    } else {
      close(fd);
    }
  }
  // Time for every thread to be woken and asleep again before the start.
  start = Clock::now() + std::chrono::milliseconds(500 + n);
  end = start + std::chrono::seconds(seconds);
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (auto& t : ts) t.join();
  long lo = cpu[0], hi = cpu[0], total = 0, wait = 0;
  unsigned ran = 0;
  for (unsigned i = 0; i < n; ++i) {
    lo = cpu[i] < lo ? cpu[i] : lo;
    hi = cpu[i] > hi ? cpu[i] : hi;
    total += cpu[i];
    ran += cpu[i] > 0;
    wait = longest_wait_ms[i] > wait ? longest_wait_ms[i] : wait;
  }
  std::printf(
      "abuse spin: %u threads spun %d s: %u got CPU, %u started late, min_ms=%ld max_ms=%ld total_ms=%ld "
      "longest_wait_ms=%ld\n",
      n, seconds, ran, late.load(), lo, hi, total, wait);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i) { return i < argc ? std::atoi(argv[i]) : 0; };
  if (argc >= 2 && !std::strcmp(argv[1], "bad-register")) return bad_register();
  if (argc >= 2 && !std::strcmp(argv[1], "exec-registered"))
    return exec_registered(argc >= 3 ? argv[2] : "/bin/busybox");
  if (argc == 4 && !std::strcmp(argv[1], "flood")) return flood(static_cast<unsigned>(arg(2)), arg(3));
  if (argc == 4 && !std::strcmp(argv[1], "liar")) return liar(static_cast<unsigned>(arg(2)), arg(3));
  if ((argc == 4 || argc == 5) && !std::strcmp(argv[1], "spin"))
    return spin(static_cast<unsigned>(arg(2)), arg(3), argc == 5 ? argv[4] : nullptr);
  std::fprintf(stderr,
               "usage: pw_abuse bad-register | exec-registered [SHELL] | flood N SECONDS | liar N SECONDS | spin N SECONDS [GATE]\n");
  return 2;
}
