// The ring's deadline heap (userspace/io/deadline_heap.hpp) against a
// sorted reference, under random pushes, erasures from anywhere and pops
// of the expired.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "io/deadline_heap.hpp"

namespace {
struct Item {
  std::uint32_t deadline_pos = parkway::io::detail::kNoDeadline;
  std::int64_t at = 0;
};
}  // namespace

TEST(DeadlineHeap, MatchesASortedReferenceUnderRandomPushEraseAndPop) {
  std::mt19937_64 rng(12345);
  std::vector<Item> items(500);
  parkway::io::detail::DeadlineHeap<Item> heap;
  std::set<std::pair<std::int64_t, Item*>> ref;
  std::int64_t now = 0;
  for (int step = 0; step < 200000; ++step) {
    Item* it = &items[rng() % items.size()];
    switch (rng() % 4) {
      case 0:
      case 1:  // push (if not in), a deadline near now, ties allowed
        if (it->deadline_pos == parkway::io::detail::kNoDeadline) {
          it->at = now + std::int64_t(rng() % 64);
          heap.push(it, it->at);
          ref.insert({it->at, it});
        }
        break;
      case 2:  // erase from wherever it is (or nothing, if absent)
        if (it->deadline_pos != parkway::io::detail::kNoDeadline) ref.erase({it->at, it});
        heap.erase(it);
        EXPECT_EQ(it->deadline_pos, parkway::io::detail::kNoDeadline);
        break;
      case 3: {  // time passes; everything due comes out, earliest first
        now += std::int64_t(rng() % 8);
        std::int64_t last = INT64_MIN;
        while (Item* x = heap.pop_expired(now)) {
          ASSERT_FALSE(ref.empty());
          ASSERT_EQ(ref.begin()->first, x->at);
          ASSERT_LE(x->at, now);
          ASSERT_GE(x->at, last);
          last = x->at;
          ref.erase({x->at, x});
          ASSERT_EQ(x->deadline_pos, parkway::io::detail::kNoDeadline);
        }
        if (!ref.empty()) {
          ASSERT_GT(ref.begin()->first, now);
        }
        break;
      }
    }
    ASSERT_EQ(heap.size(), ref.size());
    if (!ref.empty()) {
      ASSERT_EQ(heap.earliest(), ref.begin()->first);
    }
  }
}
