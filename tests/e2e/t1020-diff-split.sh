#!/bin/bash
# tally diff of a workload rebuilt with another split: BASE runs work_a,
# work_b, work_c 6:3:1 (and old_work), NEW 2:3:5 (and new_work), each built
# from tests/workloads/split_weights.c into its own directory (a rebuilt
# binary: another build-id, same image and function names). Each function's
# change in points is the change of the workloads' own measured shares
# (within the binomial error of both sides' samples; work_b's, unchanged, is
# near 0); old_work is shown as
# base only and new_work as new only; the functions match by name (one row
# each, no raw offsets); rows are sorted by the size of the change; the text
# says the same; --absolute gives the change in nanoseconds (with --samples, in samples).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"

build_split base -DW_A=6 -DW_B=3 -DW_C=1 -DW_OLD=2
build_split new -DW_A=2 -DW_B=3 -DW_C=5 -DW_NEW=2
id1=$(build_id base/split_w)
id2=$(build_id new/split_w)
[[ -n $id1 && $id1 != "$id2" ]] || skip "cc gives no build-id, or the same one to both builds ($id1, $id2)"
record_split base.db base.truth base 700 -F 4000
record_split new.db new.truth new 700 -F 4000

"$TALLY" diff base.db new.db --json >d.json 2>d.err || fail "tally diff --json failed: $(head -c 1000 d.err)"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' d.json || fail "tally diff --json is not JSON: $(head -c 500 d.json)"

# the images of the two sides are two builds: different ids, one name
python3 - base.db new.db "$id1" "$id2" <<'PY' || fail "the two databases are not of two builds of split_w (above)"
import sys
for db, want in ((sys.argv[1], sys.argv[3]), (sys.argv[2], sys.argv[4])):
    ids = [l.split("\t")[2] for l in open(db + "/images") if "\tsplit_w\t" in l]
    if ids != [want]:
        sys.exit("%s: split_w has ids %s, the binary %s" % (db, ids, want))
PY

