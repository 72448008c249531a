// unobserved_exception.cpp -- reporting a task's exception that nobody will
// ever rethrow (its TaskGroup, Future or Spawned handle went away without
// asking): on stderr, so that a failure is never lost silently. A
// RuntimeShutdown that ends on a runtime's threads while a
// shutdown(deadline) of it is under way is counted in that call's report
// instead (ShutdownReport::unobserved): a bounded shutdown of a server
// stops every connection's detached coroutine, a line each.
#include <cstdio>
#include <exception>

#include "parkway/errors.hpp"
#include "parkway/future.hpp"
#include "runtime_impl.hpp"

namespace parkway::detail {

void report_unobserved_exception(const std::exception_ptr& e, const char* what) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const Cancelled&) {
    // A coroutine stopped by its group's cancellation: the cancellation,
    // not a failure (coro.hpp).
  } catch (const RuntimeShutdown& x) {
    RuntimeImpl* rt = runtime_here();
    if (!rt || !rt->count_unobserved()) std::fprintf(stderr, "parkway: %s: %s\n", what, x.what());
  } catch (const std::exception& x) {
    std::fprintf(stderr, "parkway: %s: %s\n", what, x.what());
  } catch (...) {
    std::fprintf(stderr, "parkway: %s (an exception not derived from std::exception)\n", what);
  }
}

}  // namespace parkway::detail
