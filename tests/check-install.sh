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
#  4. `make uninstall PREFIX=p` removes every file install wrote.
set -u
make_cmd=$1; build=$2; version=$3
prefix=$(realpath -m "$build/install-check")
work=$(realpath -m "$build/install-check-app")
pass=0; fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

rm -rf "$prefix" "$work"
mkdir -p "$work"
if "$make_cmd" --no-print-directory install PREFIX="$prefix" >"$work/install.log" 2>&1; then
  ok "make install PREFIX=$prefix"
else
  bad "make install failed:"; sed 's/^/  /' "$work/install.log"
fi
for f in lib/libparkway.a lib/libparkway.so.$version lib/pkgconfig/parkway.pc; do
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

if "$make_cmd" --no-print-directory uninstall PREFIX="$prefix" >"$work/uninstall.log" 2>&1; then
  left=$(find "$prefix" \( -type f -o -type l \) 2>/dev/null)
  if [ -z "$left" ]; then ok "make uninstall removed everything"; else bad "left after uninstall:"; sed 's/^/  /' <<<"$left"; fi
else
  bad "make uninstall failed:"; sed 's/^/  /' "$work/uninstall.log"
fi
rm -rf "$prefix" "$work"
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
