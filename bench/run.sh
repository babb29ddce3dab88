#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] [--runs N] [--quick] [--write-doc] [--keep]
#
# Measures tally and perf side by side in one run and prints one Markdown
# table (progress goes to stderr, the table to stdout):
#   1. slowdown of a fixed-work CPU-bound target at 999 Hz and 20 kHz
#      (median of N runs, interleaved: none, tally, perf, ...);
#   2. wall time of `record -- true`;
#   3. the profiler's own CPU time at 20 kHz;
#   4. bytes on disk, samples and lost samples after a 15 s run at 20 kHz;
#   5. report time on those 15 s recordings.
# docs/performance.md says what each number is and how it is taken.
#
#   BUILD_DIR    where tally was built (default: build); uses BUILD_DIR/tally
#   --runs N     runs per configuration for the slowdown (default 3)
#   --quick      smoke test: short targets (0.5 s, 3 s), one run of everything
#   --write-doc  also rewrite the results section of docs/performance.md
#                (between its <!-- bench-results:begin/end --> markers),
#                unless the run had problems
#   --keep       keep the temporary directory (databases, logs, raw numbers)
#
# Needs: cc, perf, awk.  Run as root (or with perf_event_paranoid <= 1) so
# that perf and tally can both sample.  Exit status: 0 when everything ran
# (whatever PASS/MISS says), 1 when a profiler command failed, 2 on bad usage.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
doc=$root/docs/performance.md

build=build runs=3 quick=0 write_doc=0 keep=0 build_set=0
usage() { bench_help >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
	--runs=*) runs=${1#--runs=}; shift ;;
	--quick) quick=1; shift ;;
	--write-doc) write_doc=1; shift ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	-*) echo "bench: unknown option '$1'" >&2; usage ;;
	*) [ $build_set = 0 ] || usage; build=$1; build_set=1; shift ;;
	esac
done
case $runs in ''|*[!0-9]*|0) echo "bench: --runs needs a positive integer" >&2; exit 2 ;; esac

# durations (seconds of unprofiled target CPU) and repetitions
if [ $quick = 1 ]; then
	target_s=0.5 long_s=3 runs=1 true_runs=1 report_runs=1
else
	target_s=2.5 long_s=15 true_runs=7 report_runs=5
fi
lo_hz=999 hi_hz=20000

bench_tally "$build"
command -v perf >/dev/null || { echo "bench: perf not found (apt-get install linux-perf)" >&2; exit 2; }
command -v cc >/dev/null || { echo "bench: cc not found" >&2; exit 2; }
if [ $write_doc = 1 ] && ! grep -q '<!-- bench-results:begin -->' "$doc" 2>/dev/null; then
	echo "bench: '$doc' has no <!-- bench-results:begin --> marker" >&2; exit 2
fi

tmp=$(mktemp -d /tmp/tally-bench.XXXXXX)
if [ $keep = 1 ]; then
	trap 'echo "bench: kept $tmp" >&2' EXIT
else
	trap 'rm -rf "$tmp"' EXIT
fi
bt=$tmp/benchtool
cc -O2 -g -fno-omit-frame-pointer -Wall -Wextra -o "$bt" "$here/benchtool.c"

log() { echo "bench: $*" >&2; }
problems=$tmp/problems	# one line per failure or misbehaviour seen
: >"$problems"
problem() { echo "$*" >>"$problems"; log "PROBLEM: $*"; }

# kv FILE KEY: the value of KEY=VALUE in FILE (empty when missing)
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" "$1" 2>/dev/null | head -n1; }
calc() { awk "BEGIN { OFMT = \"%.4f\"; print $* }"; }

# measure NAME CMD...: runs CMD under `benchtool run`; leaves its stdout,
# stderr and the run record in $tmp/NAME.{out,err,run}.  Returns CMD's status.
measure() {
	local name=$1 rc=0
	shift
	"$bt" run "$tmp/$name.run" -- "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	if [ $rc != 0 ]; then
		problem "\`$*\` exited with status $rc; stderr: $(tail -n 3 "$tmp/$name.err" | tr '\n' ' ')"
	fi
	return $rc
}

