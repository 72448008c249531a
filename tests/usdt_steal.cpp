// usdt_steal.cpp -- a workload for check-usdt.sh in which a steal must
// happen: a task spawns a child and then waits for it without helping
// (spinning), so only another worker can run the child, and it can only
// get it by stealing from the spinning worker's deque. The demo alone
// does not guarantee a steal: on a loaded machine one worker can do all
// of its work.
#include <parkway/parkway.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main() {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int round = 0; round < 3; ++round) {
    rt.run([] {
      std::atomic<bool> ran{false};
      parkway::TaskGroup g;
      g.spawn([&ran] { ran.store(true); });
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!ran.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "usdt_steal: the child was not stolen within 30 s\n");
          std::exit(1);
        }
        std::this_thread::yield();
      }
      g.wait();
    });
  }
  parkway::Stats s = rt.stats();
  if (s.total.steals < 3) {
    std::fprintf(stderr, "usdt_steal: %llu steals, expected at least 3\n", (unsigned long long)s.total.steals);
    return 1;
  }
  return 0;
}
