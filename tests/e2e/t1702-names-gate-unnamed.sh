#!/bin/bash
# A gate never passes or fails on a side it could not name: with the
# build-id cache off, a program rebuilt in place leaves the base's rows raw
# offsets, and diff --fail-above exits 2 with one line naming the side, the
# image and the fixes (the diff itself still prints, and without
# --fail-above it exits 0). The same when it is the new side whose program
# is gone (the base read from its archive). The base archived before the rebuild is judged (exit 3, work_a
# named), as the error advises.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
export TALLY_BUILDID_CACHE=off

build_split app -DW_A=3 -DW_B=3 -DW_C=2
record_split before.db before.truth app 600 -F 2000
tally_ok archive -i before.db -o before.tar
build_split app -DW_A=9 -DW_B=3 -DW_C=2
record_split after.db after.truth app 600 -F 2000

base_unnamed() {
	expect_fail_with "^tally: --fail-above cannot judge 'before\.db': [0-9.]+% of its samples are in image 'split_w', whose code it cannot name \('$TMP/app/split_w' is another build than the one recorded, build-id [0-9a-f]+, and no copy of that was found\): record with the build-id cache on \('tally cache'\), or 'tally archive' the base before rebuilding, or give the file with --image-path$" \
		"$TALLY" diff before.db after.db --fail-above 5
	((LAST_RC == 2)) || fail "--fail-above on an unnamed base exited $LAST_RC, expected 2"
	grep -q "work_b" "$TMP/fail.out" || fail "the diff was not printed: $(head -c 500 "$TMP/fail.out")"
	# a threshold nothing can pass either: the answer is not 'passed'
	expect_fail_with "cannot judge 'before\.db'" "$TALLY" diff before.db after.db --fail-above 100
	((LAST_RC == 2)) || fail "--fail-above 100 on an unnamed base exited $LAST_RC, expected 2"
	"$TALLY" diff before.db after.db >/dev/null 2>plain.err || fail "diff without --fail-above failed: $(cat plain.err)"
}

new_unnamed() {
	mv app/split_w app/split_w.moved
	at_exit "mv '$TMP/app/split_w.moved' '$TMP/app/split_w'"
	expect_fail_with "^tally: --fail-above cannot judge 'after\.db': [0-9.]+% of its samples are in image 'split_w', whose code it cannot name \('$TMP/app/split_w' is gone, and no copy of it was found\)" \
		"$TALLY" diff before.tar after.db --fail-above 5
	((LAST_RC == 2)) || fail "--fail-above on an unnamed new side exited $LAST_RC, expected 2"
}

archived() {
	rc=0
	"$TALLY" diff before.tar after.db --fail-above 5 >/dev/null 2>gate.err || rc=$?
	((rc == 3)) && grep -q "'work_a' in 'split_w' +" gate.err ||
		fail "the archived base: --fail-above 5 exited $rc, expected 3 naming work_a: $(cat gate.err)"
}

subtest "the base rebuilt, no copy: exit 2 naming it" base_unnamed
subtest "the new side's program gone: exit 2 naming it" new_unnamed
subtest "the base archived before the rebuild: judged" archived