# ---- machine ----------------------------------------------------------------
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
machine="$(nproc) CPUs ($cpu_model), kernel $(uname -r), $(perf --version 2>/dev/null)"
grep -qw hypervisor /proc/cpuinfo && machine="$machine, virtual machine (hypervisor CPU flag)"
if command -v systemd-detect-virt >/dev/null && virt=$(systemd-detect-virt --container 2>/dev/null) && [ "$virt" != none ]; then
	machine="$machine, inside a $virt container"
fi
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
# (bench/ and docs/ do not change what is measured; --write-doc edits docs/)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no -- . ':!bench' ':!docs' 2>/dev/null)" ]; then
	rev="$rev (uncommitted changes)"
fi
# other processes holding perf events (another profiler, a `tally record -a`):
# they take CPU, and a concurrent listener with attr.build_id (tally's
# side-band events, `perf record --buildid-mmap`) makes Linux mark other
# sessions' MMAP2 records as carrying a build ID, which crashes perf 6.1
other_profilers() {
	local p fd n
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = $$ ] && continue
		n=0
		for fd in "$p"/fd/*; do
			[ "$(readlink "$fd" 2>/dev/null)" = "anon_inode:[perf_event]" ] && n=$((n + 1))
		done
		[ $n -gt 0 ] && printf '%s (%s) ' "${p#/proc/}" "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-60 | sed 's/ *$//')"
	done
	return 0
}
others_start=$(other_profilers)
[ -z "$others_start" ] || log "warning: other processes hold perf events: $others_start"
tally_id() { stat -c '%s %Y' "$tally"; }
tally_id_start=$(tally_id)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
max_rate_start=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
started=$(date -u +%Y-%m-%dT%H:%MZ)
# busy CPU time of the whole machine, in seconds (user nice system irq softirq
# steal from /proc/stat): the end value minus this minus the bench's own CPU
# time is what other processes used while the bench ran
busy_s() { awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat; }
busy_start=$(busy_s)
wall_start=$(date +%s.%N)
log "machine: $machine; load average $load_start"

# ---- calibration: iterations for target_s seconds of CPU --------------------
cal_iters=200000000
[ $quick = 1 ] && cal_iters=50000000
best=
for i in 1 2; do
	"$bt" spin $cal_iters "$tmp/cal.spin"
	ms=$(kv "$tmp/cal.spin" cpu_ms)
	if [ -z "$best" ] || awk "BEGIN { exit !($ms < $best) }"; then best=$ms; fi
done
iters_for() { awk -v s="$1" -v b="$best" -v n="$cal_iters" 'BEGIN { printf "%.0f", int(s * 1000 / b * n / 10000) * 10000 }'; }
iters=$(iters_for "$target_s")
long_iters=$(iters_for "$long_s")
log "calibration: $cal_iters iterations in $best ms CPU; target $iters iterations (~$target_s s), long $long_iters (~$long_s s)"

# ---- 1 + 3: slowdown and profiler CPU ---------------------------------------
modes="none tally_lo perf_lo tally_hi perf_hi"
for r in $(seq 1 "$runs"); do
	for m in $modes; do
		log "slowdown run $r/$runs: $m"
		n=sd.$m.$r
		case $m in
		none) cmd=() ;;
		tally_lo) cmd=("$tally" record -F $lo_hz -o "$tmp/sd.db" --force --) ;;
		tally_hi) cmd=("$tally" record -F $hi_hz -o "$tmp/sd.db" --force --) ;;
		perf_lo) cmd=(perf record -F $lo_hz -o "$tmp/sd.data" --) ;;
		perf_hi) cmd=(perf record -F $hi_hz -o "$tmp/sd.data" --) ;;
		esac
		measure "$n" "${cmd[@]}" "$bt" spin "$iters" "$tmp/$n.spin" || continue
		s=$tmp/$n.spin
		if [ ! -s "$s" ]; then
			problem "$m run $r: the target wrote no result"
			continue
		fi
		kv "$s" cpu_ms >>"$tmp/sd.$m.cpu"
		kv "$s" wall_ms >>"$tmp/sd.$m.wall"
		# profiler CPU = what wait4 saw for the profiler (itself plus the
		# target it reaped) minus the target's own rusage
		calc "$(kv "$tmp/$n.run" user_ms) + $(kv "$tmp/$n.run" sys_ms) - $(kv "$s" user_ms) - $(kv "$s" sys_ms)" >>"$tmp/sd.$m.prof"
	done
done
for m in $modes; do
	for k in cpu wall prof; do
		eval "med_${m}_$k=\$(median \"\$tmp/sd.\$m.\$k\")"
		log "raw $m $k (ms): $(tr '\n' ' ' <"$tmp/sd.$m.$k" 2>/dev/null)"
	done
done

# ---- 2: record -- true ------------------------------------------------------
for r in $(seq 1 "$true_runs"); do
	log "record -- true, run $r/$true_runs"
	measure true.tally.$r "$tally" record -o "$tmp/true.db" --force -- true &&
		kv "$tmp/true.tally.$r.run" wall_ms >>"$tmp/true.tally.wall"
	measure true.perf.$r perf record -o "$tmp/true.data" -- true &&
		kv "$tmp/true.perf.$r.run" wall_ms >>"$tmp/true.perf.wall"
done
true_tally=$(median "$tmp/true.tally.wall")
true_perf=$(median "$tmp/true.perf.wall")

# ---- 4: long run at 20 kHz: size, samples, lost, profiler CPU ---------------
log "long run: tally record -F $hi_hz (~$long_s s)"
long_tally_ok=1 long_perf_ok=1
measure long.tally "$tally" record -F $hi_hz -o "$tmp/long.db" --force -- "$bt" spin "$long_iters" "$tmp/long.tally.spin" || long_tally_ok=0
log "long run: perf record -F $hi_hz (~$long_s s)"
measure long.perf perf record -F $hi_hz -o "$tmp/long.data" -- "$bt" spin "$long_iters" "$tmp/long.perf.spin" || long_perf_ok=0

size_tally= size_perf= samples_tally= samples_perf= lost_tally= lost_tally_rep= lost_perf= lost_perf_chunks=
throttle_tally= throttle_perf= prof_long_tally= prof_long_perf= tcpu_long_tally= tcpu_long_perf=
if [ $long_tally_ok = 1 ]; then
	size_tally=$(du -sb "$tmp/long.db" | cut -f1)
	# final stderr line: tally: wrote 'DB': N samples, M lost (...)
	last=$(tail -n1 "$tmp/long.tally.err")
	samples_tally=$(sed -n 's/.*: \([0-9][0-9]*\) samples, .*/\1/p' <<<"$last")
	lost_tally=$(sed -n 's/.* \([0-9][0-9]*\) lost.*/\1/p' <<<"$last")
	[ -n "$samples_tally" ] && [ -n "$lost_tally" ] ||
		problem "tally record: cannot read samples/lost from its last stderr line: '$last'"
	s=$tmp/long.tally.spin
	tcpu_long_tally=$(kv "$s" cpu_ms)
	prof_long_tally=$(calc "$(kv "$tmp/long.tally.run" user_ms) + $(kv "$tmp/long.tally.run" sys_ms) - $(kv "$s" user_ms) - $(kv "$s" sys_ms)")
