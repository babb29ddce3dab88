#!/usr/bin/env bash
# Installs the Debian packages tally needs to build (and, with --test, to test),
# only those missing. Used by `make`, `make demo` and `make check`.
set -euo pipefail
# what the code uses today: add a library here in the commit that starts using it
build_pkgs=(gcc make meson ninja-build pkg-config libelf-dev libdw-dev libdebuginfod-dev libxxhash-dev
  libcapstone-dev libcmocka-dev protobuf-c-compiler libprotobuf-c-dev zlib1g-dev libzstd-dev libarchive-dev
  libiberty-dev libbpf-dev bpftool clang libcurl4-openssl-dev)
# clang-14 and libclang-rt-14-dev (libFuzzer and the sanitizers' runtimes): make fuzz
test_pkgs=(python3 python3-jsonschema tmux linux-perf util-linux golang-go valgrind binutils chromium fonts-dejavu-core xz-utils zstd nodejs
  openssh-client openssh-server netcat-openbsd iproute2 protobuf-compiler python3-protobuf
  clang-14 libclang-rt-14-dev)
# gdb: t1008 holds 'tally archive' between its plan and its copy
test_pkgs+=(gdb)
# strace: t1010 sends a signal as 'tally archive' or a report reaches a system call
test_pkgs+=(strace)
# npm packages the tests read (installed with npm, which nodejs brings): the
# schema of speedscope's file format, for the speedscope export's test
npm_test_pkgs=(speedscope@1.25.0)
npm_test() {
  command -v npm >/dev/null 2>&1 || return 0
  local root
  root=$(npm root -g 2>/dev/null) || return 0
  [ -e "$root/speedscope/dist/release/file-format-schema.json" ] && return 0
  echo "tally: installing npm packages for the tests: ${npm_test_pkgs[*]}"
  npm install -g --no-audit --no-fund "${npm_test_pkgs[@]}" >/dev/null 2>&1 ||
    echo "tally: could not install ${npm_test_pkgs[*]} with npm (the tests that need them skip)"
}
want=("${build_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${test_pkgs[@]}")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  [ "${1:-}" = "--test" ] && npm_test
  exit 0
fi
echo "tally: installing missing packages: ${missing[*]}"
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
[ "${1:-}" = "--test" ] && npm_test
exit 0
