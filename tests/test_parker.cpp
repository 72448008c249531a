// test_parker.cpp -- the ParkWord: tokens persist, and the same word can be
// waited on from an io_uring (IORING_OP_FUTEX_WAIT), which is how a worker
// with I/O in flight will park (a later issue builds that on this).
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/futex.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "parker.hpp"
#include "parkway/parkway.hpp"

using namespace std::chrono_literals;
using parkway::detail::ParkWord;

TEST(ParkWord, TokenBeforeSleepIsNotLost) {
  ParkWord pw;
  EXPECT_FALSE(pw.notify());                 // owner awake: no futex call, a token stays
  EXPECT_EQ(pw.announce(), parkway::detail::kNotified);  // the owner finds it and must not sleep
  EXPECT_EQ(pw.word.load(), parkway::detail::kAwake);
}

TEST(ParkWord, HandOffIsNotDowngraded) {
  ParkWord pw;
  ASSERT_EQ(pw.announce(), parkway::detail::kAwake);
  pw.hand_off();
  EXPECT_FALSE(pw.notify());
  EXPECT_EQ(pw.sleep(), parkway::detail::kHandedOff);
}

TEST(ParkWord, SleeperIsWoken) {
  for (int i = 0; i < 200; ++i) {
    ParkWord pw;
    std::atomic<std::uint32_t> got{99};
    std::thread t([&] {
      if (pw.announce() != parkway::detail::kAwake) {
        got = parkway::detail::kNotified;
        return;
      }
      got = pw.sleep();
    });
    if (i % 2) std::this_thread::sleep_for(50us);
    pw.notify();
    t.join();
    EXPECT_EQ(got.load(), parkway::detail::kNotified);
  }
}

namespace {
constexpr unsigned kOpFutexWait = 51;  // IORING_OP_FUTEX_WAIT (liburing 2.3 lacks the helper)
}

// A thread parks "inside its ring": it submits IORING_OP_FUTEX_WAIT on its
// ParkWord and blocks in io_uring_wait_cqe; ParkWord::notify() from another
// thread (a plain FUTEX_WAKE_PRIVATE) must complete that CQE.
TEST(ParkWord, WaitableFromIoUring) {
  io_uring ring;
  int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) GTEST_SKIP() << "io_uring is not available here: io_uring_queue_init: " << strerror(-rc);
  ParkWord pw;
  ASSERT_EQ(pw.announce(), parkway::detail::kAwake);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  ASSERT_NE(sqe, nullptr);
  io_uring_prep_rw(kOpFutexWait, sqe, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, &pw.word, 0, 0);
  sqe->addr2 = parkway::detail::kParked;   // sleep while the word is still kParked
  sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
  sqe->user_data = 7;
  ASSERT_EQ(io_uring_submit(&ring), 1);

  io_uring_cqe* cqe = nullptr;
  __kernel_timespec short_ts{0, 20 * 1000 * 1000};
  rc = io_uring_wait_cqe_timeout(&ring, &cqe, &short_ts);
  if (rc == 0 && cqe->res == -EINVAL) {
    int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    io_uring_queue_exit(&ring);
    GTEST_SKIP() << "this kernel's io_uring has no IORING_OP_FUTEX_WAIT (res " << res << ")";
  }
  ASSERT_EQ(rc, -ETIME) << "the futex wait completed before anyone woke it";

  std::thread waker([&] {
    std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(pw.notify());  // saw kParked: issued FUTEX_WAKE
  });
  __kernel_timespec long_ts{5, 0};
  rc = io_uring_wait_cqe_timeout(&ring, &cqe, &long_ts);
  waker.join();
  ASSERT_EQ(rc, 0) << "the wake did not complete the io_uring futex wait";
  EXPECT_EQ(cqe->user_data, 7u);
  EXPECT_EQ(cqe->res, 0);
  io_uring_cqe_seen(&ring, cqe);
  EXPECT_EQ(pw.word.exchange(parkway::detail::kAwake), parkway::detail::kNotified);
  io_uring_queue_exit(&ring);
}

// An outside thread's park word stays its own while the thread's C++
// thread_local objects are destroyed, since one of their destructors may
// still wait on parkway work. Were it released by a thread_local of
// parkway's, destroyed before any thread_local constructed earlier than
// it, such a destructor would wait on a word that another live thread
// could be given, and the two would lose each other's wakeups.
namespace {
std::atomic<int> g_stage{0};
std::atomic<std::uint32_t> g_exiting_id{~0u}, g_live_id{~0u};
parkway::Runtime* g_rt = nullptr;
struct WaitsInDestructor {
  ~WaitsInDestructor() {
    g_rt->submit([] {}).get();  // a blocking wait during thread exit
    g_exiting_id = parkway::detail::this_thread_park_id();
    g_stage = 1;
    while (g_stage.load() != 2) std::this_thread::yield();
  }
};
thread_local WaitsInDestructor t_waits;
}  // namespace

TEST(ParkId, StaysOwnedWhileThreadLocalsAreDestroyed) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  g_rt = &rt;
  g_stage = 0;
  std::thread x([] {
    (void)&t_waits;             // constructed before this thread takes a park word
    g_rt->submit([] {}).get();  // takes it
  });
  while (g_stage.load() != 1) std::this_thread::yield();
  std::thread y([] { g_live_id = parkway::detail::this_thread_park_id(); });
  y.join();
  g_stage = 2;
  x.join();
  EXPECT_NE(g_exiting_id.load(), g_live_id.load());
}

// ...and is given back when the thread has exited: short-lived threads
// that each wait once do not grow the registry.
TEST(ParkId, ReleasedAtThreadExit) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  std::uint32_t first = ~0u;
  for (int i = 0; i < 300; ++i) {
    std::thread t([&] {
      std::uint32_t mine = parkway::detail::this_thread_park_id();  // taken here at the latest
      rt.submit([] {}).get();
      if (i == 0) first = mine;
    });
    t.join();
  }
  // 300 threads, one at a time: they shared a handful of ids.
  std::uint32_t id = parkway::detail::acquire_park_word();
  parkway::detail::release_park_word(id);
  EXPECT_LT(id, first + 16) << "first thread's id " << first;
}