fi
if [ $long_perf_ok = 1 ]; then
	size_perf=$(stat -c %s "$tmp/long.data")
	samples_perf=$(sed -n 's/.*(\([0-9][0-9]*\) samples).*/\1/p' "$tmp/long.perf.err" | tail -n1)
	perf report -i "$tmp/long.data" --stats >"$tmp/long.perf.stats" 2>&1 || true
	lost_perf_chunks=$(awk '/^cpu-clock/ { exit } $1 == "LOST" { print $3 }' "$tmp/long.perf.stats")
	throttle_perf=$(awk '/^cpu-clock/ { exit } $1 == "THROTTLE" { print $3 }' "$tmp/long.perf.stats")
	s=$tmp/long.perf.spin
	tcpu_long_perf=$(kv "$s" cpu_ms)
	prof_long_perf=$(calc "$(kv "$tmp/long.perf.run" user_ms) + $(kv "$tmp/long.perf.run" sys_ms) - $(kv "$s" user_ms) - $(kv "$s" sys_ms)")
fi

# ---- 5: report time on the long recordings ----------------------------------
for r in $(seq 1 "$report_runs"); do
	log "report run $r/$report_runs"
	if [ $long_tally_ok = 1 ] && measure rep.tally.$r "$tally" report -i "$tmp/long.db" --symbols; then
		kv "$tmp/rep.tally.$r.run" wall_ms >>"$tmp/rep.tally.wall"
	fi
	if [ $long_perf_ok = 1 ] && measure rep.perf.$r perf report -i "$tmp/long.data" --stdio --sort dso,sym; then
		kv "$tmp/rep.perf.$r.run" wall_ms >>"$tmp/rep.perf.wall"
	fi
