#!/bin/bash
# record a process tree (forker): each forked child's and the grandchild's
# function shows with its measured share, and the exec'd split_funcs shows
# with its own work_a/b/c split and its share of the whole.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 4000 -o db -- "$WORKLOADS/forker" 3 200 200
cp out truth.txt

report_json sym.json -i db --symbols
check_split func sym.json truth.txt child_fn_0 child_fn_1 child_fn_2 grandchild_fn
for f in child_fn_0 child_fn_1 child_fn_2 grandchild_fn; do
	n=$(tjson sym.json func "$f" forker)
	((n > 0)) || fail "function $f has no samples in image forker"
done

# the exec'd program: its own functions, in its own image
for f in work_a work_b work_c; do
	n=$(tjson sym.json func "$f" split_funcs)
	((n > 0)) || fail "exec'd split_funcs: function $f has no samples in image split_funcs"
done
check_split func sym.json truth.txt work_a work_b work_c

# the exec'd process's share of (forked functions + exec'd process)
report_json img.json -i db
ex=$(tjson img.json image split_funcs)
kids=0
for f in child_fn_0 child_fn_1 child_fn_2 grandchild_fn; do
	n=$(tjson sym.json func "$f")
	kids=$((kids + n))
done
pct=$(awk -v e="$ex" -v k="$kids" 'BEGIN { printf "%.2f", 100 * e / (e + k) }')
t=$(truth exec_split_funcs truth.txt)
share_near "$pct" $((ex + kids)) "$t" "exec'd split_funcs image share ($ex samples vs $kids in the forked functions)"
