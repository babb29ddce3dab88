#!/bin/bash
# One event at two rates (-F 99 and -F 499) merges by value: each input's
# samples weigh the time they stand for, so two programs that each ran about
# a second are about half of the merge each (by samples they would be 1:5),
# the merged weight-total is the sum of the inputs', each label's total is
# its input's, and the header says the rates differ. Refused only where the
# values cannot be added, with one line naming both files: an input with no
# periods to weigh its samples by (a format 1 database, written by hand),
# and one whose values are in another unit.
. "$SRCDIR/tests/e2e/lib.sh"

# jvalue JSON [IMAGE]: the value (ns) of the report's first event, or of an image in it
jvalue() {
	python3 - "$@" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
if len(sys.argv) > 2:
    e = [i for i in e["images"] if i["name"] == sys.argv[2]][0]
print(e["value"])
PY
}

tally_ok record -F 99 -o slow.db -- "$WORKLOADS/split_funcs" 1500
tally_ok record -F 499 -o fast.db -- "$WORKLOADS/inline_chain" 1500

by_value() {
	tally_ok merge -o m.db slow.db fast.db
	local ws wf wm
	ws=$(session_key slow.db weight-total)
	wf=$(session_key fast.db weight-total)
	wm=$(session_key m.db weight-total)
	[[ $wm == $((ws + wf)) ]] || fail "the merge weighs $wm ns, the inputs $ws + $wf"
	report_json m.json -i m.db
	local ns nf ps pf
	ns=$(session_key slow.db samples)
	nf=$(session_key fast.db samples)
	ps=$(jvalue m.json split_funcs)
	pf=$(jvalue m.json inline_chain)
	# the time each program's samples stand for: each input's own weight
	# in its program, against the merge's
	share=$(awk -v a="$ps" -v b="$pf" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')
	want=$(python3 - slow.db fast.db <<'PY'
import glob, sys
def weight(db, name):
    t = 0
    for f in glob.glob(db + "/" + name + "-*.prof"):
        body = open(f).read().split("\n\n", 1)[1]
        for line in body.splitlines():
            t += int(line.split()[2])
    return t
a, b = weight(sys.argv[1], "split_funcs"), weight(sys.argv[2], "inline_chain")
print("%.2f" % (100.0 * a / (a + b)))
PY
)
	near "$share" "$want" 0.01 "split_funcs's share of the two programs in the merge ($ns and $nf samples)"
	# by samples the slow input would weigh a fifth: the check above must tell them apart
	fcmp "$(awk -v w="$want" -v a="$ns" -v b="$nf" 'BEGIN { s = 100 * a / (a + b); d = w - s; print d < 0 ? -d : d }')" ">" 15 ||
		fail "test setup: by samples and by value give about the same split ($want)"
	between "$want" 35 65 || fail "test setup: two programs of 1.5 s each are not about half each: $want%"
	report_text m.txt -i m.db
	grep -q "^# event: cpu-clock, sampled at several rates, merged by value" m.txt ||
		fail "the header does not say the rates differ: $(head -3 m.txt)"
	report_json s.json -i m.db --label run=slow.db
	[[ $(jvalue s.json) == "$ws" ]] || fail "--label run=slow.db totals $(jvalue s.json) ns, slow.db's weight-total is $ws"
}

# v1 DIR: a format 1 database at -F 499 with no period-mean: no values
v1() {
	mkdir -p -m 700 "$1"
	printf 'format-version: 1\ntool: tally 0.1.0\nhost: old\nevents: cpu-clock\nsampling: frequency 499\nper-pid: no\ncall-graph: none\nstart-time: 2026-11-21T13:07:00Z\nstop-time: 2026-11-21T13:07:02Z\nduration: 2.000\nsamples: 40\nlost: 0\nimages: 1\n' >"$1/session"
	printf '# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tnomap\t00000000\tnone\t0\tnomap\t\n' >"$1/images"
	printf 'format-version: 1\nimage: nomap\npath: \nimage-id: 00000000\nid-kind: none\nkind: nomap\nindex: 0\nevents: cpu-clock\nsamples: 40\n\n10 40\n' >"$1/nomap-00000000.prof"
	printf '# pid\tcomm\texe\n' >"$1/tasks"
}

no_values() {
	v1 old.db
	expect_fail_with "^tally: cannot merge 'old\.db' with 'slow\.db': event 'cpu-clock' was sampled at frequency 99 in 'slow\.db' and at frequency 499 in 'old\.db', and 'old\.db' has no periods to weigh its samples by, so their values cannot be added" \
		"$TALLY" merge -o m2.db slow.db old.db
	[[ ! -e m2.db ]] || fail "a refused merge wrote m2.db"
}

other_unit() {
	cp -r fast.db events.db
	sed -i 's/^weight-unit: ns$/weight-unit: events/' events.db/session
	grep -qx 'weight-unit: events' events.db/session || fail "test setup: no weight-unit to change: $(cat events.db/session)"
	expect_fail_with "^tally: cannot merge 'events\.db' with 'slow\.db': event 'cpu-clock' counts ns in 'slow\.db' and events in 'events\.db', which do not add up" \
		"$TALLY" merge -o m3.db slow.db events.db
}

subtest "-F 99 and -F 499 merge by value" by_value
subtest "an input with no values: refused, both named" no_values
subtest "values in another unit: refused, both named" other_unit