done
rep_tally=$(median "$tmp/rep.tally.wall")
rep_perf=$(median "$tmp/rep.perf.wall")
if [ -s "$tmp/rep.tally.1.out" ]; then
	f=$tmp/rep.tally.1.out
	lost_tally_rep=$(sed -n 's/^lost: \([0-9][0-9]*\) samples.*/\1/p' "$f" | head -n1)
	throttle_tally=$(sed -n 's/.*throttled: \([0-9][0-9]*\) times.*/\1/p' "$f" | head -n1)
	[ -n "$lost_tally_rep" ] || problem "tally report: no 'lost:' line"
	grep -q bench_hot "$f" || problem "tally report --symbols: bench_hot (the hot function) is missing"
	if [ -n "$lost_tally" ] && [ -n "$lost_tally_rep" ] && [ "$lost_tally" != "$lost_tally_rep" ]; then
		problem "tally lost samples disagree: record said $lost_tally, report says $lost_tally_rep"
	fi
fi
if [ -s "$tmp/rep.perf.1.out" ]; then
	lost_perf=$(sed -n 's/^# Total Lost Samples: \([0-9][0-9]*\).*/\1/p' "$tmp/rep.perf.1.out" | head -n1)
fi

others_end=$(other_profilers)
[ -z "$others_end" ] || log "warning: other processes hold perf events: $others_end"
[ "$(tally_id 2>/dev/null)" = "$tally_id_start" ] ||
	problem "$tally changed (rebuilt?) while the bench ran: the numbers mix two builds, run it again"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
busy_end=$(busy_s)
wall_end=$(date +%s.%N)
# `times`, second line: user and system time of this shell's children
# (in this shell: `times` in a pipeline or $(...) would report a subshell)
times >"$tmp/times"
own_s=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /m|s/); t += a[1] * 60 + a[2] } print t }' "$tmp/times")
other_s=$(calc "$busy_end - $busy_start - $own_s")
awk "BEGIN { exit !($other_s < 0) }" && other_s=0
other_pct=$(calc "int(100 * ($other_s) / ($wall_end - $wall_start) + 0.5)")
[ "$other_pct" -lt 0 ] && other_pct=0
log "other processes used about $other_s s of CPU during the bench ($other_pct% of one CPU on average)"
max_rate_end=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
[ "$max_rate_start" = "$max_rate_end" ] ||
	log "note: the kernel lowered perf_event_max_sample_rate from $max_rate_start to $max_rate_end during the run"

