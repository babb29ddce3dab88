#!/bin/bash
# A merge input that is already inside another input would count its samples
# twice: tally merge refuses it with one line naming both (m.db given with one
# of its own sources, as a directory or an archive of it; two merges holding
# the same recording; a copy of a recording beside it), and writes nothing.
# What a merge holds is kept through merges of merges: merge(merge(a, b), c)
# holds a, b and c, as merge(a, b, c) does (the same 'sources' file).
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/split_funcs
tally_ok record -F 999 -o a.db -- "$W" 150
tally_ok record -F 999 -o b.db -- "$W" 150
tally_ok record -F 999 -o c.db -- "$W" 150
tally_ok merge -o m.db a.db b.db

own_source() {
	expect_fail_with "^tally: 'a\.db' is already inside 'm\.db' \(merged into it as host=[^,]+,run=a\.db\): its samples would count twice \(leave one of them out\)$" \
		"$TALLY" merge -o x.db m.db a.db
	expect_fail_with "^tally: 'b\.db' is already inside 'm\.db'" "$TALLY" merge -o x.db b.db c.db m.db
	tally_ok archive -i m.db -o m.tar
	expect_fail_with "^tally: 'a\.db' is already inside 'm\.tar'" "$TALLY" merge -o x.db m.tar a.db
	[[ ! -e x.db ]] || fail "a refused merge wrote x.db"
}

two_merges() {
	tally_ok merge -o n.db a.db c.db
	expect_fail_with "^tally: 'm\.db' and 'n\.db' both hold the recording merged as host=[^,]+,run=a\.db: its samples would count twice" \
		"$TALLY" merge -o x.db m.db n.db
	[[ ! -e x.db ]] || fail "a refused merge wrote x.db"
}

a_copy() {
	cp -r a.db a2.db
	expect_fail_with "^tally: 'a\.db' and 'a2\.db' are the same recording \(a copy of it\): its samples would count twice \(give it once\)$" \
		"$TALLY" merge -o x.db a.db a2.db
}

kept_through() {
	tally_ok merge -o mc.db m.db c.db
	tally_ok merge -o abc.db a.db b.db c.db
	[[ $(grep -vc '^#' mc.db/sources) == 3 ]] || fail "merge(merge(a, b), c) does not hold 3 recordings: $(cat mc.db/sources)"
	cmp -s mc.db/sources abc.db/sources || fail "merge(merge(a, b), c) and merge(a, b, c) hold other sources: $(diff mc.db/sources abc.db/sources)"
	for r in a b c; do
		grep -q "	run=$r\.db$" mc.db/sources || fail "merge(merge(a, b), c) does not hold $r.db: $(cat mc.db/sources)"
	done
	# and so a recording inside the inner merge is found inside the outer one
	expect_fail_with "^tally: 'b\.db' is already inside 'mc\.db'" "$TALLY" merge -o x.db mc.db b.db
}

subtest "m.db and one of its own sources: refused" own_source
subtest "two merges that hold one recording: refused" two_merges
subtest "a recording and a copy of it: refused" a_copy
subtest "merges of merges hold every recording" kept_through
