#!/usr/bin/env bash
# bench/offcpu.sh [BUILD_DIR] [--rounds N] [--passes P]
#
# The cost of recording off-CPU time on a context-switch-heavy program:
# tests/workloads/pingpong, two threads passing a byte over two pipes P times
# (default 200000; every pass switches on each side, several hundred thousand
# switches a second here). Runs it alone, under `tally record --off-cpu`
# (cpu-clock and off-cpu) and `tally record -e off-cpu` with each mechanism
# (--off-cpu-mechanism bpf: the waits summed in the kernel; tracepoint: a
# record per switch), `tally record --off-cpu -g` (auto: the tracepoint, and
# with --off-cpu-mechanism bpf),
# `perf sched record` and `perf trace -s`, and bcc's offcputime (Debian
# package bpfcc-tools) when it is installed (never installed from here), in
# turn, N rounds (default 3). The program's own time for its passes is what
# it felt; the whole command's wall time adds the profiler's start and its
# writing; the CPU time is that of every process of the command (the
# program, the profiler, perf's helpers: bash's `times` for the children), the
# figure least moved by other load on the machine. Prints one Markdown table:
# medians, and the slowdowns against the program alone.
#
# Needs: perf; root (sched_switch through perf_event_open, tracefs).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build rounds=3 passes=200000
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--passes) passes=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
work=$build/tests/workloads/pingpong
[ -x "$work" ] || { echo "bench: no workload at '$work' (build it first: make)" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench: perf is not installed (Debian package linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/tally-bench-offcpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

offcpu=$(command -v offcputime-bpfcc || true)
configs=(none tally_bpf tally_bpf_only tally tally_only tally_g tally_g_bpf perf_sched perf_trace)
[ -n "$offcpu" ] && configs+=(bcc)

# children_cpu FILE: the user and system seconds of the waited-for children
# so far, from bash's `times` written to FILE (run in this shell: a command
# substitution would be a subshell with children of its own)
children_cpu() {
	awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.3f\n", t }' "$1"
}

# run CONFIG: one run; prints "program_seconds total_seconds cpu_seconds"
run() {
	local out=$tmp/out t0 t1 bpid c0 c1
	rm -rf "$tmp/t.db" "$tmp/p.data" "$tmp/trace.txt"
	times >"$tmp/times0"
	t0=$(date +%s.%N)
	case $1 in
	none) "$work" "$passes" >"$out" ;;
	tally_bpf) "$tally" record --off-cpu --off-cpu-mechanism bpf -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	tally_bpf_only) "$tally" record -e off-cpu --off-cpu-mechanism bpf -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	tally) "$tally" record --off-cpu --off-cpu-mechanism tracepoint -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	tally_only) "$tally" record -e off-cpu --off-cpu-mechanism tracepoint -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	tally_g) "$tally" record --off-cpu -g -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	tally_g_bpf) "$tally" record --off-cpu -g --off-cpu-mechanism bpf -o "$tmp/t.db" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	perf_sched) perf sched record -o "$tmp/p.data" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	perf_trace) perf trace -s -o "$tmp/trace.txt" -- "$work" "$passes" >"$out" 2>"$tmp/err" ;;
	bcc)
		# offcputime follows a pid: start it on the program, stop it when the program ends
		"$work" "$passes" >"$out" &
		bpid=$!
		"$offcpu" -p "$bpid" >"$tmp/trace.txt" 2>"$tmp/err" &
		local opid=$!
		wait "$bpid"
		kill -INT "$opid" 2>/dev/null || true
		wait "$opid" || true
		;;
	esac
	t1=$(date +%s.%N)
	times >"$tmp/times1"
	c0=$(children_cpu "$tmp/times0")
	c1=$(children_cpu "$tmp/times1")
	if [ "$1" = tally_g ]; then
		awk '$1 == "lost:" { print $2 }' "$tmp/t.db/session" >"$tmp/lost"
	fi
	awk -v t0="$t0" -v t1="$t1" -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
		'$1 == "info" && $2 == "seconds" { printf "%s %.3f %.3f\n", $3, t1 - t0, c }' "$out"
}


load0=$(cut -d' ' -f1 /proc/loadavg)
for ((r = 0; r < rounds; r++)); do
	for c in "${configs[@]}"; do
		run "$c" >>"$tmp/$c.runs"
	done
done
base=$(awk '{ print $1 }' "$tmp/none.runs" | median)
cbase=$(awk '{ print $3 }' "$tmp/none.runs" | median)
load1=$(cut -d' ' -f1 /proc/loadavg)
sps=$(awk -v p="$passes" -v s="$base" 'BEGIN { printf "%.0f", 2 * p / s }')
lost=$(cat "$tmp/lost" 2>/dev/null || echo "?")
echo "pingpong $passes passes: $sps switches/s alone; $rounds rounds, medians; load average before: $load0, after: $load1"
echo
echo "| profiler | program's time | slowdown | whole command (wall) | CPU time (all processes) | CPU slowdown |"
echo "|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
	p=$(awk '{ print $1 }' "$tmp/$c.runs" | median)
	w=$(awk '{ print $2 }' "$tmp/$c.runs" | median)
	cp=$(awk '{ print $3 }' "$tmp/$c.runs" | median)
	case $c in
	none) name="none" ;;
	tally_bpf) name="\`tally record --off-cpu\`, bpf (cpu-clock + off-cpu)" ;;
	tally_bpf_only) name="\`tally record -e off-cpu\`, bpf" ;;
	tally) name="\`tally record --off-cpu\`, tracepoint (cpu-clock + off-cpu)" ;;
	tally_only) name="\`tally record -e off-cpu\`, tracepoint" ;;
	tally_g) name="\`tally record --off-cpu -g\` (tracepoint)" ;;
	tally_g_bpf) name="\`tally record --off-cpu -g\`, bpf (stacks in the kernel's stack maps)" ;;
	perf_sched) name="\`perf sched record\`" ;;
	perf_trace) name="\`perf trace -s\`" ;;
	bcc) name="bcc \`offcputime-bpfcc -p\`" ;;
	esac
	awk -v n="$name" -v p="$p" -v w="$w" -v b="$base" -v c="$cp" -v cb="$cbase" \
		'BEGIN { printf "| %s | %.3f s | %+.1f%% | %.3f s | %.3f s | %+.1f%% |\n", n, p, 100 * (p / b - 1), w, c, (cb > 0) ? 100 * (c / cb - 1) : 0 }'
done
[ -n "$offcpu" ] || echo "| bcc offcputime | not installed (Debian package bpfcc-tools) | | | | |"
echo
echo "tally's lost records in the last --off-cpu -g run: $lost"
