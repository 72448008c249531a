#!/usr/bin/env bash
# check-doc-snippets.sh [BUILD] -- every ```cpp block of README.md and
# docs/guide.md compiles against include/, links against BUILD/libparkway.a
# (default build/; `make lib` first) and, if it is a program, runs and
# exits 0.
#
# What a block is, by the HTML comment on the last non-blank line before
# its fence (none: a program). A fence may be indented (a block in a list
# item); its lines lose that indent.
#
#   (no comment)                 a whole translation unit. With a main(), it
#                                is built and run (60 s limit; exit 0
#                                wanted). Without one, it is compiled and
#                                linked with an empty main() added, not run.
#   <!-- snippet: fragment -->   statements. The script puts them in the
#                                body of a function called from main(),
#                                after a prelude that includes
#                                <parkway/parkway.hpp>, <parkway/io.hpp>,
#                                <atomic> <chrono> <cstdio> <stdexcept>
#                                <string> <thread> <vector> and says
#                                `using namespace std::chrono_literals;`;
#                                then it is built and run like a program.
#   <!-- snippet: skip -->       not compiled (counted as skipped).
#
# Every README block must be a program with a main(): the README's example
# is what a reader pastes first, so it is built and run as pasted.
# Flags: g++ -std=c++20 -O1 -Wall -Wextra -Werror -Iinclude.
# Output: one line per block, then "N passed, N failed, N skipped"; the
# exit status is non-zero when a block failed.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${1:-build}
cxx=${CXX:-g++}
lib="$build/libparkway.a"
docs=(README.md docs/guide.md)
pass=0; fail=0; skip=0

if [ ! -f "$lib" ]; then
  echo "FAIL: $lib not found (make lib)"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Splits the blocks out: $work/NNN.src holds a block's text, and each line
# of $work/index is "NNN<TAB>file<TAB>line<TAB>kind".
for doc in "${docs[@]}"; do
  [ -f "$doc" ] || { echo "FAIL: $doc missing"; fail=$((fail + 1)); continue; }
  awk -v doc="$doc" -v dir="$work" '
    BEGIN { n = 0; while ((getline l < (dir "/count")) > 0) n = l; close(dir "/count") }
    !inside && /^ *```cpp[ \t]*$/ {
      # A block in a list item is indented: its lines lose that indent.
      inside = 1; n++; start = NR; out = sprintf("%s/%03d.src", dir, n); indent = index($0, "`") - 1
      kind = "program"
      if (last ~ /^<!-- *snippet: *[a-z]+ *-->$/) { kind = last; sub(/^<!-- *snippet: */, "", kind); sub(/ *-->$/, "", kind) }
      printf "" > out
      next
    }
    inside && /^ *```[ \t]*$/ {
      inside = 0; close(out); last = $0
      printf "%03d\t%s\t%d\t%s\n", n, doc, start, kind >> (dir "/index")
      next
    }
    inside { print (substr($0, 1, indent) ~ /^ *$/ ? substr($0, indent + 1) : $0) > out; next }
    /[^ \t]/ { last = $0 }
    END {
      if (inside) printf "%03d\t%s\t%d\tunclosed\n", n, doc, start >> (dir "/index")
      print n > (dir "/count")
    }
  ' "$doc"
done
[ -f "$work/index" ] || { echo "no cpp blocks found"; echo "0 passed, 0 failed, 0 skipped"; exit 0; }

prelude='#include <parkway/parkway.hpp>
#include <parkway/io.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
using namespace std::chrono_literals;'

readme_programs=0
while IFS=$'\t' read -r id doc line kind; do
  src="$work/$id.src"; cpp="$work/$id.cpp"; bin="$work/$id.bin"; log="$work/$id.log"
  where="$doc:$line"
  has_main=0
  grep -qE '^[[:space:]]*int[[:space:]]+main[[:space:]]*\(' "$src" && has_main=1
  case "$kind" in
    skip)
      echo "skip $where"
      skip=$((skip + 1)); continue ;;
    fragment)
      { echo "$prelude"; echo "static void parkway_snippet() {"; echo "#line $((line + 1)) \"$doc\""; cat "$src"
        echo "}"; echo "int main() { parkway_snippet(); }"; } >"$cpp"
      run=1 ;;
    program)
      { echo "#line $((line + 1)) \"$doc\""; cat "$src"; } >"$cpp"
      run=$has_main
      [ "$has_main" -eq 1 ] || echo "int main() {}" >>"$cpp" ;;
    *)
      echo "FAIL $where: unknown marker '$kind' (program, fragment or skip)"
      fail=$((fail + 1)); continue ;;
  esac
  if [ "$doc" = README.md ]; then
    if [ "$kind" != program ] || [ "$has_main" -ne 1 ]; then
      echo "FAIL $where: a README block must be a whole program with a main()"
      fail=$((fail + 1)); continue
    fi
    readme_programs=$((readme_programs + 1))
  fi
  # #line makes the compiler's messages name the document's own lines.
  if ! "$cxx" -std=c++20 -O1 -Wall -Wextra -Werror -Iinclude -o "$bin" "$cpp" "$lib" -luring -pthread \
       >"$log" 2>&1; then
    echo "FAIL $where ($kind): does not build"
    head -n 30 "$log" | sed 's/^/    /'
    fail=$((fail + 1)); continue
  fi
  if [ "$run" -eq 0 ]; then
    echo "ok   $where ($kind, no main: built and linked)"
    pass=$((pass + 1)); continue
  fi
  out=$(cd "$work" && timeout 60 "$bin" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "ok   $where ($kind: built, ran, exit 0)"
    pass=$((pass + 1))
  else
    [ "$rc" -eq 124 ] && rc="124, timed out after 60 s"
    echo "FAIL $where ($kind): exit $rc"
    printf '%s\n' "$out" | tail -n 20 | sed 's/^/    /'
    fail=$((fail + 1))
  fi
done <"$work/index"

if [ "$readme_programs" -eq 0 ]; then
  echo "FAIL README.md: no cpp block with a main() to build and run"
  fail=$((fail + 1))
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
