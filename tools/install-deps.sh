#!/usr/bin/env bash
# install-deps.sh -- install every Debian package parkway needs, idempotently.
#
# Sources: Debian bookworm, plus bookworm-backports for libbpf-dev and bpftool
# (nothing else is taken from backports, and nothing ever from sid/trixie:
# mixing suites would replace libc and libstdc++ under everything).
# Re-running is cheap: when every package is already installed it only checks.
set -euo pipefail

MAIN_PKGS=(
  build-essential pkg-config make git
  clang-19 llvm-19 lld-19
  liburing-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtbb-dev libomp-dev libconcurrentqueue-dev
  systemtap-sdt-dev
  spin
  valgrind
  qemu-system-x86 busybox-static cpio zstd
  bpftrace linux-perf
  python3 curl
  wrk nghttp2-client nginx-light libasio-dev   # peers and load generators of make bench (h2load: nghttp2-client)
)
BACKPORT_PKGS=(libbpf-dev bpftool)

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi

missing=()
for p in "${MAIN_PKGS[@]}" "${BACKPORT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# libbpf must come from backports (>= 1.4): bookworm's 1.1 lacks struct_ops links.
if dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null | grep -q '^1:1\.[0-3]\.'; then
  missing+=(libbpf-dev)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#MAIN_PKGS[@]}+${#BACKPORT_PKGS[@]} packages present"
  exit 0
fi
echo "deps: installing: ${missing[*]}"

BP=/etc/apt/sources.list.d/bookworm-backports.list
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee "$BP" >/dev/null
fi
export DEBIAN_FRONTEND=noninteractive
# Packages with a service (nginx-light, a benchmark peer) must not start
# it: the benchmarks run their own instances on loopback. A policy-rc.d
# that refuses every start, for the duration of the install only.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${MAIN_PKGS[@]}"
$SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BACKPORT_PKGS[@]}"
echo "deps: done"
