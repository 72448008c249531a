// parkway/parkway.hpp -- the whole public API.
//
//   parkway::Runtime rt(parkway::Options{.workers = 4});
//   int r = rt.run([] { return work(); });
//   auto f = rt.submit([] { ... });          // from any thread
//   parkway::TaskGroup g; g.spawn(...); g.wait();
//   parkway::parallel_for(0, n, 64, [&](std::size_t i) { ... });
//   parkway::Stats s = rt.stats();
#pragma once

#include "parkway/coro.hpp"
#include "parkway/errors.hpp"
#include "parkway/future.hpp"
#include "parkway/options.hpp"
#include "parkway/parallel_for.hpp"
#include "parkway/runtime.hpp"
#include "parkway/stats.hpp"
#include "parkway/task.hpp"
#include "parkway/task_group.hpp"
