// test_env_choice.cpp -- the environment variables that pick one of a few
// values (userspace/env_choice.hpp): an accepted value is taken; a
// mistaken one is named on stderr with the values accepted, and the
// default applies, at every place the library reads one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "env_choice.hpp"
#include "parkway/io.hpp"
#include "parkway/parkway.hpp"

using namespace std::chrono_literals;
using parkway::detail::env_choice;

namespace {
constexpr const char* kVar = "PARKWAY_TEST_CHOICE";

int choice() { return env_choice(kVar, {"a", "bb"}, "the default applies"); }

// This test binary run again with `assignment` in its environment and
// only `filter`: what it printed, stdout and stderr together.
std::string run_self(const std::string& assignment, const char* filter) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "readlink /proc/self/exe failed";
  exe[n] = '\0';
  const std::string cmd = "env " + assignment + " '" + exe + "' --gtest_filter=" + filter + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return "popen failed";
  std::string out;
  char buf[4096];
  for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) != 0;) out.append(buf, got);
  const int status = ::pclose(f);
  if (status != 0) out += "\n(exit status " + std::to_string(status) + ")";
  return out;
}
}  // namespace

TEST(EnvChoice, TakesAnAcceptedValueAndNamesAMistakenOne) {
  ::unsetenv(kVar);
  testing::internal::CaptureStderr();
  EXPECT_EQ(choice(), -1) << "unset";
  ::setenv(kVar, "", 1);
  EXPECT_EQ(choice(), -1) << "empty";
  ::setenv(kVar, "a", 1);
  EXPECT_EQ(choice(), 0);
  ::setenv(kVar, "bb", 1);
  EXPECT_EQ(choice(), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "nothing to say of accepted, unset or empty values";

  ::setenv(kVar, "b", 1);  // a prefix of "bb" is not "bb"
  testing::internal::CaptureStderr();
  EXPECT_EQ(choice(), -1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "parkway: PARKWAY_TEST_CHOICE=b is not one of a, bb; the default applies\n");

  ::setenv(kVar, std::string(2000, 'x').c_str(), 1);  // cut short, still one line
  testing::internal::CaptureStderr();
  EXPECT_EQ(choice(), -1);
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_LT(line.size(), 512u);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  ::unsetenv(kVar);
}

// What EveryVariableIsReadWithItsValuesNamed runs in a child process: a
// runtime (PARKWAY_SCHED_EXT) whose worker makes its ring (PARKWAY_IO_SETUP,
// PARKWAY_IO_WAKE, PARKWAY_IO_IOWAIT) in a library whose load read
// PARKWAY_MEMBARRIER. Alone it checks only that a ring sleep ends.
TEST(EnvChoice, ARuntimeWithARing) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const auto t0 = std::chrono::steady_clock::now();
  const parkway::io::Result<void> slept = parkway::sync_wait(
      rt, []() -> parkway::Task<parkway::io::Result<void>> { co_return co_await parkway::io::sleep_for(1ms); }());
  EXPECT_TRUE(slept) << slept.error().message();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1ms);
}

TEST(EnvChoice, EveryVariableIsReadWithItsValuesNamed) {
  struct Case {
    const char* var;
    const char* accepted;  // as the line lists them
  };
  const Case cases[] = {
      {"PARKWAY_MEMBARRIER", "0, 1"},
      {"PARKWAY_IO_SETUP", "coop"},
      {"PARKWAY_IO_WAKE", "eventfd, futex"},
      {"PARKWAY_IO_IOWAIT", "0, 1"},
      {"PARKWAY_SCHED_EXT", "0, off, false, no, OFF, FALSE, NO, 1, on, true, yes, ON, TRUE, YES"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.var);
    const std::string out = run_self(std::string(c.var) + "=bogus", "EnvChoice.ARuntimeWithARing");
    EXPECT_NE(out.find(std::string("parkway: ") + c.var + "=bogus is not one of " + c.accepted + "; "),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << "the default applies: " << out;
  }
  // An accepted value of each: nothing said.
  const std::string out = run_self(
      "PARKWAY_MEMBARRIER=1 PARKWAY_IO_SETUP=coop PARKWAY_IO_WAKE=eventfd PARKWAY_IO_IOWAIT=0 PARKWAY_SCHED_EXT=off",
      "EnvChoice.ARuntimeWithARing");
  EXPECT_EQ(out.find("is not one of"), std::string::npos) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}
