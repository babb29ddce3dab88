#!/bin/bash
# tally diff --lines and --children on two builds of split_weights (6:3:1,
# then 2:3:5), recorded with call graphs: --lines rows are source lines of
# the work functions whose changes add up to each function's change in the
# default view; --children gives inclusive shares: work_c grows as measured,
# main (on every stack of both sides) does not change; --top keeps the first
# rows; --children on a database without stacks is refused.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"

build_split base -DW_A=6 -DW_B=3 -DW_C=1
build_split new -DW_A=2 -DW_B=3 -DW_C=5
record_split base.db base.truth base 600 -g -F 4000
record_split new.db new.truth new 600 -g -F 4000

"$TALLY" diff base.db new.db --json >f.json || fail "tally diff --json failed"
"$TALLY" diff base.db new.db --lines --json >l.json || fail "tally diff --lines --json failed"
python3 - f.json l.json <<'PY' || fail "--lines (above)"
import json, os, sys
f = {r["function"]: r for r in json.load(open(sys.argv[1]))["rows"]}
d = json.load(open(sys.argv[2]))
if d["view"] != "lines":
    sys.exit("view is %s" % d["view"])
errs = []
for fn in ("work_a", "work_b", "work_c"):
    rows = [r for r in d["rows"] if r["function"] == fn]
    if not rows or any(not r["file"] or os.path.basename(r["file"]) != "split_weights.c" or r["line"] <= 0 for r in rows):
        errs.append("%s: rows without split_weights.c:LINE: %s" % (fn, rows[:3]))
        continue
    s = sum(r["change_points"] for r in rows)
    if abs(s - f[fn]["change_points"]) > 0.01:
        errs.append("%s: its lines change by %.4f, the function by %.4f" % (fn, s, f[fn]["change_points"]))
    else:
        print("ok: %s: %d line(s), changes adding up to %.2f" % (fn, len(rows), s))
if errs:
    sys.exit("; ".join(errs))
PY

"$TALLY" diff base.db new.db --children --json >c.json || fail "tally diff --children failed"
[[ $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["view"])' c.json) == children ]] || fail "--children: wrong view"
# the process's root (__libc_start_call_main here) is on every stack of both sides
read -r root rootpct rootch < <(python3 -c '
import json, sys
r = max(json.load(open(sys.argv[1]))["rows"], key=lambda r: (r["new_pct"], r["base_pct"]))
print(r["function"], r["new_pct"], r["change_points"])' c.json)
between "$rootpct" 95 100.01 || fail "--children: the widest function, $root, has $rootpct% of NEW, expected nearly all"
near "$rootch" 0 1 "the inclusive change of $root (on every stack)"
# work_c's inclusive change is the change of its measured share: the truth
# is its share of the work functions, and those are a part of each side's
# samples (the process's clock reads are the rest): by that part, from the
# diff in samples
"$TALLY" diff base.db new.db --json --samples >ds.json || fail "tally diff --json --samples failed"
read -r wb nb wn nn < <(python3 - ds.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["function"]: r for r in d["rows"] if r["image"] == "split_w"}
work = ("work_a", "work_b", "work_c")
for side in ("base", "new"):
    print("%.6f" % (sum(rows[f][side + "_samples"] for f in work) / d[side]["samples"]), d[side]["samples"], end=" ")
print()
PY
)
tb=$(awk -v t="$(truth work_c base.truth)" -v w="$wb" 'BEGIN { printf "%.2f", t * w }')
tn=$(awk -v t="$(truth work_c new.truth)" -v w="$wn" 'BEGIN { printf "%.2f", t * w }')
change_near "$(diff_row c.json work_c change_points)" "$(awk -v a="$tn" -v b="$tb" 'BEGIN { printf "%.2f", a - b }')" \
	"$tb" "$nb" "$tn" "$nn" "work_c's inclusive change (its measured share, of the work functions' $wb and $wn of the samples)"

"$TALLY" diff base.db new.db --top 2 >top.txt || fail "tally diff --top 2 failed"
n=$(grep -cE '^ +[0-9.-]+%? ' top.txt || true)
((n == 2)) || fail "--top 2 printed $n rows: $(cat top.txt)"
grep -q "more rows" top.txt || fail "--top 2 does not say that rows were left out: $(cat top.txt)"

tally_ok record -F 999 -o flat.db -- base/split_w 200
expect_fail_with "^tally: 'flat\.db' has no call stacks, which --children needs" "$TALLY" diff flat.db new.db --children
