#!/bin/bash
# `tally merge --text-stacks` writes the merged database's `stacks` file as
# text lines (docs/format.md, the version 3 layout: COUNT:WEIGHT pid label
# frames) instead of binary, so that it can be read with head, grep or a
# diff, or edited: the lines are the stacks tests/e2e/stacks.py reads out of
# the binary merge on its own; every view reads the text database into the
# same `report --children` and folded stacks as the binary one; a merge of the
# text database without the option is binary again with the same stacks; and
# a hand edit is read: a line removed no longer adds up to the session (one
# line naming the file), a stack's leaf moved to an address its map does not
# name moves its samples to [jit], the total unchanged.
. "$SRCDIR/tests/e2e/lib.sh"

python3 "$SRCDIR/tests/e2e/gen-bigdb.py" gen.db 3000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
tally_ok merge -o bin.db gen.db
tally_ok merge --text-stacks -o text.db bin.db
head -c 8 bin.db/stacks | grep -q TALLYSTK || fail "the plain merge's stacks are not binary: $(head -c 16 bin.db/stacks | od -c | head -2)"

text_lines() {
	[[ $(session_key text.db format-version) == 4 ]] || fail "text.db is format $(session_key text.db format-version), not 4"
	head -1 text.db/stacks | grep -q '^# count:weight' || fail "text.db/stacks does not start with the text header: $(head -c 200 text.db/stacks)"
	# stacks.py reads the binary file on its own: the same lines
	stacks_text bin.db | grep -v '^#' | sort >want.txt
	grep -v '^#' text.db/stacks | sort >got.txt
	[[ -s want.txt ]] || fail "stacks.py read no stacks from bin.db"
	cmp -s want.txt got.txt || fail "text.db's lines differ from bin.db's stacks: $(diff want.txt got.txt | head -5)"
	note "$(wc -l <got.txt) stacks as text lines, the binary file's own"
}
subtest "the stacks are text lines, the binary file's stacks" text_lines

same_views() {
	for db in bin.db text.db; do
		tally_ok report -i "$db" --children
		tail -n +2 "$TMP/out" >"$db.children" # the first line names the database
		tally_ok export -i "$db" --format folded -o "$db.folded"
	done
	[[ -s bin.db.children && -s bin.db.folded ]] || fail "no --children or folded output from bin.db"
	cmp -s bin.db.children text.db.children || fail "--children differs: $(diff bin.db.children text.db.children | head -5)"
	cmp -s bin.db.folded text.db.folded || fail "folded differs: $(diff bin.db.folded text.db.folded | head -5)"
	note "--children and folded are the same bytes from either"
}
subtest "every view reads the text database as the binary one" same_views

back_to_binary() {
	tally_ok merge -o again.db text.db
	head -c 8 again.db/stacks | grep -q TALLYSTK || fail "a merge of text.db without --text-stacks is not binary"
	tally_ok export -i again.db --format folded -o again.folded
	tally_ok export -i bin.db --format folded -o bin.folded
	cmp -s bin.folded again.folded || fail "the merge back to binary changed the stacks: $(diff bin.folded again.folded | head -5)"
}
subtest "merged again without the option it is binary, the same stacks" back_to_binary

hand_edit() {
	# a stack removed: its samples are missing from the session's count
	cp -r text.db cut.db
	sed -i '2d' cut.db/stacks
	expect_fail_with "cut.db/stacks': its stacks hold [0-9]+ 'cpu-clock' samples but the session counted" \
		"$TALLY" report -i cut.db --children
	# the leaf of the first stack moved to an address no other stack has
	cp -r text.db moved.db
	local line leaf
	line=$(sed -n 2p moved.db/stacks)
	leaf=$(awk '{ print $4 }' <<<"$line")
	[[ $leaf == *:* ]] || fail "the first stack's line has no leaf frame: $line"
	grep -q " ${leaf%%:*}:fffff0 " moved.db/stacks && fail "the address fffff0 is already in moved.db"
	sed -i "2s/ $leaf / ${leaf%%:*}:fffff0 /" moved.db/stacks
	tally_ok report -i moved.db --children
	tally_ok export -i moved.db --format folded -o moved.folded
	cmp -s moved.folded text.db.folded && fail "the edited leaf changed nothing in the folded stacks"
	# its samples now end in [jit] (an address in the JIT image that its map
	# does not name), the others as they were
	local n jit_before jit_after
	n=$(awk -F: '{ print $1 }' <<<"$line")
	jit_before=$(awk '/;\[jit\] [0-9]+$/ { s += $NF } END { print s + 0 }' text.db.folded)
	jit_after=$(awk '/;\[jit\] [0-9]+$/ { s += $NF } END { print s + 0 }' moved.folded)
	((jit_after == jit_before + n)) ||
		fail "stacks ending in [jit]: $jit_before samples before the edit, $jit_after after, not $((jit_before + n)): $(diff text.db.folded moved.folded | head -4)"
	# the two differ only in the moved stack: the same samples in all
	awk '{ s += $NF } END { print s }' text.db.folded >a.sum
	awk '{ s += $NF } END { print s }' moved.folded >b.sum
	cmp -s a.sum b.sum || fail "the edit changed the total: $(cat a.sum) against $(cat b.sum)"
	note "the first stack's $n samples moved to a leaf at 0xfffff0, the total unchanged"
}
subtest "a hand edit is read, or refused as damage" hand_edit
