#!/bin/bash
# The developer's loop: record a program, rebuild it in place with one
# function made 3x slower, record again, compare. The base's binary is gone
# from its path (another build is there), and its names come from the copy
# tally record kept in the build-id cache: diff names the functions on both
# sides (no raw offsets, no "new only" rows), work_a's growth is the one the
# workloads measured within the binomial error of the sample counts, and
# --fail-above passes or fails on it. The cache lists both builds.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"
use_cache

build_split app -DW_A=3 -DW_B=3 -DW_C=2
base_id=$(build_id app/split_w)
[[ -n $base_id ]] || skip "cc gives no GNU build-id here"
record_split before.db before.truth app 1500 -F 2000
# rebuilt in place, right away: the copy is of the file that ran
build_split app -DW_A=9 -DW_B=3 -DW_C=2
new_id=$(build_id app/split_w)
[[ $new_id != "$base_id" ]] || fail "test setup: the rebuilt program has the same build-id $base_id"
record_split after.db after.truth app 1500 -F 2000
wait_cached "$base_id"
wait_cached "$new_id"

"$TALLY" diff before.db after.db --samples --image split_w --json >d.json 2>d.err || fail "tally diff failed: $(cat d.err)"
grep -q "not the file that was recorded (build-id $base_id): named from its copy in the build-id cache" d.err ||
	fail "diff does not say the base's binary was named from the build-id cache: $(cat d.err)"
python3 - d.json <<'PY' || fail "the diff does not name split_w's functions on both sides: $(cat d.json)"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["rows"] if r["image"] == "split_w"]
bad = [r["function"] for r in rows if r["function"].startswith("[")]
if bad:
    sys.exit("raw offsets or unknown code: %s" % bad)
for f in ("work_a", "work_b", "work_c"):
    r = [x for x in rows if x["function"] == f]
    if not r or r[0]["only"] is not None:
        sys.exit("%s is not a row of both sides: %s" % (f, r))
PY

# the growth the workloads measured, within the binomial error of the counts
change=$(diff_row d.json work_a change_points)
bp=$(diff_row d.json work_a base_pct)
np=$(diff_row d.json work_a new_pct)
n1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["base"]["samples"])' d.json)
n2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["new"]["samples"])' d.json)
want=$(awk -v a="$(truth work_a after.truth)" -v b="$(truth work_a before.truth)" 'BEGIN { printf "%.2f", a - b }')
tol=$(awk -v p="$bp" -v q="$np" -v n="$n1" -v m="$n2" \
	'BEGIN { p /= 100; q /= 100; printf "%.2f", 400 * sqrt(p * (1 - p) / n + q * (1 - q) / m) + 1 }')
near "$change" "$want" "$tol" "work_a's growth ($bp% -> $np% of $n1 and $n2 samples)"
fcmp "$want" ">" 15 || fail "test setup: work_a grew by only $want points by the workloads' own measure"
note "work_a: $bp% -> $np% ($change points; the workloads: $want, within $tol)"

# the gate judges the named rows: above the growth it passes, below it fails naming work_a
rc=0
"$TALLY" diff before.db after.db --fail-above 5 >/dev/null 2>gate.err || rc=$?
((rc == 3)) && grep -q "'work_a' in 'split_w' +" gate.err ||
	fail "--fail-above 5: exit $rc, expected 3 naming work_a: $(cat gate.err)"
above=$(awk -v c="$change" 'BEGIN { printf "%.2f", c + 3 }')
rc=0
"$TALLY" diff before.db after.db --samples --image split_w --fail-above "$above" >/dev/null 2>gate.err || rc=$?
((rc == 0)) || fail "--fail-above $above (over the growth $change): exit $rc: $(cat gate.err)"

tally_ok cache list
for id in "$base_id" "$new_id"; do
	grep -Eq " $id  $TMP/app/split_w$" "$TMP/out" || fail "'tally cache list' does not list $id at $TMP/app/split_w: $(cat "$TMP/out")"
done
