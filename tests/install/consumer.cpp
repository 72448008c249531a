// consumer.cpp -- a program outside the tree, built by tests/check-install.sh
// with nothing but `pkg-config --cflags --libs parkway` against an installed
// copy: the public API works from it, and the library's exception is caught
// by type. Prints "consumer ok" and exits 0, or says what was wrong.
#include <parkway/coro.hpp>
#include <parkway/io.hpp>
#include <parkway/parkway.hpp>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

namespace {
long fib(int n) {
  if (n < 2) return n;
  long a, b;
  parkway::TaskGroup g;
  g.spawn([&] { a = fib(n - 1); });
  b = fib(n - 2);
  g.wait();
  return a + b;
}
parkway::Task<long> cfib(int n) {
  if (n < 2) co_return n;
  parkway::Spawned<long> a = parkway::spawn(cfib(n - 1));
  long b = co_await cfib(n - 2);
  co_return co_await std::move(a) + b;
}
int failed = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("consumer: FAILED: %s\n", what);
    ++failed;
  }
}
}  // namespace

int main() {
  {
    parkway::Runtime rt(parkway::Options{.workers = 2, .name = "cons"});
    check(rt.run([] { return fib(20); }) == 6765, "Runtime::run with a TaskGroup fib");
    check(parkway::sync_wait(rt, cfib(18)) == 2584, "coroutine fib");
    auto f = rt.submit([] { return 41 + 1; });
    check(f.get() == 42, "submit / get");
    std::vector<int> seen(1000);
    parkway::parallel_for(rt, 0, seen.size(), 7, [&](std::size_t i) { seen[i] += 1; });
    bool once = true;
    for (int v : seen) once = once && v == 1;
    check(once, "parallel_for covers every index once");
    bool rethrown = false;
    try {
      rt.run([]() -> int { throw std::runtime_error("boom"); });
    } catch (const std::runtime_error&) {
      rethrown = true;
    }
    check(rethrown, "a task's exception reaches run()");
    rt.shutdown();
    bool refused = false;
    try {
      rt.submit([] {});
    } catch (const parkway::RuntimeShutdown&) {
      refused = true;
    }
    check(refused, "submit after shutdown throws parkway::RuntimeShutdown");
  }
  std::atomic<int> n{0};
  parkway::parallel_for(0, 100, 1, [&](std::size_t) { n.fetch_add(1); });  // the default runtime
  check(n.load() == 100, "parallel_for outside any pool");
  if (failed) return 1;
  std::printf("consumer ok\n");
  return 0;
}
