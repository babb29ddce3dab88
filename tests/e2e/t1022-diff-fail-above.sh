#!/bin/bash
# tally diff --fail-above PCT: exit status 3 when a function's share grew by
# more than PCT points, with one line on stderr naming it (and the others);
# status 0 under the threshold (the diff is printed either way); with --lines
# the rows are lines; a bad PCT is a usage error (status 2).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"

build_split base -DW_A=6 -DW_B=3 -DW_C=1
build_split new -DW_A=2 -DW_B=3 -DW_C=5 -DW_NEW=3
record_split base.db base.truth base 400 -F 2000
record_split new.db new.truth new 400 -F 2000
"$TALLY" diff base.db new.db --json >d.json || fail "tally diff failed"
grow_c=$(diff_row d.json work_c change_points)
grow_n=$(diff_row d.json new_work change_points)
fcmp "$grow_c" ">" 15 || fail "test setup: work_c grew by only $grow_c points"
fcmp "$grow_n" ">" 10 || fail "test setup: new_work grew by only $grow_n points"

rc=0
"$TALLY" diff base.db new.db --fail-above 5 >out.txt 2>err.txt || rc=$?
((rc == 3)) || fail "--fail-above 5: exit status $rc, expected 3; stderr: $(cat err.txt)"
[[ $(wc -l <err.txt) == 1 ]] || fail "--fail-above 5: expected one line on stderr: $(cat err.txt)"
grep -Eq "^tally: 2 functions grew by more than 5 points \(--fail-above\): 'work_c' in 'split_w' \+[0-9.]+, 'new_work' in 'split_w' \+[0-9.]+$|^tally: 2 functions grew by more than 5 points \(--fail-above\): 'new_work' in 'split_w' \+[0-9.]+, 'work_c' in 'split_w' \+[0-9.]+$" err.txt ||
	fail "--fail-above 5: stderr does not name work_c and new_work: $(cat err.txt)"
grep -q work_a out.txt || fail "--fail-above: the diff was not printed: $(head -c 500 out.txt)"
note "--fail-above 5: status 3, $(cat err.txt)"

# just above the larger growth: only that one, and at the top: nothing
top=$(awk -v a="$grow_c" -v b="$grow_n" 'BEGIN { print (a > b ? a : b) }')
low=$(awk -v a="$grow_c" -v b="$grow_n" 'BEGIN { print (a < b ? a : b) }')
mid=$(awk -v a="$top" -v b="$low" 'BEGIN { printf "%.2f", (a + b) / 2 }')
if fcmp "$top" ">" "$(awk -v l="$low" 'BEGIN { print l + 1 }')"; then
	rc=0
	"$TALLY" diff base.db new.db --fail-above "$mid" >/dev/null 2>err.txt || rc=$?
	# the threshold as tally prints it (25.80 may read 25.8)
	said=$(sed -nE 's/^tally: 1 function grew by more than ([0-9.]+) points \(--fail-above\): .*/\1/p' err.txt)
	((rc == 3)) && [[ -n $said ]] && fcmp "$said" "==" "$mid" ||
		fail "--fail-above $mid (between $low and $top): status $rc: $(cat err.txt)"
fi
above=$(awk -v t="$top" 'BEGIN { printf "%.2f", t + 0.5 }')
"$TALLY" diff base.db new.db --fail-above "$above" >/dev/null 2>err.txt || fail "--fail-above $above (over the largest growth $top) failed: $(cat err.txt)"
[[ ! -s err.txt ]] || fail "--fail-above $above wrote on stderr: $(cat err.txt)"
note "--fail-above $above: status 0"

rc=0
"$TALLY" diff base.db new.db --lines --fail-above 5 --json >/dev/null 2>err.txt || rc=$?
((rc == 3)) && grep -Eq "^tally: [0-9]+ lines? grew by more than 5 points \(--fail-above\): '(work_c|new_work)' in 'split_w' at split_weights\.c:[0-9]+ " err.txt ||
	fail "--lines --fail-above 5: status $rc: $(cat err.txt)"

expect_fail_with "invalid --fail-above 'x'" "$TALLY" diff base.db new.db --fail-above x
((LAST_RC == 2)) || fail "a bad --fail-above exited $LAST_RC, expected 2"
expect_fail_with "invalid --fail-above '101'" "$TALLY" diff base.db new.db --fail-above 101
