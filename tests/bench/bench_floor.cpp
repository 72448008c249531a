// bench_floor.cpp -- the floor every runtime is compared with: one bare
// thread that sleeps on a futex word (FUTEX_WAIT_PRIVATE) and is woken with
// FUTEX_WAKE_PRIVATE to run one posted function, measured by the same
// driver code (wake, trickle, idle) as the runtimes. It has no scheduler,
// so fib/reduce/uts run sequentially (the T(seq) baselines).
#include <functional>
#include <thread>

#include "common.hpp"

namespace {

struct Floor {
  static constexpr const char* kName = "futex";
  static constexpr bool kExternal = true;

  // One slot: the poster stores a function and bumps `seq`; the thread
  // runs every function it finds and sleeps on `seq` otherwise. The trickle
  // posts once per ms and each task is far shorter, so one slot suffices;
  // post() waits (spinning) if the previous task was not taken yet.
  std::atomic<std::uint32_t> seq{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> taken{true};
  std::function<void()> slot;
  std::thread th;

  explicit Floor(unsigned) : th([this] { loop(); }) {}
  ~Floor() {
    stop.store(true);
    seq.fetch_add(1);
    bench::futex_wake(&seq);
    th.join();
  }
  static unsigned min_threads(unsigned) { return 1; }

  void loop() {
    std::uint32_t seen = 0;
    for (;;) {
      std::uint32_t s;
      while ((s = seq.load(std::memory_order_acquire)) == seen) bench::futex_wait(&seq, seen);
      seen = s;
      if (stop.load()) return;
      std::function<void()> f = std::move(slot);
      taken.store(true, std::memory_order_release);
      f();
    }
  }
  template <class F>
  void post(F f) {
    while (!taken.load(std::memory_order_acquire)) {
    }
    taken.store(false, std::memory_order_relaxed);
    slot = std::move(f);
    seq.fetch_add(1, std::memory_order_release);
    bench::futex_wake(&seq);
  }

  long fib(int n) { return bench::fib_seq(n); }
  std::uint64_t reduce(std::uint64_t nchunks, std::uint64_t chunk) { return bench::reduce_seq(nchunks, chunk); }
  std::uint64_t uts(const bench::UtsParams& p) { return bench::uts_seq(p); }
  std::string extra() { return ""; }
};

}  // namespace

int main(int argc, char** argv) { return bench::bench_main<Floor>(argc, argv); }
