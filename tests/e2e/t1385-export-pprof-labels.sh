#!/bin/bash
# pprof samples carry the database's label sets as pprof labels: the command
# name every recording keeps (comm=), and a merge's host= and run=, so that
# `go tool pprof -tags` splits the time by them and -tagfocus keeps one; the
# shares are those `tally report --sort` gives for the same keys.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

need_tool go golang-go
tally_ok record -o a.db -- sh -c "'$WORKLOADS/split_funcs' 300; '$WORKLOADS/split_images' 300"
tally_ok record -o b.db -- "$WORKLOADS/split_funcs" 300
tally_ok merge -o m.db a.db b.db
tally_ok export -i m.db --format pprof -o m.pb.gz
gopprof_ok tags.txt -tags m.pb.gz
for want in "comm" "split_funcs" "split_images" "host" "run" "a.db" "b.db"; do
	grep -q "$want" tags.txt || fail "go tool pprof -tags has no '$want': $(head -30 tags.txt)"
done

# tag_pct KEY VALUE: VALUE's share under KEY in -tags
tag_pct() {
	awk -v k="$1:" -v v="$2" '$1 == k { on = 1; next } /^ *[a-z]+: Total/ { on = 0 } on && $NF == v { gsub(/[()%:]/, "", $2); print $2; exit }' tags.txt
}
# tally's own shares by the same keys: report --sort comm, report --by-label run
tally_ok report -i m.db --sort comm --json
cp out comm.json
tally_ok report -i m.db --by-label run --json
cp out run.json
python3 - comm.json run.json >tally-pct.txt <<'PY' || fail "cannot read tally's JSON reports"
import json, sys
c = json.load(open(sys.argv[1]))
for r in c["rows"]:
    print("comm", r["comm"], r["percent"])
g = json.load(open(sys.argv[2]))["groups"]
tot = sum(x["report"]["events"][0]["value"] for x in g)
for x in g:
    print("run", x["value"], round(100.0 * x["report"]["events"][0]["value"] / tot, 2))
PY
for x in "comm split_funcs" "comm split_images" "run a.db" "run b.db"; do
	set -- $x
	pp=$(tag_pct "$1" "$2")
	tp=$(awk -v k="$1" -v v="$2" '$1 == k && $2 == v { print $3; exit }' tally-pct.txt)
	[[ -n $pp ]] || fail "go tool pprof -tags: no share for $1=$2: $(head -30 tags.txt)"
	[[ -n $tp ]] || fail "tally's reports: no share for $1=$2: $(cat tally-pct.txt)"
	near "$pp" "$tp" 0.1 "$1=$2: pprof's share against tally's"
done

# -tagfocus keeps one run: its total is that run's own
gopprof_ok focus.txt -tagfocus run=b.db -top m.pb.gz
tally_ok export -i b.db --format pprof -o b.pb.gz
gopprof_ok b.txt -top b.pb.gz
# "Showing nodes accounting for X, P% of T total": X is what the filters keep
kept() { awk '/^Showing nodes accounting for/ { v = $5; sub(/,$/, "", v); print v; exit }' "$1"; }
ft=$(kept focus.txt)
bt=$(kept b.txt)
[[ -n $ft && $ft == "$bt" ]] || fail "-tagfocus run=b.db shows a total of '$ft', b.db alone '$bt': $(head -5 focus.txt) / $(head -5 b.txt)"
note "-tagfocus run=b.db: $ft, as b.db alone"