# ---- the table --------------------------------------------------------------
na="n/a"
# ms V: a duration in ms, readable
ms() { [ -n "$1" ] && awk -v v="$1" 'BEGIN { if (v >= 1000) printf "%.2f s", v / 1000; else if (v >= 100) printf "%.0f ms", v; else if (v >= 10) printf "%.1f ms", v; else printf "%.2f ms", v }' || echo $na; }
bytes() { [ -n "$1" ] && awk -v v="$1" 'BEGIN { if (v >= 1048576) printf "%.1f MiB (%d B)", v / 1048576, v; else if (v >= 1024) printf "%.1f KiB (%d B)", v / 1024, v; else printf "%d B", v }' || echo $na; }
# pct MED BASE: slowdown of MED over BASE, in percent (signed)
pct() { [ -n "$1" ] && [ -n "$2" ] && awk -v m="$1" -v b="$2" 'BEGIN { printf "%+.1f", (m / b - 1) * 100 }' || true; }
# ratio A B: A/B as "0.123x"
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else { r = a / b; if (r >= 10) printf "%.0fx", r; else if (r >= 0.1) printf "%.2fx", r; else printf "%.4fx (1/%.0f)", r, 1 / r } }' || echo $na; }
# spread FILE BASE: (max - min) / BASE in percent
spread() { [ -s "$1" ] && sort -g "$1" | awk -v b="$2" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f", (hi - lo) / b * 100 }' || echo 0; }

base=$med_none_cpu
noise=$(spread "$tmp/sd.none.cpu" "${base:-1}")
wnoise=$(spread "$tmp/sd.none.wall" "${med_none_wall:-1}")
rows=$tmp/rows
: >"$rows"
row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@" >>"$rows"; }

slowdown_row() {	# LABEL HZ-suffix KIND(cpu|wall) GOAL?
	local label=$1 sfx=$2 kind=$3 goal=$4 t p tv pv rat res
	eval "tv=\${med_tally_${sfx}_$kind}; pv=\${med_perf_${sfx}_$kind}; b=\${med_none_$kind}"
	t=$(pct "$tv" "$b") p=$(pct "$pv" "$b")
	rat=$na
	if [ -n "$t" ] && [ -n "$p" ] && awk "BEGIN { exit !($p > 0) }"; then rat=$(ratio "$t" "$p"); fi
	res=info
	# noise: the largest run-to-run range (max - min, in % of the
	# unprofiled median) among the unprofiled, tally and perf runs
	local nz
	nz=$(printf '%s\n' "$(spread "$tmp/sd.none.$kind" "${b:-1}")" \
		"$(spread "$tmp/sd.tally_$sfx.$kind" "${b:-1}")" \
		"$(spread "$tmp/sd.perf_$sfx.$kind" "${b:-1}")" | sort -g | tail -n1)
	if [ "$goal" = yes ]; then
		if [ -z "$t" ] || [ -z "$p" ]; then res=MISS
		elif awk "BEGIN { exit !($t <= $p) }"; then res="PASS (run-to-run range $nz%)"
		elif awk "BEGIN { exit !($t - $p <= $nz) }"; then res="MISS (by less than the $nz% run-to-run range)"
		else res="MISS (run-to-run range $nz%)"
		fi
		goal="≤ perf's"
	else
		goal="—"
	fi
	row "$label" "${t:-$na}${t:+%} ($(ms "$tv"))" "${p:-$na}${p:+%} ($(ms "$pv"))" "$rat" "$goal" "$res"
}

if [ "$runs" -gt 1 ]; then
	rng="info (run-to-run range: CPU $noise%, wall $wnoise%)"
else
	rng="info (one run: noise unknown)"
fi
row "unprofiled target: CPU time / wall time (median of $runs)" "$(ms "$med_none_cpu") / $(ms "$med_none_wall")" "" "" "—" "$rng"
slowdown_row "slowdown at $lo_hz Hz, target CPU time" lo cpu yes
slowdown_row "slowdown at $hi_hz Hz, target CPU time" hi cpu yes
slowdown_row "slowdown at $lo_hz Hz, target wall time" lo wall no
slowdown_row "slowdown at $hi_hz Hz, target wall time" hi wall no

# profiler CPU at 20 kHz: ms of profiler CPU per second of target CPU
pt=$med_tally_hi_prof pp=$med_perf_hi_prof
per_s() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v c="$2" 'BEGIN { printf "%.0f ms (%.1f ms per target CPU s)", a, a / (c / 1000) }' || echo $na; }
row "profiler's own CPU at $hi_hz Hz, ~$target_s s target (median of $runs)" "$(per_s "$pt" "$med_tally_hi_cpu")" "$(per_s "$pp" "$med_perf_hi_cpu")" "$(ratio "$pt" "$pp")" "—" info
row "profiler's own CPU at $hi_hz Hz, ~$long_s s target (1 run)" "$(per_s "$prof_long_tally" "$tcpu_long_tally")" "$(per_s "$prof_long_perf" "$tcpu_long_perf")" "$(ratio "$prof_long_tally" "$prof_long_perf")" "—" info

res=MISS
[ -n "$true_tally" ] && awk "BEGIN { exit !($true_tally < 50) }" && res=PASS
row "\`record -- true\` wall time (median of $true_runs)" "$(ms "$true_tally")" "$(ms "$true_perf")" "$(ratio "$true_tally" "$true_perf")" "tally < 50 ms" "$res"

