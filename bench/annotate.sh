#!/usr/bin/env bash
# tally annotate next to perf annotate: one function (hot_function of
# tests/workloads/annot.c, built -O2 -g here) recorded once by each profiler at
# the same rate for the same time, then annotated from that recording, text to a
# file: `tally annotate` (source view), `tally annotate --asm`, and
# `perf annotate --stdio` (perf's default view: the disassembly with source
# interleaved, by objdump). Prints one table; with --write-doc also rewrites the
# annotate section of docs/performance.md (between its markers).
#   bench/annotate.sh [BUILD_DIR] [--runs N] [--seconds S] [--write-doc]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
runs=5 secs=3 write_doc=0
while [ $# -gt 0 ]; do
	case "$1" in
	--runs) runs=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--write-doc) write_doc=1; shift ;;
	*) echo "usage: bench/annotate.sh [BUILD_DIR] [--runs N] [--seconds S] [--write-doc]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
command -v objdump >/dev/null || { echo "bench: perf annotate needs objdump (binutils)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-annbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -g -fno-omit-frame-pointer -I "$here/../tests/workloads" -o "$tmp/annot" "$here/../tests/workloads/annot.c"
ms=$((secs * 1000))

"$tally" record -F 999 -o "$tmp/t.db" -- "$tmp/annot" "$ms" > /dev/null 2> "$tmp/t.err"
perf record -q -F 999 -o "$tmp/p.data" -- "$tmp/annot" "$ms" > /dev/null 2> "$tmp/p.err"

now() { date +%s.%N; }
# timed NAME CMD...: wall time of CMD (output to $tmp/NAME.out) appended to $tmp/NAME
timed() {
	local name=$1 t0 t1
	shift
	t0=$(now); "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"; t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$tmp/$name"
}
: > "$tmp/tsrc"; : > "$tmp/tasm"; : > "$tmp/perf"
for r in $(seq "$runs"); do
	timed tsrc "$tally" annotate -i "$tmp/t.db" hot_function
	timed tasm "$tally" annotate -i "$tmp/t.db" hot_function --asm
	timed perf perf annotate --stdio -i "$tmp/p.data" hot_function
done
grep -q 'HOT' "$tmp/tsrc.out" || { echo "bench: tally annotate showed no source: $(head -5 "$tmp/tsrc.out")" >&2; exit 1; }
grep -q 'hot_function' "$tmp/perf.out" || { echo "bench: perf annotate showed nothing: $(head -5 "$tmp/perf.err")" >&2; exit 1; }
tsrc=$(median < "$tmp/tsrc"); tasm=$(median < "$tmp/tasm"); pa=$(median < "$tmp/perf")
tsamp=$(awk '/^# cpu-clock:/ { print $3; exit }' "$tmp/tsrc.out")
psamp=$(perf report --stdio -i "$tmp/p.data" --sort sym 2>/dev/null | awk '/hot_function/ { n++ } END { print n ? "yes" : "no" }')
ms_of() { awk -v a="$1" 'BEGIN { printf "%.1f ms", a * 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0fx faster", b / a }'; }
verdict() { awk -v a="$1" -v b="$2" 'BEGIN { print (a < b) ? "PASS" : "MISS" }'; }
table=$(cat <<T
| annotate hot_function (${secs} s at 999 Hz, $tsamp samples; median of $runs) | tally | perf annotate --stdio | tally vs perf | goal | result |
|---|---|---|---|---|---|
| source view (\`tally annotate\`) | $(ms_of "$tsrc") | $(ms_of "$pa") | $(ratio "$tsrc" "$pa") | faster | $(verdict "$tsrc" "$pa") |
| with disassembly (\`tally annotate --asm\`) | $(ms_of "$tasm") | $(ms_of "$pa") | $(ratio "$tasm" "$pa") | faster | $(verdict "$tasm" "$pa") |
T
)
echo "$table"
[ "$psamp" = yes ] || echo "(perf's report does not show hot_function: check $tmp/p.err)"
if [ "$write_doc" = 1 ]; then
	doc="$here/../docs/performance.md"
	stamp="Measured $(date -u +%Y-%m-%dT%H:%MZ) with \`bench/annotate.sh\` (tally $(git -C "$here" rev-parse --short HEAD))."
	python3 - "$doc" "$stamp" "$table" <<'PY'
import sys
doc, stamp, table = sys.argv[1:]
s = open(doc).read()
b, e = "<!-- annotate-results:begin -->", "<!-- annotate-results:end -->"
block = b + "\n" + stamp + "\n\n" + table + "\n" + e
s = s[:s.index(b)] + block + s[s.index(e) + len(e):]
open(doc, "w").write(s)
PY
fi
