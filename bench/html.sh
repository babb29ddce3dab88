#!/usr/bin/env bash
# The HTML report and the SVG flame graph of a large profile: a synthetic
# database of STACKS distinct stacks (tests/e2e/gen-bigdb.py, default one
# million), then the time of `tally report --html` and `tally export --format
# svg`, the sizes of what they write, and the time headless Chromium takes to
# open each (navigation start to the load event, and to the first frame
# painted after it; the median of RUNS loads in one browser).
#   bench/html.sh [BUILD_DIR] [--stacks N] [--runs N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
stacks=1000000 runs=3
while [ $# -gt 0 ]; do
	case "$1" in
	--stacks) stacks=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: bench/html.sh [BUILD_DIR] [--stacks N] [--runs N]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
browser=1
if ! why=$(python3 "$here/../tests/e2e/browser.py" check); then
	echo "bench: $why: page load times left out (scripts/deps.sh --test installs chromium)" >&2
	browser=0
fi
tmp=$(mktemp -d /tmp/tally-htmlbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

t0=$(now)
python3 "$here/../tests/e2e/gen-bigdb.py" "$tmp/big.db" "$stacks" >/dev/null
t1=$(now)
"$tally" report -i "$tmp/big.db" --html "$tmp/big.html"
t2=$(now)
"$tally" export -i "$tmp/big.db" --format svg -o "$tmp/big.svg" 2>/dev/null
t3=$(now)
"$tally" report -i "$tmp/big.db" --children >/dev/null
t4=$(now)
dbsize=$(du -sk "$tmp/big.db" | awk '{ print $1 }')

if ((browser == 0)); then
	printf 'big.html - - -\nbig.svg - - -\n' >"$tmp/load"
else TALLY_SRC="$here/.." python3 - "$tmp" "$runs" "$tmp/big.html" "$tmp/big.svg" >"$tmp/load" <<'EOF'
import os, statistics, sys
sys.path.insert(0, os.path.join(os.environ["TALLY_SRC"], "tests/e2e"))
from browser import Browser
tmp, runs, pages = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
with Browser(tmp) as b:
    for p in pages:
        loads, paints = [], []
        for _ in range(runs):
            b.open("file://" + p)
            loads.append(b.eval("performance.getEntriesByType('navigation')[0].loadEventEnd"))
            paints.append(b.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"))
            n = b.eval("document.querySelectorAll('g.f').length")
        print("%s %.0f %.0f %d" % (os.path.basename(p), statistics.median(loads), statistics.median(paints), n))
EOF
fi

printf '%s distinct stacks, %s samples; database %s KB (generated in %s s)\n' "$stacks" \
	"$(awk '/^samples:/ { print $2 }' "$tmp/big.db/session")" "$dbsize" "$(secs "$t0" "$t1")"
printf '%-34s %10s %10s %12s %12s %8s\n' "output" "tally (s)" "size (KB)" "load (ms)" "painted (ms)" "frames"
while read -r name load paint frames; do
	case $name in
	*.html) t=$(secs "$t1" "$t2") what="report --html" ;;
	*.svg) t=$(secs "$t2" "$t3") what="export --format svg" ;;
	esac
	printf '%-34s %10s %10s %12s %12s %8s\n' "$what" "$t" "$(($(stat -c %s "$tmp/$name") / 1024))" "$load" "$paint" "$frames"
done <"$tmp/load"
printf '(for scale: report --children on the same database takes %s s)\n' "$(secs "$t3" "$t4")"
