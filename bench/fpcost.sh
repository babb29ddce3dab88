#!/usr/bin/env bash
# What frame-pointer call graphs cost, by the size of the stack copy that the
# repair unwinds with CFI (docs/callgraph.md): `tally record --call-graph
# fp,SIZE` for SIZE 0 (no copy, no repair: the plain chain), 128 (the copy of
# before, which repaired a leaf), 512 ... 4096, beside `perf record -g`, on
# bench/fpwork.c (built with frame pointers, its time in Debian's libc, which
# has none). For each, at --hz (default 10000) so that the sampling's cost
# stands out of a busy machine's noise:
#   - the target's CPU time per sample above its unprofiled time for the same
#     work (the kernel's part: the chain walk and the stack copy happen in
#     the sampled task's timer interrupt);
#   - the profiler's own CPU time per sample, from the difference of a short
#     and a long run (start-up and writing cancel out);
#   - the bytes of user stack copied per sample and the sample record's size
#     (from the chain's mean length in perf's run);
#   - the stacks that reached a process root, and how far the six use_*
#     functions' inclusive shares are from the target's own measurement.
# Configurations run interleaved, --runs times (default 7). CPU times are the
# least of the runs (other work on the machine only ever adds to them: a
# median there measures the neighbours), the other columns medians; the raw
# runs go to stderr. --write-doc also puts the table in docs/performance.md.
#   bench/fpcost.sh [BUILD_DIR] [--runs N] [--rounds N] [--hz HZ] [--sizes "0 128 ..."] [--write-doc]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
runs=7 rounds=100 hz=10000 write_doc=0 sizes="0 128 512 1024 2048 4096"
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--write-doc) write_doc=1; shift ;;
	-h|--help) bench_help; exit 0 ;;
	*) echo "usage: bench/fpcost.sh [BUILD_DIR] [--runs N] [--rounds N] [--hz HZ] [--sizes LIST] [--write-doc]" >&2; exit 2 ;;
	esac
done
bench_tally "$build"
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-fpcost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -g -fno-omit-frame-pointer -o "$tmp/fpwork" "$here/fpwork.c"

cpu_of() { awk '/^cpu_ms/ { print $2 }' "$1"; }
# the CPU time (ms) of the profiler itself, not its children (the target)
timed() { perf stat -x, -e task-clock --no-inherit -o "$tmp/time" -- "$@"; }
timed_ms() { awk -F, '$3 == "task-clock" || $3 ~ /^task-clock/ { printf "%.1f\n", $1 }' "$tmp/time"; }
# err TRUTH SHARES: the mean distance in points of the use_* shares (NAME PCT
# lines) from the target's truth lines
err() {
	awk 'NR == FNR { if ($1 == "truth") t[$2] = $3; next } { s[$1] = $2 }
	     END { for (n in t) { d = s[n] - t[n]; if (d < 0) d = -d; e += d; k++ } printf "%.1f\n", (k ? e / k : 0) }' "$1" "$2"
}

# run NAME ROUNDS: one recording of ROUNDS rounds of fpwork; appends to
# NAME.ROUNDS: target ms, profiler ms, samples, root %, error
run() {
	local name=$1 n=$2 samples rooted
	local W=("$tmp/fpwork" 0 "$n")
	if [ "$name" = none ]; then
		"${W[@]}" >"$tmp/o"
		echo "$(cpu_of "$tmp/o") 0 0 0 0" >>"$tmp/$name.$n"
		echo "bench: raw none $n: $(tail -n 1 "$tmp/$name.$n")" >&2
		return
	fi
	if [ "$name" = perf ]; then
		timed perf record -q -e cpu-clock -F "$hz" -g -o "$tmp/p.data" -- "${W[@]}" >"$tmp/o" 2>/dev/null
		# samples, and the share whose outermost frame is a process root
		perf script -i "$tmp/p.data" -F ip,sym 2>/dev/null | awk '
			function done() { if (n) { total++; if (last ~ /^(_start|__libc_start_main|__libc_start_call_main)$/) ok++ } n = 0 }
			/^[[:space:]]*$/ { done(); next }
			{ n++; last = $2 }
			END { done(); printf "%d %.1f\n", total, (total ? 100 * ok / total : 0) }' >"$tmp/ns"
		perf report -i "$tmp/p.data" --stdio --children --sort sym -q -g none 2>/dev/null |
			awk '$NF ~ /^use_/ { sub("%", "", $1); print $NF, $1 }' >"$tmp/shares"
	else
		timed "$tally" record -F "$hz" --call-graph "$name" -o "$tmp/t.db" --force -- "${W[@]}" >"$tmp/o" 2>/dev/null
		"$tally" report -i "$tmp/t.db" --children --json >"$tmp/t.json"
		python3 - "$tmp/t.json" "$tmp/ns" >"$tmp/shares" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
u = e["unwind"]
tot = u["samples"]
open(sys.argv[2], "w").write("%d %.1f\n" % (tot, u["rooted_percent"]))
for f in e["functions"]:
    if f["name"].startswith("use_"):
        print(f["name"], "%.2f" % (100.0 * f["inclusive"] / tot if tot else 0))
PY
	fi
	local tgt all
	tgt=$(cpu_of "$tmp/o")
	all=$(timed_ms)
	read -r samples rooted <"$tmp/ns"
	echo "$tgt $all $samples $rooted $(err "$tmp/o" "$tmp/shares")" >>"$tmp/$name.$n"
	echo "bench: raw $name $n: $(tail -n 1 "$tmp/$name.$n")" >&2
	[ "$name" = perf ] && cp "$tmp/p.data" "$tmp/p.keep"
	return 0
}

