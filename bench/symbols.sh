#!/usr/bin/env bash
# Source lines side by side: `tally report --lines` against
# `perf report --sort srcline`, each on its own recording of the same -g
# workload (tests/workloads/inline_chain.c: a hot loop with two inlined
# helpers, built -O2 -g), recorded at the same rate for the same time.
# Prints one table (docs/performance.md, "Source lines").
#   bench/symbols.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--runs N]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
ms=15000 hz=20000 runs=3
while [ $# -gt 0 ]; do
	case "$1" in
	--ms) ms=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: bench/symbols.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--runs N]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-symbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -g -fno-omit-frame-pointer -I"$here/../tests/workloads" -o "$tmp/w" "$here/../tests/workloads/inline_chain.c"

now() { date +%s.%N; }

"$tally" record -g -F "$hz" -o "$tmp/t.db" -- "$tmp/w" "$ms" > /dev/null 2> "$tmp/t.err"
perf record -q -g -F "$hz" -o "$tmp/p.data" -- "$tmp/w" "$ms" > /dev/null 2> "$tmp/p.err"
tsamples=$(awk '/^samples:/ { print $2 }' "$tmp/t.db/session")
psamples=$(perf script -i "$tmp/p.data" -F comm 2>/dev/null | wc -l)
: > "$tmp/trep"; : > "$tmp/prep"
for r in $(seq "$runs"); do
	t0=$(now); "$tally" report -i "$tmp/t.db" --lines > "$tmp/t.rep"; t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$tmp/trep"
	t0=$(now); perf report -i "$tmp/p.data" --sort srcline --stdio > "$tmp/p.rep" 2>/dev/null; t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >> "$tmp/prep"
done
trep=$(median < "$tmp/trep"); prep=$(median < "$tmp/prep")
# both must agree on where the time went: the top line of each report
ttop=$(awk '/inline_chain.c:[0-9]+/ { for (i = 1; i <= NF; i++) if ($i ~ /inline_chain.c:/) { print $i; exit } }' "$tmp/t.rep")
ptop=$(awk '!/^#/ && /inline_chain.c:[0-9]+/ { for (i = 1; i <= NF; i++) if ($i ~ /inline_chain.c:/) { print $i; exit } }' "$tmp/p.rep")
cat <<T
| measurement (-g, $hz Hz, ~$(awk -v m="$ms" 'BEGIN { printf "%.1f", m / 1000 }') s of inline_chain, report median of $runs) | tally report --lines | perf report --sort srcline | perf/tally | goal | result |
|---|---|---|---|---|---|
| samples in the recording | $tsamples | $psamples | | — | info |
| report wall time | $(awk -v a="$trep" 'BEGIN { printf "%.1f ms", a * 1000 }') | $(awk -v a="$prep" 'BEGIN { printf "%.0f ms", a * 1000 }') | $(awk -v a="$trep" -v b="$prep" 'BEGIN { printf "%.0fx", b / a }') | ≥ 20x faster | $(awk -v a="$trep" -v b="$prep" 'BEGIN { print (b / a >= 20) ? "PASS" : "MISS" }') |
| top source line | $ttop | $ptop | | the same | $([ "$ttop" = "$ptop" ] && echo PASS || echo MISS) |
T