# each side's shares of the work functions by samples (the truth's shares are
# of them: the process's other samples, its clock reads, are in neither),
# from the diff in samples: `FUNCTION BASE% BASE_N NEW% NEW_N`
"$TALLY" diff base.db new.db --json --samples >ds.json 2>d.err || fail "tally diff --json --samples failed: $(head -c 1000 d.err)"
python3 - ds.json >work.shares <<'PY' || fail "tally diff --json --samples: $(cat work.shares)"
import json, sys
rows = {r["function"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["image"] == "split_w"}
work = [f for f in ("work_a", "work_b", "work_c", "old_work", "new_work") if f in rows]
nb = sum(rows[f]["base_samples"] for f in work)
nn = sum(rows[f]["new_samples"] for f in work)
for f in work:
    print(f, "%.2f" % (100.0 * rows[f]["base_samples"] / nb), nb, "%.2f" % (100.0 * rows[f]["new_samples"] / nn), nn)
PY
for f in work_a work_b work_c; do
	tb=$(truth "$f" base.truth)
	tn=$(truth "$f" new.truth)
	want=$(awk -v a="$tn" -v b="$tb" 'BEGIN { printf "%.2f", a - b }')
	got=$(diff_row d.json "$f" change_points)
	[[ -n $got ]] || fail "no row for $f in the diff: $(head -c 1500 d.json)"
	[[ $(diff_row d.json "$f" only) == null ]] || fail "$f is on both sides, the diff says only $(diff_row d.json "$f" only)"
	read -r _ pb nb pn nn < <(awk -v f="$f" '$1 == f' work.shares)
	change_near "$(awk -v a="$pn" -v b="$pb" 'BEGIN { printf "%.2f", a - b }')" "$want" "$tb" "$nb" "$tn" "$nn" \
		"change of $f's share of the work functions (base $tb%, new $tn%)"
done

# one-sided functions
[[ $(diff_row d.json old_work only) == base ]] || fail "old_work (only in BASE) is not 'base' only: $(diff_row d.json old_work only)"
[[ $(diff_row d.json new_work only) == new ]] || fail "new_work (only in NEW) is not 'new' only: $(diff_row d.json new_work only)"
[[ $(diff_row d.json old_work new_value) == 0 && $(diff_row d.json new_work base_value) == 0 ]] ||
	fail "a one-sided function has samples on its other side"
read -r _ _ _ pn nn < <(awk '$1 == "new_work"' work.shares)
share_near "$pn" "$nn" "$(truth new_work new.truth)" "new_work's share of NEW's work functions"
read -r _ pb nb _ _ < <(awk '$1 == "old_work"' work.shares)
share_near "$pb" "$nb" "$(truth old_work base.truth)" "old_work's share of BASE's work functions (the change: minus that)"
[[ $(diff_row d.json old_work change_points) == "-$(diff_row d.json old_work base_pct)" ]] ||
	fail "old_work's change is $(diff_row d.json old_work change_points), its base share $(diff_row d.json old_work base_pct)"

# matched by name: one row per function, no raw offsets, sorted by |change|
python3 - d.json <<'PY' || fail "the rows (above)"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
names = [r["function"] for r in rows if r["image"] == "split_w"]
errs = []
for f in ("work_a", "work_b", "work_c", "old_work", "new_work"):
    if names.count(f) != 1:
        errs.append("%s has %d rows" % (f, names.count(f)))
if any(n.startswith("[offset") for n in names):
    errs.append("raw offsets: %s" % [n for n in names if n.startswith("[offset")])
mags = [abs(r["change_points"]) for r in rows]
if mags != sorted(mags, reverse=True):
    errs.append("not sorted by the size of the change: %s" % mags[:10])
for r in rows:
    want = r["new_pct"] - r["base_pct"]
    if abs(r["change_points"] - want) > 0.001:
        errs.append("%s: change %s is not new %s - base %s" % (r["function"], r["change_points"], r["new_pct"], r["base_pct"]))
if d["unit"] != "ns":
    errs.append("the unit is %r, expected ns (period-weighted cpu-clock)" % d.get("unit"))
if d["base"]["value"] != sum(r["base_value"] for r in rows) or d["new"]["value"] != sum(r["new_value"] for r in rows):
    errs.append("the rows do not add up to the totals")
if errs:
    sys.exit("; ".join(errs))
print("ok: one row per function, sorted by |change|, shares add up")
PY

# the text: the same rows, one-sided ones marked
"$TALLY" diff base.db new.db >d.txt 2>d.err || fail "tally diff failed: $(head -c 1000 d.err)"
grep -Eq '^ +- +[0-9.]+% +\+[0-9.]+ +new_work +split_w +\(new only\)$' d.txt || fail "text: new_work is not marked new only: $(cat d.txt)"
grep -Eq '^ +[0-9.]+% +- +-[0-9.]+ +old_work +split_w +\(base only\)$' d.txt || fail "text: old_work is not marked base only: $(cat d.txt)"
a_txt=$(awk '$4 == "work_a" { print $3 }' d.txt)
near "$a_txt" "$(diff_row d.json work_a change_points)" 0.01 "text and JSON agree on work_a"

# --absolute: values (ns), sorted by their change; with --samples, samples
for k in value samples; do
	opt=()
	[[ $k == samples ]] && opt=(--samples)
	"$TALLY" diff base.db new.db --absolute --json "${opt[@]}" >abs.json || fail "tally diff --absolute ${opt[*]} failed"
	python3 - abs.json "$k" <<'PY' || fail "--absolute ${opt[*]} (above)"
import json, sys
d = json.load(open(sys.argv[1]))
k = sys.argv[2]
if d["normalized"]:
    sys.exit("--absolute says normalized")
if d["unit"] != ("ns" if k == "value" else "samples"):
    sys.exit("the unit is %r" % d["unit"])
ch = [abs(r["change_" + k]) for r in d["rows"]]
if ch != sorted(ch, reverse=True):
    sys.exit("not sorted by the change in %s: %s" % (k, ch[:10]))
bad = [r for r in d["rows"] if r["change_" + k] != r["new_" + k] - r["base_" + k]]
if bad:
    sys.exit("change_%s is not new - base: %s" % (k, bad[:2]))
print("ok: --absolute rows are %s, sorted by their change" % k)
PY
done
