#!/usr/bin/env bash
# bench/daemon.sh [BUILD_DIR] [--runs N] [--steady SECONDS] [--quick] [--keep]
#
# tally daemon next to `perf record -a` at the same rate, in one run; prints
# one Markdown table (progress on stderr, the table on stdout):
#   1. slowdown of a CPU-bound workload on every CPU (one pinned target per
#      CPU) at 99 Hz and at 999 Hz per CPU: unprofiled, under `tally daemon`,
#      under `perf record -a` (median of N runs, interleaved);
#   2. a steady run of the same workload for SECONDS under each profiler in
#      turn: the daemon's resident memory and database size, perf.data's size,
#      sampled as it goes (the daemon flushes every SECONDS/12 and begins an
#      epoch every SECONDS/4, keeping the newest three).
# docs/performance.md ("The daemon") says what each row is and how it is taken.
#
#   BUILD_DIR        where tally was built (default: build)
#   --runs N         runs per slowdown configuration (default 3)
#   --steady S       seconds of the steady run per profiler (default 240)
#   --quick          smoke test: short targets, one run, a 24 s steady run
#   --keep           keep the temporary directory
#
# Needs: cc, perf, taskset, awk; root (or perf_event_paranoid <= 0) for
# whole-system sampling. Exit status: 0 when everything ran, 1 when a profiler
# failed, 2 on bad usage.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
build=build runs=3 steady=240 quick=0 keep=0 build_set=0
usage() { bench_help >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
	--steady) [ $# -ge 2 ] || usage; steady=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	-*) echo "bench: unknown option '$1'" >&2; usage ;;
	*) [ $build_set = 0 ] || usage; build=$1; build_set=1; shift ;;
	esac
done
case $runs in ''|*[!0-9]*|0) echo "bench: --runs needs a positive integer" >&2; exit 2 ;; esac
case $steady in ''|*[!0-9]*) echo "bench: --steady needs whole seconds" >&2; exit 2 ;; esac
target_s=5
if [ $quick = 1 ]; then
	runs=1 target_s=1 steady=24
fi
[ "$steady" -ge 12 ] || { echo "bench: --steady must be at least 12 seconds" >&2; exit 2; }

bench_tally "$build"
for t in perf cc taskset; do
	command -v $t >/dev/null || { echo "bench: $t not found" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/tally-bench-daemon.XXXXXX)
