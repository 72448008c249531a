// env_choice.cpp -- see env_choice.hpp.
#include "env_choice.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace parkway::detail {

int env_choice(const char* name, std::initializer_list<const char*> accepted, const char* fallback) noexcept {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  int i = 0;
  for (const char* a : accepted) {
    if (std::strcmp(v, a) == 0) return i;
    ++i;
  }
  // One write, so that lines of several threads do not interleave.
  char line[512] = {};
  int n = std::snprintf(line, sizeof line, "parkway: %s=%.64s is not one of", name, v);
  const char* sep = " ";
  for (const char* a : accepted) {
    if (n < 0 || std::size_t(n) >= sizeof line) break;
    n += std::snprintf(line + n, sizeof line - std::size_t(n), "%s%s", sep, a);
    sep = ", ";
  }
  if (n >= 0 && std::size_t(n) < sizeof line)
    std::snprintf(line + n, sizeof line - std::size_t(n), "; %s\n", fallback);
  if (line[sizeof line - 2] != '\0') line[sizeof line - 2] = '\n';  // cut short: still one line
  std::fputs(line, stderr);
  return -1;
}

}  // namespace parkway::detail
