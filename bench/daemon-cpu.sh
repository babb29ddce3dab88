#!/usr/bin/env bash
# bench/daemon-cpu.sh [BUILD_DIR] [--rounds N] [--seconds S] [--hz HZ] [--before TALLY]
#
# The profiler's own CPU time while it samples the whole system: `tally daemon`
# (its default, every sample through the ring buffers, and with
# --sample-mechanism bpf, counted in the kernel) and `perf record -a` at the same rate per CPU, in
# turn (the order reverses each round), with every CPU kept busy by a spinning
# loop. Each profiler's CPU time is read with `perf stat -e task-clock -p PID`
# over the same window. Prints one Markdown table: median ms of CPU per second
# of sampling, and per sample (tally's sample count from 'tally ctl status').
# --before TALLY adds another tally binary (an older build) to every round,
# in turn with the others, and a column for it.
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
	shift || true
	rm -rf "$tmp/d.db"
	"$bin" daemon --db "$tmp/d.db" -F "$hz" "$@" >/dev/null 2>&1
	local dp
	dp=$(cat "$tmp/d.db/daemon.pid")
	pids+=("$dp")
	spin
	sleep 1
	local ms n
	ms=$(cpu_ms "$dp")
	"$bin" ctl --db "$tmp/d.db" status >"$tmp/status"
	n=$(awk '/^samples:/ { print $2 }' "$tmp/status")
	awk '/^sample-mechanism:/ { print $2 }' "$tmp/status" >"$tmp/mech"
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
# tally's default (every sample through the ring buffers), tally with the
# samples counted in the kernel, perf; and the older build
one() {
	case $1 in
	tally) run_tally >>"$tmp/tally"; cp "$tmp/mech" "$tmp/tally.mech" ;;
	bpf) run_tally "$tally" --sample-mechanism bpf >>"$tmp/bpf"; cp "$tmp/mech" "$tmp/bpf.mech" ;;
	perf) run_perf >>"$tmp/perf" ;;
	before) [ -z "$before" ] || run_tally "$before" >>"$tmp/before" ;;
	esac
}
for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then order="tally bpf perf before"; else order="before perf bpf tally"; fi
	for w in $order; do one "$w"; done
	echo "bench: round $r of $rounds: tally $(tail -n1 "$tmp/tally") bpf $(tail -n1 "$tmp/bpf") perf $(tail -n1 "$tmp/perf")${before:+ before $(tail -n1 "$tmp/before")}" >&2
done
win=$((secs - 2))
cols=("tally daemon ($(cat "$tmp/tally.mech"))" "tally daemon --sample-mechanism bpf ($(cat "$tmp/bpf.mech"))" "perf record -a")
files=(tally bpf perf)
if [ -n "$before" ]; then cols+=("tally daemon (before)"); files+=(before); fi
row() { local s="| $1 |"; shift; for v in "$@"; do s+=" $v |"; done; echo "$s"; }
ms=() share=() per=()
for f in "${files[@]}"; do
	m=$(cut -d' ' -f1 "$tmp/$f" | median)
	ms+=("$(echo "scale=2; $m / $win" | bc)")
	share+=("$(echo "scale=3; $m / $win / 10" | bc)%")
	if [ "$f" = perf ]; then
		per+=("—")
	else
		n=$(cut -d' ' -f2 "$tmp/$f" | median)
		per+=("$(echo "scale=2; $m * 1000 / $n" | bc) ($n samples)")
	fi
done
row "profiler's own CPU, whole system at $hz Hz per CPU ($ncpu CPUs busy), median of $rounds" "${cols[@]}"
row "---" "${cols[@]/*/---}"
row "ms of CPU per second" "${ms[@]}"
row "share of one CPU" "${share[@]}"
row "µs per sample" "${per[@]}"