loops=()
cleanup() {
	[ -n "${dpid:-}" ] && kill -KILL "$dpid" 2>/dev/null
	[ -n "${ppid_:-}" ] && kill -KILL "$ppid_" 2>/dev/null
	for p in "${loops[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
	if [ $keep = 1 ]; then echo "bench: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
bt=$tmp/benchtool
cc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -o "$bt" "$here/benchtool.c"
log() { echo "bench: $*" >&2; }
problems=0
problem() { problems=$((problems + 1)); log "PROBLEM: $*"; }
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" "$1" 2>/dev/null | head -n1; }
ncpu=$(nproc)

# ---- the profilers ------------------------------------------------------------
dpid= ppid_=
start_tally() {	# HZ DB [daemon options]
	local hz=$1 db=$2
	shift 2
	rm -rf "$db"
	"$tally" daemon --db "$db" -F "$hz" "$@" 2>"$tmp/daemon.err" || { problem "tally daemon: $(cat "$tmp/daemon.err")"; return 1; }
	dpid=$(cat "$db/daemon.pid")
}
stop_tally() {
	kill -TERM "$dpid" 2>/dev/null || true
	while kill -0 "$dpid" 2>/dev/null; do sleep 0.05; done
	dpid=
}
start_perf() {	# HZ FILE
	perf record -a -F "$1" -o "$2" >"$tmp/perf.out" 2>"$tmp/perf.err" &
	ppid_=$!
	# perf says nothing when it is ready: give it the time tally gets
	sleep 1
	kill -0 "$ppid_" 2>/dev/null || { problem "perf record -a: $(tail -3 "$tmp/perf.err")"; ppid_=; return 1; }
}
stop_perf() {
	kill -INT "$ppid_" 2>/dev/null || true
	wait "$ppid_" 2>/dev/null || true
	ppid_=
}

# ---- the workload: one pinned target per CPU ----------------------------------
# calibration: iterations for target_s seconds of CPU
"$bt" spin 50000000 "$tmp/cal"
cal_ms=$(kv "$tmp/cal" cpu_ms)
iters=$(awk -v s="$target_s" -v ms="$cal_ms" 'BEGIN { printf "%.0f", int(s * 1000 / ms * 50000000 / 10000) * 10000 }')
log "$ncpu CPUs; target: $iters iterations (~$target_s s of CPU) per CPU"
# workload NAME: runs the targets, appends their mean CPU ms and wall ms
workload() {
	local name=$1 c pids=()
	for ((c = 0; c < ncpu; c++)); do
		taskset -c "$c" "$bt" spin "$iters" "$tmp/$name.$c" &
		pids+=($!)
	done
	wait "${pids[@]}"
	local cpu=0 wall=0
	for ((c = 0; c < ncpu; c++)); do
		cpu=$(awk -v a="$cpu" -v b="$(kv "$tmp/$name.$c" cpu_ms)" 'BEGIN { print a + b }')
		wall=$(awk -v a="$wall" -v b="$(kv "$tmp/$name.$c" wall_ms)" 'BEGIN { print a + b }')
	done
	awk -v c="$cpu" -v n="$ncpu" 'BEGIN { print c / n }' >>"$tmp/$name.cpu"
	awk -v c="$wall" -v n="$ncpu" 'BEGIN { print c / n }' >>"$tmp/$name.wall"
}

# ---- 1. slowdown ----------------------------------------------------------------
for r in $(seq 1 "$runs"); do
	for hz in 99 999; do
		log "run $r/$runs at $hz Hz: unprofiled, tally daemon (its default, and through the ring), perf record -a"
		workload "none.$hz"
		# the profilers' order turns each run, so that no one always goes last
		order=(tally ring perf)
		for ((k = 0; k < r % 3; k++)); do order=("${order[@]:1}" "${order[0]}"); done
		for who in "${order[@]}"; do
			case $who in
			tally | ring)
				extra=()
				[ "$who" = ring ] && extra=(--sample-mechanism ring)
				if start_tally "$hz" "$tmp/sd.db" --flush-interval 60s "${extra[@]}"; then
					sleep 1
					workload "$who.$hz"
					stop_tally
				fi ;;
			perf)
				if start_perf "$hz" "$tmp/sd.data"; then
					workload "perf.$hz"
					stop_perf
				fi ;;
			esac
		done
	done
