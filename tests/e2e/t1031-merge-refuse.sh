#!/bin/bash
# tally merge refuses, with one line on stderr naming the inputs, what cannot
# be summed: another call-graph mode, counts that would pass 2^64, the same
# database twice; and
# usage errors (no -o, no input: status 2), an existing output without
# --force. Different events are kept apart: one warning, each event summed
# over the inputs that have it. Nothing is written when a merge is refused.
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/split_funcs
tally_ok record -F 999 -o flat.db -- "$W" 200
tally_ok record -F 999 -o flat2.db -- "$W" 200
tally_ok record -g -F 999 -o fp.db -- "$W" 200
tally_ok record -F 999 -e page-faults -o pf.db -- "$WORKLOADS/touchmem" 20

expect_fail_with "^tally: cannot merge 'fp\.db' \(call graphs: fp\) with 'flat\.db' \(call graphs: none\): merge databases recorded with the same --call-graph$" \
	"$TALLY" merge -o m.db flat.db fp.db
# one event at another rate, period or period kind merges by value (t1705)
expect_fail_with "^tally: 'flat\.db' and '\./flat\.db/' are the same database: its samples would count twice \(give it once\)$" \
	"$TALLY" merge -o m.db flat.db ./flat.db/
[[ ! -e m.db ]] || fail "a refused merge wrote m.db"

# counts that would wrap: each database adds up, the two together do not
big() {
	mkdir "$1"
	printf 'format-version: 1\ntool: tally 0.1.0\nhost: %s\nevents: cpu-clock\nsampling: frequency 999\nper-pid: no\ncall-graph: none\nsamples: 18446744073709551000\nlost: 0\n' "$1" >"$1/session"
	printf '# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tlib\t1111111111111111\txxh64\t0\tlibx.so\t/lib/libx.so\n' >"$1/images"
	printf 'format-version: 1\nimage: libx.so\npath: /lib/libx.so\nimage-id: 1111111111111111\nid-kind: xxh64\nkind: lib\nindex: 0\nevents: cpu-clock\nsamples: 18446744073709551000\n\n10 18446744073709551000\n' >"$1/libx.so-1111111111111111.prof"
}
big big1.db
big big2.db
tally_ok report -i big1.db
expect_fail_with "^tally: 'big2\.db': its 'cpu-clock' samples and those merged before it add up past 18446744073709551615 \(merge fewer databases at once\)$" \
	"$TALLY" merge -o m.db big1.db big2.db
[[ ! -e m.db ]] || fail "a refused merge wrote m.db"

# usage
expect_fail_with "^tally: give the merged database with -o DIR \(see 'tally merge --help'\)$" "$TALLY" merge flat.db
((LAST_RC == 2)) || fail "merge without -o exited $LAST_RC, expected 2"
expect_fail_with "^tally: give the databases to merge" "$TALLY" merge -o m.db
((LAST_RC == 2)) || fail "merge without inputs exited $LAST_RC, expected 2"
expect_fail_with "invalid --label 'no equals'" "$TALLY" merge -o m.db --label 'no equals' flat.db
expect_fail_with "^tally: no database at 'nope\.db'" "$TALLY" merge -o m.db flat.db nope.db
tally_ok merge -o m.db flat.db flat2.db
expect_fail_with "m\.db" "$TALLY" merge -o m.db flat.db flat2.db
tally_ok merge -f -o m.db flat.db flat2.db

# different events: kept apart, with a warning
tally_ok merge -o ev.db flat.db pf.db
grep -q "^tally: warning: event 'page-faults' is in 1 of the 2 inputs (first 'pf.db'): it is kept apart, its counts are those inputs' alone$" err ||
	fail "no warning about page-faults: $(cat err)"
grep -qx 'events: cpu-clock,page-faults' ev.db/session || fail "the merge's events: $(grep events ev.db/session)"
report_json e1.json -i ev.db --event page-faults
report_json e2.json -i pf.db --event page-faults
[[ $(tjson e1.json total page-faults) == "$(tjson e2.json total page-faults)" ]] ||
	fail "page-faults: $(tjson e1.json total page-faults) merged, $(tjson e2.json total page-faults) in pf.db"
report_json e3.json -i ev.db --event cpu-clock
report_json e4.json -i flat.db
[[ $(tjson e3.json total cpu-clock) == "$(tjson e4.json total cpu-clock)" ]] ||
	fail "cpu-clock: $(tjson e3.json total cpu-clock) merged, $(tjson e4.json total cpu-clock) in flat.db"
note "different events kept apart: page-faults $(tjson e1.json total page-faults), cpu-clock $(tjson e3.json total cpu-clock)"

# an input's stacks are read at its add, straight into the merge's: a damaged
# file refuses the merge (its name, the fault), and nothing is written; the
# stacks are damaged as text (the binary file of format version 4 read as
# text through tests/e2e/stacks.py; tally reads either), then as binary
tally_ok record -g -F 999 -o fp2.db -- "$W" 200
cp -r fp2.db dmg.db
stacks_text fp2.db | awk '!/^#/ && !done { split($1, cw, ":"); $1 = (cw[1] + 1000) ":" cw[2]; done = 1 } { print }' >dmg.db/stacks
expect_fail_with "^tally: 'dmg\.db/stacks': its stacks hold [0-9]+ 'cpu-clock' samples but the session counted [0-9]+ \(the file is truncated or damaged: record again\)$" \
	"$TALLY" merge -o bad.db fp.db dmg.db
[[ ! -e bad.db ]] || fail "a merge of a damaged input wrote bad.db"
cp -r dmg.db dmgb.db
stacks_to_binary dmgb.db
expect_fail_with "^tally: 'dmgb\.db/stacks': its stacks hold [0-9]+ 'cpu-clock' samples but the session counted [0-9]+ " \
	"$TALLY" merge -o bad.db fp.db dmgb.db
[[ ! -e bad.db ]] || fail "a merge of a damaged (binary) input wrote bad.db"
# ... and a merged input (version 4, labelled) whose stack names a label set it has not
tally_ok merge -o lab.db fp.db fp2.db
grep -qx 'format-version: 4' lab.db/session || fail "a merge with labels is not version 4: $(head -1 lab.db/session)"
cp -r lab.db labdmg.db
stacks_text lab.db | awk '!/^#/ && !done { $3 = 9; done = 1 } { print }' >labdmg.db/stacks
expect_fail_with "^tally: 'labdmg\.db/stacks' line 2: label set 9 is not in 'labels' \(the database is damaged: record it again\)$" \
	"$TALLY" merge -o bad.db labdmg.db
expect_fail_with "^tally: 'labdmg\.db/stacks' line 2: label set 9 is not in 'labels'" \
	"$TALLY" report -i labdmg.db --children
[[ ! -e bad.db ]] || fail "a merge of a damaged input wrote bad.db"
cp -r labdmg.db labdmgb.db
stacks_to_binary labdmgb.db
expect_fail_with "^tally: 'labdmgb\.db/stacks'.*label" "$TALLY" merge -o bad.db labdmgb.db
expect_fail_with "^tally: 'labdmgb\.db/stacks'.*label" "$TALLY" report -i labdmgb.db --children
[[ ! -e bad.db ]] || fail "a merge of a damaged (binary) input wrote bad.db"
