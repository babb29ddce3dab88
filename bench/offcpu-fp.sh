#!/usr/bin/env bash
# bench/offcpu-fp.sh [BUILD_DIR] [--runs N] [--passes P]
#
# What the BPF off-CPU mechanism's top-of-stack slices cost (docs/offcpu.md):
# tests/workloads/pingpong (two threads passing a byte over two pipes P times,
# default 100000: a switch-out per pass on each side) alone, then under
# `tally record --off-cpu --off-cpu-mechanism bpf` with `--call-graph fp,0`
# (the frame-pointer chain only: no slice, as before the repair), with `-g`
# (a slice of 2048 bytes per place: the repair with CFI) and with
# `--off-cpu-mechanism tracepoint -g` (a record with its 2048-byte copy per
# switch), interleaved, N runs (default 5). For each: the CPU time of the
# whole command (the program, tally: bash's `times` for the children), the
# least of the runs (other load only adds), and that time above the program
# alone per off-CPU wait recorded (the session's off-cpu-waits). Prints one
# Markdown table.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build runs=5 passes=100000
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--passes) passes=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
work=$build/tests/workloads/pingpong
[ -x "$work" ] || { echo "bench: no workload at '$work' (build it first: make)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/tally-bench-offcpu-fp.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
configs=(none bpf_fp0 bpf_g tp_g)

children_cpu() {
	awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.3f\n", t }' "$1"
}

# run CONFIG: prints "cpu_seconds waits"
run() {
	local c0 c1 waits=0
	rm -rf "$tmp/t.db"
	times >"$tmp/times0"
	case $1 in
	none) "$work" "$passes" >/dev/null ;;
	bpf_fp0) "$tally" record --off-cpu --off-cpu-mechanism bpf --call-graph fp,0 -o "$tmp/t.db" -- "$work" "$passes" >/dev/null 2>"$tmp/err" ;;
	bpf_g) "$tally" record --off-cpu --off-cpu-mechanism bpf -g -o "$tmp/t.db" -- "$work" "$passes" >/dev/null 2>"$tmp/err" ;;
	tp_g) "$tally" record --off-cpu --off-cpu-mechanism tracepoint -g -o "$tmp/t.db" -- "$work" "$passes" >/dev/null 2>"$tmp/err" ;;
	esac
	times >"$tmp/times1"
	c0=$(children_cpu "$tmp/times0")
	c1=$(children_cpu "$tmp/times1")
	[ -f "$tmp/t.db/session" ] &&
		waits=$(awk -F': ' '$1 == "off-cpu-waits" { split($2, w, ","); print w[1] + w[2] }' "$tmp/t.db/session")
	echo "$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", b - a }') ${waits:-0}"
}

declare -A cpu wts
for ((r = 0; r < runs; r++)); do
	for c in "${configs[@]}"; do
		read -r t w < <(run "$c")
		echo "run $r $c: cpu $t s, waits $w" >&2
		cpu[$c]="${cpu[$c]:-} $t"
		wts[$c]="${wts[$c]:-} $w"
	done
done
least() { tr ' ' '\n' | grep . | sort -g | head -1; }
base=$(echo "${cpu[none]}" | least)
echo "| pingpong $passes passes | CPU s (least of $runs) | off-CPU waits (median) | CPU per wait above the program alone |"
echo "|---|---|---|---|"
for c in "${configs[@]}"; do
	t=$(echo "${cpu[$c]}" | least)
	w=$(echo "${wts[$c]}" | tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	per=$(awk -v t="$t" -v b="$base" -v w="$w" 'BEGIN { if (w > 0) printf "%.2f us", (t - b) * 1e6 / w; else print "-" }')
	echo "| $c | $t | $w | $per |"
done
