#!/bin/bash
# tally diff refuses what it cannot compare, each with one line on stderr:
# not two databases (usage, status 2), two views or two outputs at once, -o
# without --format, an unknown format, a binary format to stdout, a missing
# database, two databases with no event in common, an --event one side
# lacks, a selection that leaves one side empty; flame graphs and folded
# stacks without call stacks.
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/split_funcs
tally_ok record -F 999 -o a.db -- "$W" 200
tally_ok record -F 999 -e page-faults -o pf.db -- "$WORKLOADS/touchmem" 20

usage() {
	expect_fail_with "$@"
	((LAST_RC == 2)) || fail "'${*:2}' exited $LAST_RC, expected 2 (usage)"
}
usage "^tally: give two databases: BASE and NEW \(see 'tally diff --help'\)$" "$TALLY" diff a.db
usage "^tally: unexpected argument 'x' \(see 'tally diff --help'\)$" "$TALLY" diff a.db a.db x
usage "^tally: give one of --symbols, --lines, --children" "$TALLY" diff a.db a.db --lines --children
usage "^tally: give one of --json, --html, --format" "$TALLY" diff a.db a.db --json --html x.html
usage "^tally: -o is where --format writes" "$TALLY" diff a.db a.db -o x
usage "^tally: the pprof format goes to files" "$TALLY" diff a.db a.db --format pprof -o -
expect_fail_with "^tally: unknown diff format 'gif' \(known formats: pprof, folded, svg\)$" "$TALLY" diff a.db a.db --format gif
expect_fail_with "^tally: no database at 'nope\.db'" "$TALLY" diff a.db nope.db
expect_fail_with "^tally: 'a\.db' \(cpu-clock\) and 'pf\.db' \(page-faults\) have no event in common: nothing to compare$" \
	"$TALLY" diff a.db pf.db
expect_fail_with "^tally: event 'page-faults' is not in 'a\.db' \(it has: cpu-clock\)$" "$TALLY" diff a.db pf.db --event page-faults
expect_fail_with "^tally: nothing to compare: 'a\.db' has no 'cpu-clock' samples in the selection$" \
	"$TALLY" diff a.db a.db --image no-such-image
expect_fail_with "^tally: 'a\.db' has no call stacks, which a flame graph or folded stacks needs \(record both with -g or --call-graph\)$" \
	"$TALLY" diff a.db a.db --format svg
expect_fail_with "^tally: --label host: 'a\.db' has no label 'host' \(its labels: comm\)$" \
	"$TALLY" diff a.db a.db --label host=x
[[ ! -e diff.svg && ! -e diff.pb.gz ]] || fail "a refused diff left a file: $(ls)"

# a diff of a database with itself: every change is 0
"$TALLY" diff a.db a.db --json >same.json || fail "tally diff a.db a.db failed"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
bad = [r for r in d["rows"] if r["change_points"] != 0 or r["only"]]
sys.exit("changes in a diff with itself: %s" % bad[:3] if bad or not d["rows"] else 0)' same.json || fail "a.db against itself (above)"
note "a database against itself: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' same.json) rows, no change"
