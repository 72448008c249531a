#!/usr/bin/env bash
# check-install.sh MAKE BUILD VERSION -- what a user of the installed
# library relies on:
#  1. `make install PREFIX=p` puts the headers, libparkway.a, libparkway.so
#     (with its soname links) and parkway.pc under p;
#  2. libparkway.so exports only parkway:: symbols, including the typeinfo
#     of parkway::RuntimeShutdown (so a catch matches it by type);
#  3. a program outside the tree (tests/install/consumer.cpp) builds with
#     nothing but `pkg-config --cflags --libs parkway` and runs, linked to
#     the shared library and to the static one;
#  4. the same program builds as a CMake project (tests/install/
#     CMakeLists.txt) with find_package(parkway CONFIG) and the imported
#     targets parkway::parkway and parkway::parkway_static, and runs; a
#     request for a version this is not is refused (skipped without cmake);
#  5. bin/parkway is installed, answers --version and has the trace commands
#  6. `make uninstall PREFIX=p` removes every file install wrote.
set -u
make_cmd=$1; build=$2; version=$3
prefix=$(realpath -m "$build/install-check")
work=$(realpath -m "$build/install-check-app")
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
for l in lib/libparkway.so lib/libparkway.so.0; do
  if [ -L "$prefix/$l" ] && [ -e "$prefix/$l" ]; then ok "link $l"; else bad "missing or dangling link $prefix/$l"; fi
done
missing=0
for h in include/parkway/*.hpp; do [ -f "$prefix/$h" ] || { bad "header $h not installed"; missing=1; }; done
[ "$missing" -eq 0 ] && ok "all $(ls include/parkway/*.hpp | wc -l) public headers installed"
soname=$(readelf -d "$prefix/lib/libparkway.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = "libparkway.so.0" ]; then ok "soname $soname"; else bad "soname is '$soname', want libparkway.so.0"; fi

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
  if [ "$rc" -eq 0 ] && LD_LIBRARY_PATH="$prefix/lib" ldd "$work/consumer" | grep -q "$prefix/lib/libparkway.so.0"; then
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

# 4. CMake: find_package(parkway CONFIG) from PREFIX, both imported targets.
if command -v cmake >/dev/null; then
  cm="$work/cmake"
  if cmake -S tests/install -B "$cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
       -DPARKWAY_WANT_VERSION="$version" >"$work/cmake.log" 2>&1 \
     && cmake --build "$cm" -j "$(nproc)" >>"$work/cmake.log" 2>&1; then
    ok "CMake project builds with find_package(parkway $version CONFIG) and parkway::parkway"
    out=$("$cm/app" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && ldd "$cm/app" | grep -q "$prefix/lib/libparkway.so.0"; then
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
  major=${version%%.*}
  if cmake -S tests/install -B "$work/cmake-newer" -DCMAKE_PREFIX_PATH="$prefix" \
       -DPARKWAY_WANT_VERSION="$((major + 1)).0" >"$work/cmake-newer.log" 2>&1; then
    bad "find_package(parkway $((major + 1)).0) accepted version $version"
  elif grep -q "$prefix/lib/cmake/parkway/parkwayConfig.cmake, version: $version" "$work/cmake-newer.log"; then
    ok "find_package(parkway $((major + 1)).0) refuses version $version"
  else
    bad "find_package(parkway $((major + 1)).0) failed without naming the installed version:"
    sed 's/^/  /' "$work/cmake-newer.log"
  fi
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
