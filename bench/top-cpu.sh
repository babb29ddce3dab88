#!/usr/bin/env bash
# bench/top-cpu.sh [BUILD_DIR] [--rounds N] [--seconds S] [--hz HZ]
#
# The live view's own CPU time while it samples the whole system with every
# CPU kept busy by a spinning loop: `tally top -a` and `perf top --stdio`, at
# the same rate per CPU and a refresh a second, both printing their text view
# to /dev/null (perf top's only non-interactive mode), in turn (the order
# alternates each round); and `tally top --db` reading a daemon that samples
# at that rate (its own CPU time, and what its peeks add to the daemon's).
# Each process's CPU time is read with `perf stat -e task-clock -p PID` over
# the same window. Prints one Markdown table: median ms of CPU per second and
# the share of one CPU.
#
# Needs: perf, bc; root (or perf_event_paranoid <= 0).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build rounds=3 secs=15 hz=999
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
tmp=$(mktemp -d /tmp/tally-bench-top.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ncpu=$(nproc)
win=$((secs - 2))

spin() { for ((c = 0; c < ncpu; c++)); do timeout "$secs" sh -c 'while :; do :; done' & pids+=($!); done; }
wait_spin() { sleep $((secs - win)); }
# cpu_ms PID...: ms of task-clock of each PID over the window, one line each
cpu_ms() {
	local p out=()
	for p in "$@"; do
		perf stat -x, -e task-clock -p "$p" -o "$tmp/stat.$p" -- sleep "$win" &
		out+=($!)
	done
	wait "${out[@]}" 2>/dev/null || true
	for p in "$@"; do awk -F, '/task-clock/ { print $1 }' "$tmp/stat.$p"; done
}

run_top() {
	"$tally" top -a -F "$hz" -d 1 --rows 25 >/dev/null 2>&1 &
	local tp=$!
	pids+=("$tp")
	spin
	sleep 1
	cpu_ms "$tp"
	kill -TERM "$tp"
	wait "$tp" 2>/dev/null || true
	wait_spin
}
run_perf() {
	perf top --stdio -F "$hz" -d 1 >/dev/null 2>&1 </dev/null &
	local pp=$!
	pids+=("$pp")
	spin
	sleep 1
	cpu_ms "$pp"
	kill -INT "$pp" 2>/dev/null || true
	sleep 0.5
	kill -KILL "$pp" 2>/dev/null || true
	wait "$pp" 2>/dev/null || true
	wait_spin
}
# the daemon alone, then with tally top --db reading it: "daemon-alone daemon-with top"
run_db() {
	rm -rf "$tmp/d.db"
	"$tally" daemon --db "$tmp/d.db" -F "$hz" --per-pid >/dev/null 2>&1
	local dp
	dp=$(cat "$tmp/d.db/daemon.pid")
	pids+=("$dp")
	spin
	sleep 1
	local alone
	alone=$(cpu_ms "$dp")
	wait_spin
	"$tally" top --db "$tmp/d.db" -d 1 >/dev/null 2>&1 &
	local tp=$!
	pids+=("$tp")
	spin
	sleep 1
	local both
	both=$(cpu_ms "$dp" "$tp" | tr '\n' ' ')
	kill -TERM "$tp" "$dp"
	wait "$tp" 2>/dev/null || true
	while kill -0 "$dp" 2>/dev/null; do sleep 0.1; done
	wait_spin
	echo "$alone $both"
}

for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then
		run_top >>"$tmp/top"; run_perf >>"$tmp/perf"
	else
		run_perf >>"$tmp/perf"; run_top >>"$tmp/top"
	fi
	run_db >>"$tmp/db"
	echo "bench: round $r of $rounds: tally top $(tail -n1 "$tmp/top") perf top $(tail -n1 "$tmp/perf") daemon alone, daemon and top --db: $(tail -n1 "$tmp/db")" >&2
done
t=$(median <"$tmp/top") p=$(median <"$tmp/perf")
da=$(cut -d' ' -f1 "$tmp/db" | median) dw=$(cut -d' ' -f2 "$tmp/db" | median) td=$(cut -d' ' -f3 "$tmp/db" | median)
ms() { echo "scale=2; $1 / $win" | bc; }
pc() { echo "scale=3; $1 / $win / 10" | bc; }
echo "| own CPU, whole system at $hz Hz per CPU ($ncpu CPUs busy), a refresh a second, median of $rounds runs of ${win} s | ms of CPU per second | share of one CPU |"
echo "|---|---|---|"
echo "| tally top -a (text) | $(ms "$t") | $(pc "$t")% |"
echo "| perf top --stdio | $(ms "$p") | $(pc "$p")% |"
echo "| tally top --db (its own) | $(ms "$td") | $(pc "$td")% |"
echo "| tally daemon --per-pid, alone | $(ms "$da") | $(pc "$da")% |"
echo "| tally daemon --per-pid, peeked every second | $(ms "$dw") | $(pc "$dw")% |"
