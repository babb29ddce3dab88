#!/usr/bin/env bash
# The build-id cache (docs/symbols.md, "The build-id cache") against perf's
# ~/.debug, in three tables:
#  1. `tally record -- true`, wall time, median of N runs: the cache off, cold
#     (a fresh directory each run: every image copied) and warm (every image
#     there: a look each); with --base BUILD, that tally too (before the cache);
#  2. the end of a 15 s recording (the time from the workload's last
#     instruction to the recorder's exit: tally record against perf record,
#     each with its build-id cache cold and warm);
#  3. report --symbols of a small database (split_images: its own code, a
#     library, libc) with Debian's libc6-dbg: from the cache's decompressed
#     copy, from /usr/lib/debug (--no-buildid-cache), and --base's.
#   bench/buildid.sh [BUILD_DIR] [--base BUILD_DIR] [--runs N] [--ms MS]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && { bench_help; exit 0; }
bench_tally "${1:-build}"
shift || true
base= runs=15 ms=15000
while [ $# -gt 0 ]; do
	case "$1" in
	--base) base=$(cd "$2" && pwd)/tally; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--ms) ms=$2; shift 2 ;;
	*) bench_help >&2; exit 2 ;;
	esac
done
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-buildid-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
w=$build/tests/workloads
now() { date +%s.%N; }
ms_of() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'; }
# cpu_ms CMD...: the CPU time (task-clock, children included) CMD takes, in ms
cpu_ms() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { print $1 }'; }

# 1. record -- true
true_runs() { # LABEL TALLY MODE
	local label=$1 t=$2 mode=$3 r
	: >"$tmp/times"
	for r in $(seq "$runs"); do
		case $mode in
		off) export TALLY_BUILDID_CACHE=off ;;
		cold) export TALLY_BUILDID_CACHE=$tmp/cold-$r ;;
		warm) export TALLY_BUILDID_CACHE=$tmp/warm ;;
		base) unset TALLY_BUILDID_CACHE ;;
		esac
		local t0 t1
		[ "$mode" != cold ] || rm -rf "$tmp/cold-$r"
		t0=$(now)
		"$t" record -o "$tmp/true.db" --force -- true >/dev/null 2>&1
		t1=$(now)
		ms_of "$t0" "$t1" >>"$tmp/times"
		[ "$mode" != cold ] || rm -rf "$tmp/cold-$r-cpu"
		[ "$mode" != cold ] || export TALLY_BUILDID_CACHE=$tmp/cold-$r-cpu
		cpu_ms "$t" record -o "$tmp/true.db" --force -- true >>"$tmp/cpu"
	done
	unset TALLY_BUILDID_CACHE
	printf '| %s | %s ms | %s ms | %s ms |\n' "$label" "$(median "$tmp/times")" "$(sort -g "$tmp/times" | head -1)" \
		"$(median "$tmp/cpu")"
	: >"$tmp/cpu"
}
: >"$tmp/cpu"
TALLY_BUILDID_CACHE=$tmp/warm "$tally" record -o "$tmp/true.db" --force -- true >/dev/null 2>&1
# the warm-up's copies are made by a detached process: wait for its end
while pgrep -f "record -o $tmp/true.db" >/dev/null; do sleep 0.1; done
echo "| record -- true ($runs runs) | wall, median | wall, min | CPU, median |"
echo "|---|---|---|---|"
true_runs "cache off" "$tally" off
true_runs "cache cold (everything copied)" "$tally" cold
true_runs "cache warm (a look per image)" "$tally" warm
[ -z "$base" ] || true_runs "before the cache (--base)" "$base" base
echo

# 2. the end of a 15 s recording: workload end -> recorder exit
end_of() { # LABEL CMD...
	local label=$1 t1
	shift
	"$@" -- sh -c "'$w/split_images' $ms >/dev/null; date +%s.%N >'$tmp/end'" >/dev/null 2>&1
	t1=$(now)
	printf '| %s | %s ms |\n' "$label" "$(ms_of "$(cat "$tmp/end")" "$t1")"
}
echo "| end of a $((ms / 1000)) s recording of split_images (workload's end to the recorder's exit) | time |"
echo "|---|---|"
TALLY_BUILDID_CACHE=$tmp/end-cache end_of "tally record, cache cold" "$tally" record -o "$tmp/e1.db"
TALLY_BUILDID_CACHE=$tmp/end-cache end_of "tally record, cache warm" "$tally" record -o "$tmp/e2.db"
TALLY_BUILDID_CACHE=off end_of "tally record, cache off" "$tally" record -o "$tmp/e3.db"
mkdir -p "$tmp/phome"
HOME=$tmp/phome end_of "perf record, ~/.debug cold" perf record -q -o "$tmp/p1.data"
HOME=$tmp/phome end_of "perf record, ~/.debug warm" perf record -q -o "$tmp/p2.data"
echo

# 3. report --symbols with libc6-dbg
libc=$(ldd "$w/split_images" | awk '$1 ~ /^libc\.so/ { print $3 }')
id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID/ { print $3 }')
if [ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
	export TALLY_BUILDID_CACHE=$tmp/rep-cache
	"$tally" record -F 999 -o "$tmp/small.db" -- "$w/split_images" 300 >/dev/null 2>&1
	while pgrep -f "record -F 999 -o $tmp/small.db" >/dev/null; do sleep 0.1; done
	rep() { # LABEL TALLY ARGS...
		local label=$1 t=$2 r
		shift 2
		: >"$tmp/times"
		: >"$tmp/cpu"
		for r in $(seq "$runs"); do
			local t0 t1
			t0=$(now)
			"$t" report -i "$tmp/small.db" --symbols "$@" >/dev/null 2>&1
			t1=$(now)
			ms_of "$t0" "$t1" >>"$tmp/times"
			cpu_ms "$t" report -i "$tmp/small.db" --symbols "$@" >>"$tmp/cpu"
		done
		printf '| %s | %s ms | %s ms |\n' "$label" "$(median "$tmp/times")" "$(median "$tmp/cpu")"
	}
	echo "| report --symbols, small database, libc6-dbg installed ($runs runs) | wall, median | CPU, median |"
	echo "|---|---|---|"
	rep "debug file from the cache (decompressed)" "$tally"
	rep "debug file from /usr/lib/debug (--no-buildid-cache)" "$tally" --no-buildid-cache
	rep "--symbols --no-inline (symbol tables only)" "$tally" --no-inline
	[ -z "$base" ] || rep "before (--base)" "$base"
	unset TALLY_BUILDID_CACHE
else
	echo "(no /usr/lib/debug file for $libc: install libc6-dbg for the third table)"
fi
