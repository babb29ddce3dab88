#!/usr/bin/env bash
# bench/remote.sh [BUILD_DIR] [--hosts N,N,...] [--seconds S]
#
# Remote hosts (docs/remote.md) on test hosts made on this machine
# (tests/e2e/hosts.sh: network namespaces with their own sshd; needs root):
# for each count of hosts, the time from a test's start request to every host
# recording (the barrier `tally job run --host` waits on, as the job prints
# it), the same for a second test (tally already installed, agents up), the
# job's wall time, and the bytes pulled back per host for a tally profile of
# S seconds (default 60) of a busy machine; beside them the baseline, what
# `ssh HOST true` to the same hosts in parallel takes (a fresh connection
# each: the handshake and the remote shell, which every first request pays).
# Prints one Markdown table.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build counts=1,2,8 secs=60
while [ $# -gt 0 ]; do
	case $1 in
	--hosts) counts=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
src=$(cd "$(dirname "$0")/.." && pwd)
export TALLY=$build/tally WORKLOADS=$build/tests/workloads SRCDIR=$src TEST_NAME=bench-remote
max=$(tr ',' '\n' <<<"$counts" | sort -n | tail -1)
# the hosts fixture of the tests, outside a test: its helpers need these
TMP=$(mktemp -d /tmp/tally-bench-remote.XXXXXX)
cd "$TMP"
EXIT_HOOKS=()
BG_PIDS=()
at_exit() { EXIT_HOOKS+=("$1"); }
track_pid() { BG_PIDS+=("$1"); }
skip() { echo "bench: skipped: $*" >&2; exit 0; }
fail() { echo "bench: $*" >&2; exit 1; }
need_tool() { command -v "$1" >/dev/null || skip "$1 is not installed (Debian package $2)"; }
cleanup() { for h in "${EXIT_HOOKS[@]}"; do eval "$h" || true; done; for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT
. "$src/tests/e2e/hosts.sh"
make_hosts "$max"

echo "| hosts | baseline: ssh HOST true, all in parallel (median of 5) | first test: start request to all recording | second test | job wall time | bytes pulled per host (${secs} s tally -a -F 999) |"
echo "|---|---|---|---|---|---|"
for n in ${counts//,/ }; do
	hs=()
	for ((i = 1; i <= n; i++)); do hs+=(--host "h$i"); done
	# the baseline: n fresh ssh connections at once, each running `true`
	base=()
	for r in 1 2 3 4 5; do
		b0=$(date +%s.%N)
		pids=()
		for ((i = 1; i <= n; i++)); do
			$TALLY_SSH "h$i" true &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || fail "ssh h$i true failed"; done
		b1=$(date +%s.%N)
		base+=("$(echo "$b1 - $b0" | bc)")
	done
	bl=$(printf '%s\n' "${base[@]}" | sort -n | sed -n 3p)
	printf '%s\n' "profilers add tally -a -F 999" "run --tag one -- sleep 0.2" "run --tag two -- sleep 0.2" >c$n.ctl
	t0=$(date +%s.%N)
	"$TALLY" job run "${hs[@]}" -r r$n c$n.ctl >o$n.txt 2>e$n.txt || fail "job on $n hosts failed: $(cat e$n.txt)"
	t1=$(date +%s.%N)
	a=$(awk '/^HOSTS one: recording/ { print $(NF-1) }' o$n.txt)
	b=$(awk '/^HOSTS two: recording/ { print $(NF-1) }' o$n.txt)
	# what one host sends back for a profile of a busy machine
	printf '%s\n' "profilers add tally -a -F 999" "profilers only on" "run --tag busy -- sh -c 'timeout $secs sh -c \"while :; do :; done\" & timeout $secs sh -c \"while :; do :; done\"; wait'" >p$n.ctl
	bytes=-
	if ((n == 1)); then
		"$TALLY" job run --host h1 -r p$n p$n.ctl >po.txt 2>pe.txt || fail "the ${secs} s job failed: $(cat pe.txt)"
		bytes=$(du -sb p$n/busy/profiling/h1 | cut -f1)
	fi
	printf '| %s | %.3f s | %s s | %s s | %s s | %s |\n' "$n" "$bl" "$a" "$b" "$(echo "$t1 - $t0" | bc)" "$bytes"
	# the next count installs again: a fresh root on every host
	for ((i = 1; i <= max; i++)); do host_sh "h$i" 'rm -rf ~/.cache/tally-profilers'; done
done
