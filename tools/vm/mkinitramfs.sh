#!/usr/bin/env bash
# mkinitramfs.sh OUT.cpio BINARY... -- an uncompressed newc initramfs for
# the test VM: static busybox as /bin/busybox, tools/vm/guest/init as /init,
# tools/vm/guest/*.sh under /tests, each BINARY in /bin together with the
# shared libraries ldd lists for it (and the dynamic loader).
set -euo pipefail
cd "$(dirname "$0")/../.."

out=$1; shift
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

chmod 755 "$root"  # mktemp made it 0700: the guest's / must be traversable
mkdir -p "$root"/{bin,sbin,lib,lib64,proc,sys,dev,tmp,run,tests,etc}
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
cp tools/vm/guest/init "$root/init"
cp "${VM_GUEST_DIR:-tools/vm/guest}"/*.sh "$root/tests/"
chmod 755 "$root/init" "$root"/tests/*.sh
echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>"$root/etc/passwd"

copy_lib() {
  local lib=$1
  [ -e "$root$lib" ] && return 0
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
}

for bin in "$@"; do
  cp "$bin" "$root/bin/$(basename "$bin")"
  # ldd prints "name => /path (addr)" or "/path (addr)" for the loader.
  while read -r lib; do
    copy_lib "$lib"
  done < <(ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' | grep -v '^/bin/' || true)
done
# The loader under the path binaries ask for.
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || copy_lib /lib64/ld-linux-x86-64.so.2

(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) >"$out.tmp"
mv "$out.tmp" "$out"
echo "mkinitramfs: $out ($(du -k "$out" | cut -f1) KiB, $# binaries)"
