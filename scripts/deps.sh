#!/usr/bin/env bash
# Installs the Debian packages tally needs to build (and, with --test, to test),
# only those missing. Used by `make`, `make demo` and `make check`.
set -euo pipefail
# what the code uses today: add a library here in the commit that starts using it
build_pkgs=(gcc make meson ninja-build pkg-config libelf-dev libdw-dev libdebuginfod-dev libxxhash-dev
  libcapstone-dev libcmocka-dev protobuf-c-compiler libprotobuf-c-dev zlib1g-dev libzstd-dev libarchive-dev)
# clang-14 and libclang-rt-14-dev (libFuzzer and the sanitizers' runtimes): make fuzz
test_pkgs=(python3 tmux linux-perf util-linux golang-go valgrind binutils chromium fonts-dejavu-core xz-utils zstd nodejs
  clang-14 libclang-rt-14-dev)
want=("${build_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${test_pkgs[@]}")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "tally: installing missing packages: ${missing[*]}"
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