configs=(perf)
for s in $sizes; do configs+=("fp,$s"); done
for r in $(seq "$runs"); do
	for c in none "${configs[@]}"; do
		run "$c" "$rounds"
		run "$c" $((4 * rounds))
	done
done
# perf's mean chain length (user and kernel entries with their context words)
chain=$(perf script -i "$tmp/p.keep" -F ip 2>/dev/null | awk '/^[[:space:]]*$/ { if (n) { t += n; k++ } n = 0; next } { n++ } END { printf "%.1f", (k ? t / k : 0) }')

col() { awk -v c="$2" '{ print $c }' "$1" | median; }
least() { awk -v c="$2" 'NR == 1 || $c < m { m = $c } END { print m }' "$1"; }
base=$(least "$tmp/none.$((4 * rounds))" 1)
row() {
	local name=$1 label=$2 long=$tmp/$1.$((4 * rounds)) short=$tmp/$1.$rounds
	local t p n r e ps ns
	t=$(least "$long" 1); p=$(least "$long" 2); n=$(col "$long" 3); r=$(col "$long" 4); e=$(col "$long" 5)
	ps=$(least "$short" 2); ns=$(col "$short" 3)
	local size=0
	[ "$name" = perf ] || size=${name#fp,}
	# a sample: header, identifier, ip, tid, time, cpu, period (56 bytes); the
	# chain's count and entries; with a copy, the registers' ABI word and
	# ip, sp, bp, the copy's size word, the copy and its dyn_size word
	awk -v l="$label" -v t="$t" -v b="$base" -v p="$p" -v n="$n" -v ps="$ps" -v ns="$ns" -v r="$r" -v e="$e" -v s="$size" -v c="$chain" 'BEGIN {
		rec = 56 + 8 + 8 * c + (s > 0 ? 32 + 16 + s : 0)
		printf "| %s | %.1f%% | %.2f | %.1f | %d | %.0f | %s%% | %s |\n", l, 100 * (t / b - 1), (n ? 1000 * (t - b) / n : 0),
			((n - ns) > 0 ? 1000 * (p - ps) / (n - ns) : 0), s, rec, r, e }'
}
table=$( {
	echo "| recording ($hz Hz, $(awk -v b="$base" 'BEGIN { printf "%.1f", b / 1000 }') s of fpwork's CPU, least CPU and median of $runs runs) | target slowdown | target µs/sample | profiler µs/sample | stack bytes/sample | record bytes/sample | stacks reaching a root | use_* shares off by (points, mean) |"
	echo "|---|---|---|---|---|---|---|---|"
	row perf "perf record -g"
	for s in $sizes; do row "fp,$s" "tally --call-graph fp,$s"; done
} )
echo "$table"
if [ "$write_doc" = 1 ]; then
	python3 - "$here/../docs/performance.md" "$table" <<'PY'
import sys
doc, table = sys.argv[1], sys.argv[2]
s = open(doc).read()
start, end = s.index("<!-- fpcost -->"), s.index("<!-- /fpcost -->")
open(doc, "w").write(s[:start] + "<!-- fpcost -->\n" + table + "\n" + s[end:])
PY
fi