done
pct() { [ -n "$1" ] && [ -n "$2" ] && awk -v m="$1" -v b="$2" 'BEGIN { printf "%+.2f%%", (m / b - 1) * 100 }' || echo n/a; }
rows=$tmp/rows
: >"$rows"
for hz in 99 999; do
	b=$(median "$tmp/none.$hz.cpu") t=$(median "$tmp/tally.$hz.cpu") p=$(median "$tmp/perf.$hz.cpu")
	goal="< 0.5%"
	[ $hz = 999 ] && goal="< 2%"
	# each run took all of them one after the other: the difference of
	# tally and perf within a run, in points of the unprofiled time, over the
	# runs (mean, and twice its standard error: the two are told apart when
	# that interval leaves out 0); only when every run has all three (a
	# profiler that failed to start leaves a run out: a problem, reported)
	pair=
	[ "$(wc -l <"$tmp/none.$hz.cpu")" = "$(wc -l <"$tmp/tally.$hz.cpu" 2>/dev/null)" ] &&
		[ "$(wc -l <"$tmp/none.$hz.cpu")" = "$(wc -l <"$tmp/perf.$hz.cpu" 2>/dev/null)" ] &&
		pair=$(paste "$tmp/none.$hz.cpu" "$tmp/tally.$hz.cpu" "$tmp/perf.$hz.cpu" 2>/dev/null | awk '
		NF == 3 { d = ($2 - $3) / $1 * 100; s += d; q += d * d; n++; if ($2 < $3) below++ }
		END {
			if (n < 2) exit
			m = s / n; v = (q - n * m * m) / (n - 1); se = sqrt(v > 0 ? v : 0) / sqrt(n)
			verdict = (m + 2 * se < 0) ? "below" : (m - 2 * se > 0) ? "above" : "apart-not"
			printf "%+.2f %.2f %s %d %d\n", m, 2 * se, verdict, below + 0, n
		}')
	res=info
	if [ -n "$t" ] && [ -n "$p" ] && [ -n "$b" ]; then
		# at or under perf's: the paired runs do not put tally above it
		# (one run: its medians compared)
		ok=$(awk -v t="$t" -v p="$p" -v b="$b" -v g="${goal#< }" -v v="$(echo "$pair" | cut -d' ' -f3)" \
			'BEGIN { g += 0; s = (t / b - 1) * 100; le = v == "" ? t <= p : v != "above"; print (s < g && le) ? "PASS" : "MISS" }')
		res="$ok (goal, and not above perf's${pair:+ in the paired runs below})"
	fi
	printf '| slowdown at %s Hz per CPU, target CPU time (median of %s) | %s | %s | %s | %s |\n' \
		"$hz" "$runs" "$(pct "$t" "$b")" "$(pct "$p" "$b")" "$goal, ≤ perf's" "$res" >>"$rows"
	n=$(median "$tmp/ring.$hz.cpu")
	printf '| slowdown at %s Hz per CPU, tally daemon --sample-mechanism ring (median of %s) | %s | | | info: every sample through the ring |\n' \
		"$hz" "$runs" "$(pct "$n" "$b")" >>"$rows"
	if [ -n "$pair" ]; then
		read -r pm pse pv pbelow pn <<<"$pair"
		case $pv in below) pv="tally below perf" ;; above) pv="tally above perf" ;; *) pv="not told apart" ;; esac
		printf '| tally daemon minus perf record -a at %s Hz, paired by run (mean of %s, ± 2 standard errors) | %s ± %s points | | | %s (tally below in %s of %s runs) |\n' \
			"$hz" "$pn" "$pm" "$pse" "$pv" "$pbelow" "$pn" >>"$rows"
	fi
	log "raw $hz Hz cpu ms: none $(tr '\n' ' ' <"$tmp/none.$hz.cpu") tally $(tr '\n' ' ' <"$tmp/tally.$hz.cpu" 2>/dev/null) ring $(tr '\n' ' ' <"$tmp/ring.$hz.cpu" 2>/dev/null) perf $(tr '\n' ' ' <"$tmp/perf.$hz.cpu" 2>/dev/null)"
done

