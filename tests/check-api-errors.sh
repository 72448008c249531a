#!/usr/bin/env bash
# check-api-errors.sh -- misuse of the public API is a compile error that
# names the problem, not pages of template errors from deep inside a header.
#
#   check-api-errors.sh [CXX...]     default: g++ clang++-19
#
# Each case is a small program against include/ (no library needed, only
# -fsyntax-only). A "rejects" case must fail to compile AND its first error
# must contain the expected text; a "compiles" case (the same program used
# correctly) must compile, so a case cannot pass because the snippet is
# broken in some other way. Prints "N passed, N failed, N skipped"; a
# compiler that is not installed makes its cases skipped.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
CXXS=("$@")
[ ${#CXXS[@]} -eq 0 ] && CXXS=(g++ clang++-19)
W=$(mktemp -d "${TMPDIR:-/tmp}/pw-api-errors.XXXXXX")
trap 'rm -rf "$W"' EXIT

PRELUDE='#include <parkway/parkway.hpp>
#include <memory>
#include <utility>
struct NoMove { NoMove() = default; NoMove(NoMove&&) = delete; };
int g_x;
'
# name | expectation ("compiles" or the text the first error must contain) | body
CASES=(
  "submit-returns-reference|the task returns a reference|void f(parkway::Runtime& rt) { (void)rt.submit([]() -> int& { return g_x; }); }"
  "submit-returns-value|compiles|void f(parkway::Runtime& rt) { (void)rt.submit([]() -> int { return g_x; }); }"
  "get-result-not-movable|result type cannot be moved|void f(parkway::Runtime& rt) { (void)rt.submit([] { return NoMove{}; }).get(); }"
  "submit-result-not-movable-waited|compiles|void f(parkway::Runtime& rt) { auto x = rt.submit([] { return NoMove{}; }); x.wait(); }"
  "run-result-not-movable|result type cannot be moved|void f(parkway::Runtime& rt) { rt.run([] { return NoMove{}; }); }"
  "submit-result-unique-ptr|compiles|void f(parkway::Runtime& rt) { (void)rt.submit([] { return std::make_unique<NoMove>(); }); }"
  "submit-callable-not-copyable|cannot be copied; pass it with std::move|void f(parkway::Runtime& rt) { auto l = [p = std::unique_ptr<int>()] {}; (void)rt.submit(l); }"
  "submit-callable-moved|compiles|void f(parkway::Runtime& rt) { auto l = [p = std::unique_ptr<int>()] {}; (void)rt.submit(std::move(l)); }"
  "run-callable-not-copyable|cannot be copied; pass it with std::move|void f(parkway::Runtime& rt) { auto l = [p = std::unique_ptr<int>()] {}; rt.run(l); }"
  "run-callable-moved|compiles|void f(parkway::Runtime& rt) { auto l = [p = std::unique_ptr<int>()] {}; rt.run(std::move(l)); }"
  "spawn-callable-not-copyable|cannot be copied; pass it with std::move|void f() { parkway::TaskGroup g; auto l = [p = std::unique_ptr<int>()] {}; g.spawn(l); g.wait(); }"
  "spawn-callable-moved|compiles|void f() { parkway::TaskGroup g; auto l = [p = std::unique_ptr<int>()] {}; g.spawn(std::move(l)); g.wait(); }"
  "submit-callable-with-argument|the callable must take no arguments|void f(parkway::Runtime& rt) { (void)rt.submit([](int) { return 1; }); }"
  "run-callable-with-argument|the callable must take no arguments|void f(parkway::Runtime& rt) { rt.run([](int) {}); }"
  "parallel-for-callable-without-index|the callable must take the index|void f(parkway::Runtime& rt) { parkway::parallel_for(rt, 0, 10, 1, [] {}); }"
  "parallel-for-callable-with-index|compiles|void f(parkway::Runtime& rt) { parkway::parallel_for(rt, 0, 10, 1, [](std::size_t) {}); }"
  "parallel-for-callable-with-index-lvalue|compiles|void f(parkway::Runtime& rt) { parkway::parallel_for(rt, 0, 10, 1, [](std::size_t&) {}); }"
  "spawn-callable-with-argument|the callable must take no arguments|void f() { parkway::TaskGroup g; g.spawn([](int) {}); g.wait(); }"
  "coro-task-of-reference|T is a reference|parkway::Task<int&> f() { co_return g_x; }"
  "coro-task-not-movable|T cannot be moved|parkway::Task<NoMove> f() { co_return NoMove{}; }"
  "coro-task-of-value|compiles|parkway::Task<int> f() { co_return g_x; }"
  "coro-await-task-lvalue|awaited once, as an rvalue|parkway::Task<int> one() { co_return 1; } parkway::Task<int> f() { auto t = one(); co_return co_await t; }"
  "coro-await-task-rvalue|compiles|parkway::Task<int> one() { co_return 1; } parkway::Task<int> f() { auto t = one(); co_return co_await std::move(t); }"
  "coro-await-spawned-lvalue|awaited once, as an rvalue|parkway::Task<int> one() { co_return 1; } parkway::Task<int> f() { auto s = parkway::spawn(one()); co_return co_await s; }"
  "coro-await-spawned-rvalue|compiles|parkway::Task<int> one() { co_return 1; } parkway::Task<int> f() { auto s = parkway::spawn(one()); co_return co_await std::move(s); }"
)

pass=0; fail=0; skip=0
for cxx in "${CXXS[@]}"; do
  if ! command -v "$cxx" >/dev/null; then
    echo "SKIP  $cxx: not installed (make deps), ${#CASES[@]} cases skipped"
    skip=$((skip + ${#CASES[@]}))
    continue
  fi
  for c in "${CASES[@]}"; do
    IFS='|' read -r name want body <<<"$c"
    src=$W/$name.cpp
    printf '%s%s\n' "$PRELUDE" "$body" > "$src"
    if "$cxx" -std=c++20 -I"$HERE/include" -fsyntax-only "$src" > "$W/out" 2>&1; then rc=0; else rc=1; fi
    first=$(grep -m1 -E ': (fatal )?error: ' "$W/out")
    if [ "$want" = compiles ]; then
      if [ $rc = 0 ]; then verdict=PASS; why="compiles"; else verdict=FAIL; why="does not compile: $first"; fi
    elif [ $rc = 0 ]; then
      verdict=FAIL; why="compiles, but must be rejected with \"$want\""
    elif [[ "$first" == *"$want"* ]]; then
      verdict=PASS; why="rejected: ${first##*error: }"
    else
      verdict=FAIL; why="rejected, but the first error is not \"$want\": $first"
    fi
    printf '%-4s  %-10s %-30s %s\n' "$verdict" "$cxx" "$name" "$why"
    if [ $verdict = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); sed 's/^/      | /' "$W/out" | head -15; fi
  done
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
