// pw_vmprog --workers N --seconds S [--idle I] [--linger L] [--until FILE]
// -- a parkway program for the VM tests (--idle: first sit idle for I
// seconds after start-up; --linger: sleep L seconds after the result, so
// that the scheduler's record of it, removed at exit, can still be read;
// --until: stop working as soon as FILE exists, S seconds at most); prints
// what Runtime::sched_ext_status() says once every worker has run, then:
// repeats a parallel sum with a known answer for about S seconds, checks
// every answer, prints "result ok ..." (or "result WRONG ...") and the CPU
// time the process used (the scheduler's per-program figure is compared
// with it).
#include <parkway/parkway.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

int main(int argc, char** argv) {
  unsigned workers = 2;
  int seconds = 3, idle = 0, linger = 0;
  const char* until = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--workers")) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--idle")) idle = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--linger")) linger = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--until")) until = argv[i + 1];
  }
  std::printf("pw_vmprog pid %d, %u workers, %d s\n", static_cast<int>(getpid()), workers, seconds);
  std::fflush(stdout);
  parkway::Runtime rt(parkway::Options{.workers = workers});
  // Warm up until every worker has started and tried to register (the
  // status names no reason while the started ones are all registered, so
  // fewer than all with no reason means some have not started yet: under
  // TCG a thread can take a while), then tell the harness it may look.
  parkway::SchedExtStatus se{};
  for (int i = 0; i < 200; ++i) {
    parkway::parallel_for(rt, 0, 4 * workers, 1, [](std::size_t) {});
    se = rt.sched_ext_status();
    if (se.reason[0] || se.registered == se.workers) break;
    usleep(50000);
  }
  std::printf("sched_ext registered %u of %u: %s\n", se.registered, se.workers, se.reason[0] ? se.reason : "all");
  std::printf("runtime up\n");
  std::fflush(stdout);
  if (idle) {  // --idle S: no work for S seconds (the workers should park)
    sleep(static_cast<unsigned>(idle));
    std::printf("idle done\n");
    std::fflush(stdout);
  }
  const std::size_t n = 200000;
  const std::uint64_t want = static_cast<std::uint64_t>(n) * (n - 1) / 2;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  unsigned rounds = 0, wrong = 0;
  while (std::chrono::steady_clock::now() < end && !(until && access(until, F_OK) == 0)) {
    std::atomic<std::uint64_t> sum{0};
    parkway::parallel_for(rt, 0, n, 1000, [&](std::size_t i) { sum.fetch_add(i, std::memory_order_relaxed); });
    if (sum.load() != want) ++wrong;
    ++rounds;
  }
  parkway::Stats st = rt.stats();
  rt.shutdown();
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  long cpu_ms = cpu.tv_sec * 1000L + cpu.tv_nsec / 1000000L;
  std::printf("stats: executed=%llu steals=%llu parks=%llu\n",
              static_cast<unsigned long long>(st.total.executed),
              static_cast<unsigned long long>(st.total.steals),
              static_cast<unsigned long long>(st.total.parks));
  std::printf("result %s rounds=%u wrong=%u cpu_ms=%ld\n", wrong || !rounds ? "WRONG" : "ok", rounds, wrong, cpu_ms);
  std::fflush(stdout);
  if (linger) sleep(static_cast<unsigned>(linger));
  return wrong || !rounds ? 1 : 0;
}