# ---- 2. steady run: memory and growth ---------------------------------------------
step=$((steady / 12))
[ $step -ge 1 ] || step=1
forever() {	# the workload, again and again, until stop_forever (own process groups)
	local c
	for ((c = 0; c < ncpu; c++)); do
		setsid bash -c 'while :; do taskset -c "$1" "$2" spin "$3" /dev/null; done' _ "$c" "$bt" "$iters" &
		loops+=($!)
	done
}
stop_forever() {
	local p
	for p in "${loops[@]}"; do
		kill -KILL -- "-$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	loops=()
}
series=$tmp/series
: >"$series"
log "steady run: tally daemon at 999 Hz for $steady s (flush every ${step}s, epoch every $((steady / 4))s)"
forever
start_tally 999 "$tmp/steady.db" --flush-interval "${step}s" --epoch-every "$((steady / 4))s" --keep 1s || true
for i in $(seq 1 12); do
	sleep "$step"
	[ -n "$dpid" ] || break
	rss=$(awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$dpid/status" 2>/dev/null || echo 0)
	# the daemon prunes and swaps epochs meanwhile: a path may vanish between ls and du
	db=$(du -s -B1 "$tmp/steady.db" 2>/dev/null | cut -f1 || true)
	cur=$(ls -d "$tmp/steady.db"/[0-9]* 2>/dev/null | sort -t- -k1,1 -k2,2n | tail -1 || true)
	ep=$( { [ -n "$cur" ] && du -s -B1 "$cur" 2>/dev/null; } | cut -f1 || true)
	db=${db:-0} ep=${ep:-0}
	echo "tally $((i * step)) $rss $db $ep" >>"$series"
done
[ -n "$dpid" ] && stop_tally
stop_forever
epochs=$(ls "$tmp/steady.db" | grep -E '^[0-9]{12}' | sort -t- -k1,1 -k2,2n || true)
ep_sizes=$(for e in $epochs; do du -s -B1 "$tmp/steady.db/$e" 2>/dev/null | cut -f1 || true; done | tr '\n' ' ')
log "steady run: perf record -a -F 999 for $steady s"
forever
start_perf 999 "$tmp/steady.data" || true
for i in $(seq 1 12); do
	sleep "$step"
	[ -n "$ppid_" ] || break
	sz=$(stat -c %s "$tmp/steady.data" 2>/dev/null || echo 0)
	echo "perf $((i * step)) 0 $sz $sz" >>"$series"
done
[ -n "$ppid_" ] && stop_perf
stop_forever

mib() { awk -v v="$1" 'BEGIN { printf "%.2f MiB", v / 1048576 }'; }
first=$(awk '$1 == "tally" { print; exit }' "$series")
last=$(awk '$1 == "tally"' "$series" | tail -1)
pfirst=$(awk '$1 == "perf" { print; exit }' "$series")
plast=$(awk '$1 == "perf"' "$series" | tail -1)
if [ -n "$first" ] && [ -n "$last" ]; then
	printf '| daemon resident memory, first sample → end of the %s s run | %s → %s | — | flat | info |\n' \
		"$steady" "$(mib "$(cut -d' ' -f3 <<<"$first")")" "$(mib "$(cut -d' ' -f3 <<<"$last")")" >>"$rows"
	printf '| database on disk, first sample → end (3 newest epochs kept) | %s → %s | %s → %s | flat after the first epoch; perf linear | info |\n' \
		"$(mib "$(cut -d' ' -f4 <<<"$first")")" "$(mib "$(cut -d' ' -f4 <<<"$last")")" \
		"$(mib "$(cut -d' ' -f4 <<<"${pfirst:-x 0 0 0 0}")")" "$(mib "$(cut -d' ' -f4 <<<"${plast:-x 0 0 0 0}")")" >>"$rows"
	per_hour() { awk -v a="$1" -v b="$2" -v ta="$3" -v tb="$4" 'BEGIN { if (tb > ta) printf "%.1f MiB/hour", (b - a) / (tb - ta) * 3600 / 1048576; else print "n/a" }'; }
	# an epoch holds each distinct location once: its size levels off, epochs of
	# the same workload are the same size, and --keep bounds their number
	printf '| size of the epochs kept at the end (oldest first) | %s | — | equal sizes | info |\n' \
		"$(for b in $ep_sizes; do mib "$b"; echo -n ', '; done | sed 's/, $//')" >>"$rows"
	printf '| growth per hour (tally: without --keep, one epoch per %s s; perf: measured rate) | %s | %s | flat vs linear | info |\n' \
		"$((steady / 4))" \
		"$(awk -v s="$ep_sizes" -v e="$((steady / 4))" 'BEGIN { n = split(s, a, " "); if (n < 2) { print "n/a"; exit } t = 0; for (i = 1; i < n; i++) t += a[i]; printf "%.1f MiB/hour", t / (n - 1) * 3600 / e / 1048576 }')" \
		"$(per_hour "$(cut -d' ' -f4 <<<"$pfirst")" "$(cut -d' ' -f4 <<<"$plast")" "$(cut -d' ' -f2 <<<"$pfirst")" "$(cut -d' ' -f2 <<<"$plast")")" >>"$rows"
fi

echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) with \`bench/daemon.sh$([ $quick = 1 ] && echo ' --quick')\` on $ncpu CPUs, $(uname -r), $(perf --version 2>/dev/null); load average $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| measurement | tally daemon | perf record -a | goal | result |"
echo "|---|---|---|---|---|"
cat "$rows"
echo
echo "Steady run, sampled every ${step} s (seconds, daemon RSS, database bytes, current epoch bytes; perf: perf.data bytes):"
echo
echo '```'
cat "$series"
echo '```'
[ $problems = 0 ] || exit 1
