#!/usr/bin/env bash
# bench/daemon-cpu.sh [BUILD_DIR] [--rounds N] [--seconds S] [--hz HZ] [--before TALLY]
#
# The profiler's own CPU time while it samples the whole system: `tally daemon`
# and `perf record -a` at the same rate per CPU, in turn (the order alternates
# each round), with every CPU kept busy by a spinning loop. Each profiler's CPU
# time is read with `perf stat -e task-clock -p PID` over the same window.
# Prints one Markdown table: median ms of CPU per second of sampling, and per
# thousand samples (tally's sample count from 'tally ctl status').
# --before TALLY adds another tally binary (an older build) to every round,
# in turn with the other two, and a column for it.
#
# Needs: perf, bc; root (or perf_event_paranoid <= 0).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build rounds=5 secs=15 hz=999 before=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--before) before=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
tmp=$(mktemp -d /tmp/tally-bench-dcpu.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ncpu=$(nproc)

spin() { for ((c = 0; c < ncpu; c++)); do timeout "$secs" sh -c 'while :; do :; done' & pids+=($!); done; }
cpu_ms() { perf stat -x, -e task-clock -p "$1" -- sleep "$((secs - 2))" 2>&1 | awk -F, '/task-clock/ { print $1 }'; }

run_tally() {
	local bin=${1:-$tally}
	rm -rf "$tmp/d.db"
	"$bin" daemon --db "$tmp/d.db" -F "$hz" >/dev/null 2>&1
	local dp
	dp=$(cat "$tmp/d.db/daemon.pid")
	pids+=("$dp")
	spin
	sleep 1
	local ms n
	ms=$(cpu_ms "$dp")
	n=$("$bin" ctl --db "$tmp/d.db" status | awk '/^samples:/ { print $2 }')
	wait_spin
	kill -TERM "$dp"
	while kill -0 "$dp" 2>/dev/null; do sleep 0.1; done
	echo "$ms $n"
}
run_perf() {
	perf record -a -F "$hz" -o "$tmp/perf.data" -q >/dev/null 2>&1 &
	local pp=$!
	pids+=("$pp")
	spin
	sleep 1
	local ms
	ms=$(cpu_ms "$pp")
	wait_spin
	kill -INT "$pp"
	wait "$pp" 2>/dev/null || true
	echo "$ms"
}
wait_spin() { for p in $(jobs -p); do [ "$p" = "${pp:-}" ] || wait "$p" 2>/dev/null || true; done; }

[ -z "$before" ] || [ -x "$before" ] || { echo "bench: no tally at '$before' (give --before an older build's tally)" >&2; exit 2; }
for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then
		run_tally >>"$tmp/tally"; run_perf >>"$tmp/perf"
		[ -z "$before" ] || run_tally "$before" >>"$tmp/before"
	else
		[ -z "$before" ] || run_tally "$before" >>"$tmp/before"
		run_perf >>"$tmp/perf"; run_tally >>"$tmp/tally"
	fi
	echo "bench: round $r of $rounds: tally $(tail -n1 "$tmp/tally") perf $(tail -n1 "$tmp/perf")${before:+ before $(tail -n1 "$tmp/before")}" >&2
done
win=$((secs - 2))
t=$(cut -d' ' -f1 "$tmp/tally" | median) p=$(median <"$tmp/perf") n=$(cut -d' ' -f2 "$tmp/tally" | median)
if [ -n "$before" ]; then
	b=$(cut -d' ' -f1 "$tmp/before" | median) bn=$(cut -d' ' -f2 "$tmp/before" | median)
	echo "| profiler's own CPU, whole system at $hz Hz per CPU ($ncpu CPUs busy), median of $rounds | tally daemon (before) | tally daemon | perf record -a |"
	echo "|---|---|---|---|"
	echo "| ms of CPU per second | $(echo "scale=2; $b / $win" | bc) | $(echo "scale=2; $t / $win" | bc) | $(echo "scale=2; $p / $win" | bc) |"
	echo "| share of one CPU | $(echo "scale=3; $b / $win / 10" | bc)% | $(echo "scale=3; $t / $win / 10" | bc)% | $(echo "scale=3; $p / $win / 10" | bc)% |"
	echo "| µs per sample (samples a run: $bn, $n) | $(echo "scale=2; $b * 1000 / $bn" | bc) | $(echo "scale=2; $t * 1000 / $n" | bc) | — |"
	exit 0
fi
echo "| profiler's own CPU, whole system at $hz Hz per CPU ($ncpu CPUs busy), median of $rounds | tally daemon | perf record -a |"
echo "|---|---|---|"
echo "| ms of CPU per second | $(echo "scale=2; $t / $win" | bc) | $(echo "scale=2; $p / $win" | bc) |"
echo "| share of one CPU | $(echo "scale=3; $t / $win / 10" | bc)% | $(echo "scale=3; $p / $win / 10" | bc)% |"
echo "| µs per sample (tally: $n samples a run) | $(echo "scale=2; $t * 1000 / $n" | bc) | — |"
