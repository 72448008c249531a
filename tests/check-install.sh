#!/usr/bin/env bash
# check-install.sh MAKE BUILD VERSION -- what a user of the installed
# library relies on:
#  1. `make install PREFIX=p` puts the headers, libparkway.a, libparkway.so
#     (with its soname links) and parkway.pc under p; the soname follows
#     VERSION (libparkway.so.MAJOR, or libparkway.so.0.MINOR while MAJOR is
#     0); under umask 077 every installed file is still readable by all;
#  2. libparkway.so exports only parkway:: symbols, including the typeinfo
#     of parkway::RuntimeShutdown (so a catch matches it by type);
#  3. a program outside the tree (tests/install/consumer.cpp) builds with
#     nothing but `pkg-config --cflags --libs parkway` and runs, linked to
#     the shared library and to the static one;
#  4. the same program builds as a CMake project (tests/install/
#     CMakeLists.txt) with find_package(parkway CONFIG) and the imported
#     targets parkway::parkway and parkway::parkway_static, and runs; a
#     request for a version this is not is refused; the installed tree,
#     moved to another directory, is found and used there (skipped without
#     cmake);
#  5. bin/parkway is installed, answers --version and has the trace commands
#  6. `make uninstall PREFIX=p` removes every file install wrote.
set -u
make_cmd=$1; build=$2; version=$3
prefix=$(realpath -m "$build/install-check")
work=$(realpath -m "$build/install-check-app")
major=${version%%.*}
minor=${version#*.}; minor=${minor%%.*}
if [ "$major" = 0 ]; then soname=libparkway.so.0.$minor; else soname=libparkway.so.$major; fi
pass=0; fail=0; skip=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
skipped() { echo "SKIP: $1"; skip=$((skip + 1)); }

rm -rf "$prefix" "$work"
mkdir -p "$work"
if "$make_cmd" --no-print-directory install PREFIX="$prefix" >"$work/install.log" 2>&1; then
  ok "make install PREFIX=$prefix"
else
  bad "make install failed:"; sed 's/^/  /' "$work/install.log"
fi
for f in lib/libparkway.a lib/libparkway.so.$version lib/pkgconfig/parkway.pc bin/parkway-httpd \
         lib/cmake/parkway/parkwayConfig.cmake lib/cmake/parkway/parkwayConfigVersion.cmake; do
  if [ -f "$prefix/$f" ]; then ok "installed $f"; else bad "missing $prefix/$f"; fi
done
for l in lib/libparkway.so lib/$soname; do
  if [ -L "$prefix/$l" ] && [ -e "$prefix/$l" ]; then ok "link $l"; else bad "missing or dangling link $prefix/$l"; fi
done
missing=0
for h in include/parkway/*.hpp; do [ -f "$prefix/$h" ] || { bad "header $h not installed"; missing=1; }; done
[ "$missing" -eq 0 ] && ok "all $(ls include/parkway/*.hpp | wc -l) public headers installed"
got=$(readelf -d "$prefix/lib/libparkway.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$got" = "$soname" ]; then ok "soname $got (version $version)"; else bad "soname is '$got', want $soname (version $version)"; fi
if grep -q "IMPORTED_SONAME \"$soname\"" "$prefix/lib/cmake/parkway/parkwayConfig.cmake" 2>/dev/null; then
  ok "parkwayConfig.cmake names the soname $soname"
else
  bad "parkwayConfig.cmake does not name the soname $soname"
fi

# Under a restrictive umask the installed files keep modes every user can
# read (and the directories, search).
umask_prefix="$work/umask077"
if (umask 077 && "$make_cmd" --no-print-directory install PREFIX="$umask_prefix" >"$work/install-umask.log" 2>&1); then
  unreadable=$(find "$umask_prefix" \( -type f ! -perm -o+r \) -o \( -type d ! -perm -o+rx \))
  if [ -z "$unreadable" ]; then
    ok "installed under umask 077: every file readable by all"
  else
    bad "installed under umask 077, not readable by all:"; sed "s|^|  |" <<<"$unreadable"
  fi
else
  bad "make install under umask 077 failed:"; sed 's/^/  /' "$work/install-umask.log"
fi
rm -rf "$umask_prefix"

syms=$(nm -D --defined-only -C "$prefix/lib/libparkway.so.$version" | cut -d' ' -f3-)
others=$(grep -v -E '^(parkway::|typeinfo for parkway::|typeinfo name for parkway::|vtable for parkway::)' <<<"$syms")
if [ -n "$syms" ] && [ -z "$others" ]; then
  ok "only parkway:: symbols exported ($(wc -l <<<"$syms"))"
else
  bad "symbols outside parkway:: exported:"; sed 's/^/  /' <<<"$others"
fi
if grep -qx 'typeinfo for parkway::RuntimeShutdown' <<<"$syms"; then
  ok "typeinfo for parkway::RuntimeShutdown exported"
else
  bad "typeinfo for parkway::RuntimeShutdown not exported"
fi

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
if g++ -O1 -o "$work/consumer" tests/install/consumer.cpp $(pkg-config --cflags --libs parkway) 2>"$work/cc.log"; then
  ok "consumer builds with pkg-config --cflags --libs parkway"
  out=$(LD_LIBRARY_PATH="$prefix/lib" "$work/consumer" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] && LD_LIBRARY_PATH="$prefix/lib" ldd "$work/consumer" | grep -q "$soname => $prefix/lib/$soname"; then
    ok "consumer runs against the installed libparkway.so: $out"
  else
    bad "consumer (shared) failed: $out"
  fi
else
  bad "consumer does not build:"; sed 's/^/  /' "$work/cc.log"
fi
if g++ -O1 -o "$work/consumer-static" tests/install/consumer.cpp $(pkg-config --cflags parkway) \
     "$prefix/lib/libparkway.a" $(pkg-config --libs-only-other parkway) \
     $(pkg-config --static --libs-only-l parkway | sed "s/-lparkway//") 2>"$work/cc-static.log"; then
  out=$("$work/consumer-static" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] && ! ldd "$work/consumer-static" | grep -q libparkway; then ok "consumer linked to libparkway.a runs: $out"; else bad "consumer (static) failed: $out"; fi
else
  bad "consumer does not link statically:"; sed 's/^/  /' "$work/cc-static.log"
fi

# Every public header compiles without sized deallocation, which clang
# before 19 (bookworm's default clang++ is 14) leaves off: nothing in them
# may need a flag the .pc does not give. g++ with the flag off stands in
# where no such clang++ is on PATH.
nosized=(g++ -fno-sized-deallocation)
command -v clang++ >/dev/null && nosized=(clang++)
if "${nosized[@]}" -O1 -o "$work/consumer-nosized" tests/install/consumer.cpp $(pkg-config --cflags --libs parkway) \
     2>"$work/cc-nosized.log" && LD_LIBRARY_PATH="$prefix/lib" "$work/consumer-nosized" >/dev/null 2>&1; then
  ok "consumer builds and runs without sized deallocation (${nosized[*]})"
else
  bad "consumer without sized deallocation (${nosized[*]}):"; sed 's/^/  /' "$work/cc-nosized.log"
fi

# 4. CMake: find_package(parkway CONFIG) from PREFIX, both imported targets.
if command -v cmake >/dev/null; then
  cm="$work/cmake"
  if cmake -S tests/install -B "$cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
       -DPARKWAY_WANT_VERSION="$version" >"$work/cmake.log" 2>&1 \
     && cmake --build "$cm" -j "$(nproc)" >>"$work/cmake.log" 2>&1; then
    ok "CMake project builds with find_package(parkway $version CONFIG) and parkway::parkway"
    out=$("$cm/app" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && ldd "$cm/app" | grep -q "$soname => $prefix/lib/$soname"; then
      ok "CMake app (parkway::parkway) runs against the installed libparkway.so: $out"
    else
      bad "CMake app (parkway::parkway) failed (exit $rc): $out"; ldd "$cm/app" | sed 's/^/  /'
    fi
    out=$("$cm/app_static" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && ! ldd "$cm/app_static" | grep -q libparkway; then
      ok "CMake app_static (parkway::parkway_static) runs: $out"
    else
      bad "CMake app_static (parkway::parkway_static) failed (exit $rc): $out"
    fi
  else
    bad "CMake project does not configure or build:"; sed 's/^/  /' "$work/cmake.log"
  fi
  if cmake -S tests/install -B "$work/cmake-newer" -DCMAKE_PREFIX_PATH="$prefix" \
       -DPARKWAY_WANT_VERSION="$((major + 1)).0" >"$work/cmake-newer.log" 2>&1; then
    bad "find_package(parkway $((major + 1)).0) accepted version $version"
  elif grep -q "$prefix/lib/cmake/parkway/parkwayConfig.cmake, version: $version" "$work/cmake-newer.log"; then
    ok "find_package(parkway $((major + 1)).0) refuses version $version"
  else
    bad "find_package(parkway $((major + 1)).0) failed without naming the installed version:"
    sed 's/^/  /' "$work/cmake-newer.log"
  fi
  # The installed tree, moved: the package finds it where it now is.
  moved="$work/moved-prefix"
  mv "$prefix" "$moved"
  cmm="$work/cmake-moved"
  if cmake -S tests/install -B "$cmm" -DCMAKE_PREFIX_PATH="$moved" >"$work/cmake-moved.log" 2>&1 \
     && cmake --build "$cmm" --target app >>"$work/cmake-moved.log" 2>&1; then
    out=$("$cmm/app" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && ldd "$cmm/app" | grep -q "$soname => $moved/lib/$soname"; then
      ok "CMake package of a moved prefix uses the moved files: $out"
    else
      bad "CMake app against the moved prefix (exit $rc) does not use $moved/lib/$soname: $out"
      ldd "$cmm/app" | sed 's/^/  /'
    fi
  else
    bad "CMake project does not configure or build against the moved prefix $moved:"
    sed 's/^/  /' "$work/cmake-moved.log"
  fi
  mv "$moved" "$prefix"
else
  skipped "CMake package: cmake is not installed"
fi

# 5. The parkway tool, always installed (its trace commands need only the
# compiler; without clang-19 or libbpf its sched commands say so).
if [ -x "$prefix/bin/parkway" ]; then
  out=$("$prefix/bin/parkway" --version 2>&1)
  if [ "$out" = "parkway $version" ]; then ok "installed bin/parkway: $out"; else bad "bin/parkway --version says '$out'"; fi
  if "$prefix/bin/parkway" trace --help 2>&1 | grep -q 'parkway trace report'; then
    ok "installed bin/parkway has the trace commands"
  else
    bad "installed bin/parkway trace --help does not list trace report"
  fi
else
  bad "bin/parkway was not installed"
fi

if "$make_cmd" --no-print-directory uninstall PREFIX="$prefix" >"$work/uninstall.log" 2>&1; then
  left=$(find "$prefix" \( -type f -o -type l \) 2>/dev/null)
  if [ -z "$left" ]; then ok "make uninstall removed everything"; else bad "left after uninstall:"; sed 's/^/  /' <<<"$left"; fi
else
  bad "make uninstall failed:"; sed 's/^/  /' "$work/uninstall.log"
fi
rm -rf "$prefix" "$work"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
