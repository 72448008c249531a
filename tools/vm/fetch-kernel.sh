#!/usr/bin/env bash
# fetch-kernel.sh [CACHE] -- download Debian sid's cloud kernel (built with
# CONFIG_SCHED_CLASS_EXT=y and BTF) into CACHE without touching the host's
# apt state, and extract its vmlinuz.
#
# A private apt configuration (its own sources list, lists and archive
# directories under CACHE/apt) is used with `apt-get download`: nothing is
# installed, and the host's sources are never read or changed.
#
# Trust: the private sid source is marked trusted=yes and its Release's
# validity date is not checked (Acquire::Check-Valid-Until=false, for
# this private configuration only), so that a frozen snapshot mirror,
# whose sid Release apt would reject as expired, still serves the kernel.
# The kernel is only booted inside QEMU as a test subject; it is never
# installed on the host (docs/design/sched-ext.md, "The VM tests").
#
# Packages tried, in order: linux-image-cloud-amd64, then linux-image-amd64
# (both built with CONFIG_SCHED_CLASS_EXT=y in sid); the first that
# resolves is used, and its name is written next to the image.
#
# VM_KERNEL_FROM=SUITE[:PACKAGE] fetches from another suite (e.g.
# trixie-backports, whose cloud kernels 6.16 to 6.19 have sched_ext) and,
# with PACKAGE, a given version (docs/design/sched-ext.md, "What was seen,
# and what was not").
#
# Result (stdout, last line): the path of CACHE/kernel/<version>/ holding
#   vmlinuz   the bootable image
#   package   the name of the package it came from
# Reuses a previous download when sid has not moved (or when offline and a
# previous download exists). Exit 2 when no kernel can be had.
set -euo pipefail

CACHE=${1:-${PARKWAY_VM_CACHE:-/var/cache/parkway-vm}}
# VM_KERNEL_FROM=SUITE[:PACKAGE]: another suite than sid (its own apt
# lists), and a given image package instead of the suite's newest cloud
# kernel; e.g. trixie-backports:linux-image-6.18.12+deb13-cloud-amd64.
FROM=${VM_KERNEL_FROM:-sid}
SUITE=${FROM%%:*}
WANT=
[[ $FROM == *:* ]] && WANT=${FROM#*:}
[[ $SUITE =~ ^[a-z][a-z0-9-]*$ ]] || { echo "fetch-kernel: VM_KERNEL_FROM: bad suite '$SUITE'" >&2; exit 2; }
[[ -z $WANT || $WANT =~ ^linux-(image|binary)-[A-Za-z0-9.+~-]+$ ]] ||
  { echo "fetch-kernel: VM_KERNEL_FROM: '$WANT' is not a linux-image-* or linux-binary-* package" >&2; exit 2; }
if [ "$SUITE" = sid ]; then APT=$CACHE/apt; else APT=$CACHE/apt-$SUITE; fi
mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$APT/etc" "$CACHE/kernel"

say() { echo "fetch-kernel: $*" >&2; }

latest_cached() {
  local d
  d=$(ls -1d "$CACHE"/kernel/*/ 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -f "$d/vmlinuz" ] && echo "${d%/}"
}

echo "deb [trusted=yes] http://deb.debian.org/debian $SUITE main" >"$APT/etc/sources.list"
: >"$APT/etc/status"
APT_OPTS=(
  -o Dir::Etc::SourceList="$APT/etc/sources.list"
  -o Dir::Etc::SourceParts=/dev/null
  -o Dir::Etc::Preferences=/dev/null
  -o Dir::Etc::PreferencesParts=/dev/null
  -o Dir::State::Lists="$APT/lists"
  -o Dir::State::Status="$APT/etc/status"
  -o Dir::Cache="$APT"
  -o Dir::Cache::Archives="$APT/archives"
  -o APT::Architecture=amd64
  -o APT::Architectures::=amd64
  -o Acquire::Languages=none
  -o Acquire::Check-Valid-Until=false
  -o Debug::NoLocking=1
  -o APT::Sandbox::User=root
)

# Refresh the sid index at most once a day.
stamp=$APT/updated
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
  # apt-get update exits 0 even when an index failed: check the lists.
  if apt-get "${APT_OPTS[@]}" -qq update >&2 && ls "$APT"/lists/*_Packages* >/dev/null 2>&1; then
    touch "$stamp"
  else
    say "apt-get update ($SUITE) failed"
    if [ "$FROM" = sid ] && d=$(latest_cached); then say "offline: using cached $d"; echo "$d"; exit 0; fi
    exit 2
  fi
fi

# The meta-package depends on the versioned image package; in the new
# packaging the files live in linux-binary-<ver>-cloud-amd64.
meta_dep() {
  apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null | sed -n 's/^Depends: //p' | head -n 1 |
    tr ',' '\n' | sed -E 's/^ *//; s/ .*//' | grep -E '^linux-(image|binary)-' | head -n 1
}
pkg=$WANT
if [ -z "$pkg" ]; then
  for meta in linux-image-cloud-amd64 linux-image-amd64; do
    pkg=$(meta_dep "$meta")
    [ -n "$pkg" ] && break
    say "cannot resolve $meta in $SUITE; trying the next kernel package"
  done
  [ -n "$pkg" ] || { say "no kernel package resolves in $SUITE"; exit 2; }
fi
# Follow one more level if the image package is itself a thin wrapper.
inner=$(meta_dep "$pkg" || true)
[ -n "$inner" ] && [ "$inner" != "$pkg" ] && pkg=$inner
ver=$(sed -E 's/^linux-(image|binary)-//; s/-unsigned$//' <<<"$pkg")
dest=$CACHE/kernel/$ver
if [ -f "$dest/vmlinuz" ]; then echo "$dest"; exit 0; fi

say "downloading $pkg ($SUITE)"
tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get "${APT_OPTS[@]}" -qq download "$pkg" >&2)
deb=$(ls "$tmp"/*.deb)
dpkg-deb -x "$deb" "$tmp/x"
img=$(find "$tmp/x" -type f \( -name 'vmlinuz*' -o -name 'vmlinux*' \) | head -n 1)
[ -n "$img" ] || { say "no vmlinuz in $pkg"; exit 2; }
mkdir -p "$dest.part"
cp "$img" "$dest.part/vmlinuz"
echo "$pkg" >"$dest.part/package"
rm -rf "$dest" && mv "$dest.part" "$dest"
say "kernel $ver in $dest"
echo "$dest"
