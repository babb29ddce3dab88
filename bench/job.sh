#!/usr/bin/env bash
# What tally job adds to a test (docs/performance.md, "The job harness"):
#  1. no profiler: N runs of `true` and of sleeptest 0 in one job, against the
#     same commands run directly: the harness's time per test;
#  2. the tally profiler around tests/workloads/split_funcs MS: the profiled
#     iteration's wall time against the same workload under `tally record`
#     (and alone), the profiler's own start, stop and report times (from
#     status.json), and what is left: the harness's own time per test;
#  3. the same around `sleep 0.5`, whose time the machine's load moves less.
#   bench/job.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--tests N] [--runs R]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=${1:-build}; shift || true
ms=1000 hz=999 ntests=20 runs=5
while [ $# -gt 0 ]; do
	case "$1" in
	--ms) ms=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--tests) ntests=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: bench/job.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--tests N] [--runs R]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
work=$(cd "$build" && pwd)/tests/workloads/split_funcs
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
[ -x "$work" ] || { echo "bench: no $work (run make first)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-jobbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export TALLY_STATE_DIR=$tmp/state TALLY_PROFILERS_PATH=

now() { date +%s.%N; }
# wall CMD...: the wall time of CMD in ms
wall() {
	local t0 t1
	t0=$(now)
	"$@" >/dev/null 2>>err.log
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }'
}
# js FILE EXPR: a number from status.json (ms), EXPR in Python over s
js() { python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print("%.3f" % (1000 * eval(sys.argv[2])))' "$1" "$2"; }
n=0
job() { # job CONTROL: runs it into res.N: RES the results directory, W its wall ms
	n=$((n + 1))
	RES=res.$n
	W=$(wall "$tally" job run -r "$RES" "$1")
}

echo "# tally job: $ntests tests per job, medians of $runs jobs; workload split_funcs $ms ms, -F $hz"

# 1. no profiler
for t in true sleeptest; do
	: >c.$t
	for i in $(seq "$ntests"); do
		if [ $t = true ]; then echo "run -- true" >>c.$t; else echo "run sleeptest 0" >>c.$t; fi
	done
	: >per.$t
	for r in $(seq "$runs"); do
		job c.$t
		w=$W
		# per test: the job's wall time, less the tests' own, over the tests
		tt=$(js $RES/status.json "sum(t['time'] for t in s['tests'])")
		awk -v w="$w" -v t="$tt" -v n="$ntests" 'BEGIN { printf "%.3f\n", (w - t) / n }' >>per.$t
		echo "$w" >>wall.$t
	done
done
: >direct.true
for r in $(seq "$runs"); do wall true >>direct.true; done
printf '%-52s %10s\n' "no profiler" "ms"
printf '%-52s %10.2f\n' "  'true' run directly (fork, exec, wait)" "$(median <direct.true)"
printf '%-52s %10.2f\n' "  job of $ntests x 'run -- true': wall per test" "$(awk -v n="$ntests" '{ print $1 / n }' wall.true | median)"
printf '%-52s %10.2f\n' "  harness per test (job wall - tests' time) / tests" "$(median <per.true)"
printf '%-52s %10.2f\n' "  the same with 'run sleeptest 0'" "$(median <per.sleeptest)"
printf 'run sleeptest 0\n' >c.one
: >one
for r in $(seq "$runs"); do job c.one; echo "$W" >>one; done
one=$(median <one)
printf '%-52s %10.2f\n' "  a whole job of one sleeptest 0 (tally's start too)" "$one"

# 2. the tally profiler: rounds of the workload alone, under tally record and
# in a job of one profiled test, interleaved so that the machine's load
# weighs on each alike
{
	echo "profilers add tally -F $hz"
	echo "profilers only on"
	echo "run -- $work $ms"
} >c.tally
: >alone; : >rec; : >it; : >st; : >sp; : >rp; : >per
for r in $(seq "$((runs * 2))"); do
	wall "$work" "$ms" >>alone
	rm -rf rec.db
	wall "$tally" record -F "$hz" -o rec.db -- "$work" "$ms" >>rec
	job c.tally
	w=$W
	js $RES/status.json "s['tests'][0]['time']" >>it
	js $RES/status.json "s['tests'][0]['profilers'][0]['start']" >>st
	js $RES/status.json "s['tests'][0]['profilers'][0]['stop']" >>sp
	js $RES/status.json "s['tests'][0]['profilers'][0]['report']" >>rp
	other=$(js $RES/status.json "sum(t['time'] + sum(p['start'] + p['stop'] + p['report'] for p in t['profilers']) for t in s['tests'])")
	awk -v w="$w" -v o="$other" 'BEGIN { printf "%.3f\n", w - o }' >>per
done
printf '%-52s %10s\n' "tally profiler around split_funcs $ms" "ms"
printf '%-52s %10.2f\n' "  split_funcs alone" "$(median <alone)"
printf '%-52s %10.2f\n' "  tally record -F $hz -- split_funcs (whole command)" "$(median <rec)"
printf '%-52s %10.2f\n' "  job: the profiled iteration" "$(median <it)"
printf '%-52s %10.2f\n' "  job: tally start (recorder opened, attached)" "$(median <st)"
printf '%-52s %10.2f\n' "  job: tally stop (finish, database written)" "$(median <sp)"
printf '%-52s %10.2f\n' "  job: iteration + start + stop (vs tally record)" "$(paste it st sp | awk '{ print $1 + $2 + $3 }' | median)"
printf '%-52s %10.2f\n' "  job - tally record, paired per round (median)" "$(paste it st sp rec | awk '{ print $1 + $2 + $3 - $4 }' | median)"
printf '%-52s %10.2f\n' "  job: tally report (text, call graph, HTML)" "$(median <rp)"
printf '%-52s %10.2f\n' "  the rest of the job (wall - iteration - steps)" "$(median <per)"

# 3. the same around 'sleep 0.5', whose wall time the machine's load barely
# moves: what tally adds in each form, with little noise
{
	echo "profilers add tally -F $hz"
	echo "profilers only on"
	echo "run -- sleep 0.5"
} >c.sleep
: >salone; : >srec; : >sjob
for r in $(seq "$((runs * 2))"); do
	wall sleep 0.5 >>salone
	rm -rf rec.db
	wall "$tally" record -F "$hz" -o rec.db -- sleep 0.5 >>srec
	job c.sleep
	js $RES/status.json "s['tests'][0]['time'] + s['tests'][0]['profilers'][0]['start'] + s['tests'][0]['profilers'][0]['stop']" >>sjob
done
printf '%-52s %10s\n' "around 'sleep 0.5'" "ms"
printf '%-52s %10.2f\n' "  sleep 0.5 alone" "$(median <salone)"
printf '%-52s %10.2f\n' "  tally record -- sleep 0.5 (whole command)" "$(median <srec)"
printf '%-52s %10.2f\n' "  job: iteration + tally start + stop" "$(median <sjob)"
printf '%-52s %10.2f\n' "  job - tally record, paired per round (median)" "$(paste sjob srec | awk '{ print $1 - $2 }' | median)"
grep -v "^tally: wrote '" err.log >err2.log || true
[ ! -s err2.log ] || { echo "# stderr of the runs:"; head -5 err2.log; }
