// bench_floor.cpp -- the floor every runtime is compared with: one bare
// thread that sleeps on a futex word (FUTEX_WAIT_PRIVATE) and is woken with
// FUTEX_WAKE_PRIVATE to run one posted function, measured by the same
// driver code (wake, trickle, idle) as the runtimes. It has no scheduler,
// so fib/reduce/uts run sequentially (the T(seq) baselines).
#include <functional>
#include <mutex>
#include <thread>

#include "common.hpp"

namespace {

struct Floor {
  static constexpr const char* kName = "futex";
  static constexpr bool kExternal = true;

  // A mutex-guarded list of functions and a futex word `seq` that post()
  // bumps after each push. The thread drains the list, then sleeps on
  // `seq` while it still holds the value it read before draining (a push
  // after that read changes `seq`, so FUTEX_WAIT returns at once: no lost
  // wake). post() never waits for the thread.
  std::atomic<std::uint32_t> seq{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::function<void()>> list;
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
    std::vector<std::function<void()>> batch;
    for (;;) {
      std::uint32_t seen = seq.load(std::memory_order_acquire);
      {
        std::lock_guard<std::mutex> g(mu);
        batch.swap(list);
      }
      for (auto& f : batch) f();
      bool ran = !batch.empty();
      batch.clear();
      if (ran) continue;
      if (stop.load()) return;
      bench::futex_wait(&seq, seen);
    }
  }
  template <class F>
  void post(F f) {
    {
      std::lock_guard<std::mutex> g(mu);
      list.emplace_back(std::move(f));
    }
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
