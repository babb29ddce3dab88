#!/bin/bash
# tally merge is associative and order-independent, byte for byte:
# merge(merge(a,b),c), merge(a,merge(b,c)), merge(a,b,c) and merge(c,b,a)
# are the same files, and merge(a,b) = merge(b,a) (three recordings with
# call graphs, two programs). The merge sums: its samples are the inputs'
# together, per function too; it is format version 4 (weights, labels, binary stacks) with a label set per
# input (host, run); each input's own report comes back with --label run=.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 999 -o a.db -- "$WORKLOADS/split_funcs" 300
tally_ok record -g -F 999 -o b.db -- "$WORKLOADS/split_funcs" 300
tally_ok record -g -F 999 -o c.db -- "$WORKLOADS/callsplit_fp" 300

tally_ok merge -o ab.db a.db b.db
tally_ok merge -o ba.db b.db a.db
tally_ok merge -o bc.db b.db c.db
tally_ok merge -o ab_c.db ab.db c.db
tally_ok merge -o a_bc.db a.db bc.db
tally_ok merge -o abc.db a.db b.db c.db
tally_ok merge -o cba.db c.db b.db a.db
grep -q "^tally: merged 3 inputs into 'cba.db': [0-9]* samples, [0-9]* label sets$" err || fail "merge's summary line: $(cat err)"
same() {
	diff -r "$1" "$2" >d.out || fail "$1 and $2 differ: $(head -c 1500 d.out)"
	note "$1 = $2 byte for byte ($(find "$1" -type f | wc -l) files)"
}
same ab.db ba.db
same ab_c.db a_bc.db
same ab_c.db abc.db
same abc.db cba.db

grep -qx "format-version: 4" abc.db/session && [[ -e abc.db/labels ]] || fail "a merge with labels is not format version 4 with labels: $(head -3 abc.db/session)"
# a label set per input, beside the command names each recording kept (comm=NAME)
[[ $(grep -v '^#' abc.db/labels | sed -E 's/\tcomm=[^\t]*//' | cut -f2- | sort -u | wc -l) == 3 ]] ||
	fail "3 inputs, not 3 label sets apart from comm: $(cat abc.db/labels)"
grep -qP '^\d+\tcomm=callsplit_fp\thost=\S+\trun=c\.db$' abc.db/labels || fail "no label set comm=callsplit_fp,host=...,run=c.db: $(cat abc.db/labels)"

# the sums, per event and per function
s=0
for d in a b c; do
	s=$((s + $(sed -n 's/^samples: //p' $d.db/session)))
done
[[ $(sed -n 's/^samples: //p' abc.db/session) == "$s" ]] || fail "abc.db has $(sed -n 's/^samples: //p' abc.db/session) samples, the inputs $s"
report_json m.json -i abc.db --symbols
report_json a.json -i a.db --symbols
report_json b.json -i b.db --symbols
for f in work_a work_b work_c; do
	want=$(($(tjson a.json func "$f") + $(tjson b.json func "$f")))
	[[ $(tjson m.json func "$f") == "$want" ]] || fail "$f: $(tjson m.json func "$f") samples merged, $want in a and b"
done
# each input back from the merge: the same functions with the same counts
for d in a c; do
	report_json l.json -i abc.db --label run=$d.db --symbols
	report_json o.json -i $d.db --symbols
	for f in $(tjson o.json funcs); do
		[[ $(tjson l.json func "$f") == "$(tjson o.json func "$f")" ]] ||
			fail "--label run=$d.db: $f has $(tjson l.json func "$f") samples, $d.db $(tjson o.json func "$f")"
	done
	[[ $(tjson l.json total) == "$(tjson o.json total)" ]] || fail "--label run=$d.db: total $(tjson l.json total), $d.db $(tjson o.json total)"
done
note "sums per event and function; each input's report back with --label run="