res=MISS shrink=$na
if [ -n "$size_tally" ] && [ -n "$size_perf" ]; then
	shrink=$(awk -v t="$size_tally" -v p="$size_perf" 'BEGIN { printf "%.0fx smaller", p / t }')
	awk "BEGIN { exit !($size_perf >= 100 * $size_tally) }" && [ "${lost_tally:-1}" = 0 ] && [ "${lost_tally_rep:-1}" = 0 ] && res=PASS
fi
row "bytes on disk, ~$long_s s at $hi_hz Hz (1 run)" "$(bytes "$size_tally")" "$(bytes "$size_perf")" "$shrink" "≥ 100x smaller, 0 lost" "$res"
exp_t=$na exp_p=$na
[ -n "$tcpu_long_tally" ] && exp_t=$(awk -v c="$tcpu_long_tally" -v f=$hi_hz 'BEGIN { printf "%.0f", c / 1000 * f }')
[ -n "$tcpu_long_perf" ] && exp_p=$(awk -v c="$tcpu_long_perf" -v f=$hi_hz 'BEGIN { printf "%.0f", c / 1000 * f }')
row "samples, ~$long_s s at $hi_hz Hz (target CPU s × Hz)" "${samples_tally:-$na} ($exp_t)" "${samples_perf:-$na} ($exp_p)" "$(ratio "$samples_tally" "$samples_perf")" "—" info
res=MISS
[ "${lost_tally:-x}" = 0 ] && [ "${lost_tally_rep:-x}" = 0 ] && res=PASS
row "lost samples, ~$long_s s at $hi_hz Hz" "${lost_tally:-$na} (record), ${lost_tally_rep:-$na} (report); throttled ${throttle_tally:-$na}" "${lost_perf:-$na} (report), ${lost_perf_chunks:-0} LOST records; throttled ${throttle_perf:-0}" "" "tally 0" "$res"

res=MISS
[ -n "$rep_tally" ] && awk "BEGIN { exit !($rep_tally < 50) }" && res=PASS
row "report wall time on the $long_s s recording (median of $report_runs)" "$(ms "$rep_tally")" "$(ms "$rep_perf")" "$(ratio "$rep_tally" "$rep_perf")" "tally < 50 ms" "$res"

section=$tmp/section
{
	echo "Measured $started with \`bench/run.sh$([ $quick = 1 ] && echo ' --quick')$([ $quick = 0 ] && [ "$runs" != 3 ] && echo " --runs $runs")\` (tally $rev)."
	echo "Machine: $machine."
	echo "Load average at start / end: $load_start / $load_end; perf_event_max_sample_rate $max_rate_start$([ "$max_rate_start" != "$max_rate_end" ] && echo " (lowered to $max_rate_end by the kernel during the run)")."
	echo "Other processes used about $other_pct% of one CPU on average during the run (busy time in /proc/stat minus the bench's own)$([ "$other_pct" -ge 10 ] && echo ": **the machine was not quiet, the numbers are noisier than usual**")."
	[ -z "$others_start$others_end" ] || echo "Other processes held perf events during the run (start: ${others_start:-none}; end: ${others_end:-none}): **the numbers are disturbed**."
	echo "Target: $iters iterations (~$target_s s CPU unprofiled), long target $long_iters iterations."
	echo
	echo "| measurement | tally | perf | tally/perf | goal | result |"
	echo "|---|---|---|---|---|---|"
	cat "$rows"
	if [ -s "$problems" ]; then
		echo
		echo "Problems seen during this run:"
		echo
		sed 's/^/- /' "$problems"
	fi
} >"$section"

cat "$section"

if [ $write_doc = 1 ] && [ -s "$problems" ]; then
	log "not rewriting $doc: this run had problems (listed above)"
elif [ $write_doc = 1 ]; then
	awk -v sec="$section" '
		/<!-- bench-results:begin -->/ { print; while ((getline l < sec) > 0) print l; skip = 1; next }
		/<!-- bench-results:end -->/ { skip = 0 }
		!skip { print }' "$doc" >"$tmp/doc.new"
	cat "$tmp/doc.new" >"$doc"
	log "rewrote the results section of $doc"
fi

[ -s "$problems" ] && exit 1
exit 0
