// pw_linkprobe NTHREADS SECONDS -- exercises SchedExtLink without the
// runtime: NTHREADS plain threads register, cycle Busy (spin) -> Searching
// (spin) -> Parked (sleep) for SECONDS, unregister. The VM test reads the
// map (`parkway sched status`) while it runs. Exit 1 if the link is inactive.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "sched_ext_link.hpp"

using parkway::detail::SchedExtLink;
using parkway::detail::WorkerState;
using Clock = std::chrono::steady_clock;

static void spin_for(std::chrono::microseconds d) {
  auto end = Clock::now() + d;
  while (Clock::now() < end) {
  }
}

int main(int argc, char** argv) {
  unsigned n = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 2;
  SchedExtLink link(n);
  std::printf("linkprobe pid %d: link %s\n", static_cast<int>(getpid()), link.active() ? "active" : "inactive");
  if (!link.active()) return 1;
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      link.register_worker(i);
      while (Clock::now() < end) {
        link.publish(i, WorkerState::Busy);
        spin_for(std::chrono::milliseconds(40));
        link.publish(i, WorkerState::Searching);
        spin_for(std::chrono::milliseconds(10));
        link.publish(i, WorkerState::Parked);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      link.unregister_worker(i);
    });
  for (auto& t : ts) t.join();
  std::printf("linkprobe ok: %u threads registered, published, unregistered\n", n);
  return 0;
}
