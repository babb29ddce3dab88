#!/usr/bin/env bash
# Call graphs side by side: `tally record --call-graph dwarf` against
# `perf record --call-graph dwarf` + `perf report`, on one target built without
# frame pointers (bench/cgwork.c), in one run. Prints one table; with --write-doc
# also rewrites the call-graph section of docs/performance.md.
#   bench/callgraph.sh [BUILD_DIR] [--runs N] [--write-doc]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
runs=3 write_doc=0
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--write-doc) write_doc=1; shift ;;
	*) echo "usage: bench/callgraph.sh [BUILD_DIR] [--runs N] [--write-doc]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-cgbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -g -fomit-frame-pointer -o "$tmp/cgwork" "$here/cgwork.c"
steps=250   # about 3 s of CPU unprofiled, as the issue's perf figure

cpu_of() { awk '/^cpu_ms/ { print $2 }' "$1"; }
now() { date +%s.%N; }

: > "$tmp/base" ; : > "$tmp/tcpu" ; : > "$tmp/pcpu" ; : > "$tmp/trep" ; : > "$tmp/prep"
for r in $(seq "$runs"); do
	"$tmp/cgwork" $steps > "$tmp/o"; cpu_of "$tmp/o" >> "$tmp/base"
	"$tally" record --call-graph dwarf -F 999 -o "$tmp/t.db" --force -- "$tmp/cgwork" $steps > "$tmp/o" 2> "$tmp/t.err"
	cpu_of "$tmp/o" >> "$tmp/tcpu"
	t0=$(now); "$tally" report -i "$tmp/t.db" --children > "$tmp/t.rep"; t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$tmp/trep"
	perf record -q --call-graph dwarf -F 999 -o "$tmp/p.data" -- "$tmp/cgwork" $steps > "$tmp/o" 2> "$tmp/p.err"
	cpu_of "$tmp/o" >> "$tmp/pcpu"
	t0=$(now); perf report -i "$tmp/p.data" --children --stdio > "$tmp/p.rep" 2>/dev/null; t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$tmp/prep"
done
base=$(median < "$tmp/base"); tcpu=$(median < "$tmp/tcpu"); pcpu=$(median < "$tmp/pcpu")
trep=$(median < "$tmp/trep"); prep=$(median < "$tmp/prep")
tbytes=$(du -sb "$tmp/t.db" | cut -f1); pbytes=$(stat -c %s "$tmp/p.data")
# unwind completeness, one definition for both: the outermost frame of a sample's
# user stack is a process root (_start, __libc_start_main, __libc_start_call_main)
trooted=$(awk '/^unwind:/ { sub("%", "", $2); print $2 }' "$tmp/t.rep")
prooted=$(perf script -i "$tmp/p.data" -F ip,sym 2>/dev/null | awk '
	/^[[:space:]]*$/ { if (n) { total++; if (last ~ /^(_start|__libc_start_main|__libc_start_call_main)$/) ok++ } n = 0; next }
	{ n++; last = $2 }
	END { if (n) { total++; if (last ~ /^(_start|__libc_start_main|__libc_start_call_main)$/) ok++ } printf "%.2f", total ? 100 * ok / total : 0 }')
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", 100 * (a / b - 1) }'; }
table=$(cat <<T
| measurement (--call-graph dwarf, 999 Hz, ~$(awk -v b="$base" 'BEGIN { printf "%.1f", b / 1000 }') s target without frame pointers, median of $runs) | tally | perf | tally/perf | goal | result |
|---|---|---|---|---|---|
| bytes on disk | $tbytes B | $pbytes B | $(awk -v a="$tbytes" -v b="$pbytes" 'BEGIN { printf "%.0fx smaller", b / a }') | ≥ 100x smaller | $(awk -v a="$tbytes" -v b="$pbytes" 'BEGIN { print (b / a >= 100) ? "PASS" : "MISS" }') |
| target slowdown (its own CPU time) | $(pct "$tcpu" "$base") | $(pct "$pcpu" "$base") | | ≤ perf's | $(awk -v t="$tcpu" -v p="$pcpu" -v b="$base" 'BEGIN { print (t <= p * 1.01) ? "PASS" : "MISS" }') |
| end of recording to finished report | $(awk -v a="$trep" 'BEGIN { printf "%.1f ms", a * 1000 }') | $(awk -v a="$prep" 'BEGIN { printf "%.0f ms", a * 1000 }') | $(awk -v a="$trep" -v b="$prep" 'BEGIN { printf "1/%.0f", b / a }') | ≥ 10x faster | $(awk -v a="$trep" -v b="$prep" 'BEGIN { print (b / a >= 10) ? "PASS" : "MISS" }') |
| samples whose stack reached a process root | $trooted% | $prooted% | | no worse | $(awk -v a="$trooted" -v b="$prooted" 'BEGIN { print (a + 0.5 >= b) ? "PASS" : "MISS" }') |
T
)
echo "$table"
echo "(slowdown within 1% of perf's counts as level: the run-to-run noise here is about that)"
if [ "$write_doc" = 1 ]; then
	doc="$here/../docs/performance.md"
	stamp="Measured $(date -u +%Y-%m-%dT%H:%MZ) with \`bench/callgraph.sh\` (tally $(git -C "$here" rev-parse --short HEAD))."
	python3 - "$doc" "$stamp" "$table" <<'PY'
import sys
doc, stamp, table = sys.argv[1:]
s = open(doc).read()
b, e = "<!-- callgraph-results:begin -->", "<!-- callgraph-results:end -->"
block = b + "\n" + stamp + "\n\n" + table + "\n" + e
if b in s:
    s = s[:s.index(b)] + block + s[s.index(e) + len(e):]
else:
    s = s.replace("## How to reproduce", "## Call graphs: --call-graph dwarf\n\n`bench/callgraph.sh` (run by `make bench` after the table above) records one\ntarget built without frame pointers (bench/cgwork.c: a call tree, half of it under\nlibc's qsort) with `--call-graph dwarf` at 999 Hz under each profiler. perf copies\n8 KiB of stack per sample into perf.data and unwinds at report time; tally unwinds\nwhile recording and stores aggregated stacks. \"Reached a process root\" uses one\ndefinition for both: the outermost frame is `_start` or `__libc_start_main`/\n`__libc_start_call_main` (for perf, from `perf script`).\n\n" + block + "\n\n## How to reproduce", 1)
open(doc, "w").write(s)
PY
fi
