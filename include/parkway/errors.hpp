// parkway/errors.hpp -- exceptions parkway throws.
#pragma once

#include <stdexcept>

#include "parkway/export.hpp"

namespace parkway {

// Thrown by Runtime::submit/run, and by TaskGroup::spawn, parallel_for,
// spawn, detach, sync_wait and co_await resume_on(rt) (coro.hpp) whenever
// they hand work to a runtime from outside its pool, once that runtime has begun shutting down, or in a
// child process forked after the runtime was made (its workers are in the
// parent). The task was not accepted.
// Also what the waiter of a task gets (through its Future, TaskGroup::wait,
// Spawned or sync_wait) when Runtime::shutdown(deadline) dropped the task
// unstarted after the deadline.
class PARKWAY_API RuntimeShutdown : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown at a co_await in a coroutine whose task group was cancelled (the
// coroutine stops there; coro.hpp). TaskGroup::wait() of a cancelled group
// does not rethrow it: it is the cancellation, not a failure.
class PARKWAY_API Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace parkway
