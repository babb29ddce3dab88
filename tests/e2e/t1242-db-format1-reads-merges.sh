#!/bin/bash
# Databases of format 1 (before weights) still read, and merge into a format 4
# one whose weights give each input's samples that input's own period-mean:
# two old recordings at different periods merge exactly.
. "$SRCDIR/tests/e2e/lib.sh"

# v1 DIR PERIOD-MEAN COUNT-AT-0x10 COUNT-AT-0x20: a format 1 database, written by hand
v1() {
	local d=$1 pm=$2 a=$3 b=$4
	mkdir -p "$d"
	chmod 700 "$d"
	printf 'format-version: 1\ntool: tally 0.1.0\nhost: old\nevents: cpu-clock\nsampling: frequency 999\nperiod-mean: %s\nper-pid: no\ncall-graph: none\nstart-time: 2026-11-21T13:07:00Z\nstop-time: 2026-11-21T13:07:02Z\nduration: 2.000\nsamples: %s\nlost: 0\nimages: 1\n' \
		"$pm" $((a + b)) >"$d/session"
	printf '# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tnomap\t00000000\tnone\t0\tnomap\t\n' >"$d/images"
	printf 'format-version: 1\nimage: nomap\npath: \nimage-id: 00000000\nid-kind: none\nkind: nomap\nindex: 0\nevents: cpu-clock\nsamples: %s\n\n10 %s\n20 %s\n' \
		$((a + b)) "$a" "$b" >"$d/nomap-00000000.prof"
	printf '# pid\tcomm\texe\n' >"$d/tasks"
}

v1 old1.db 1000000 10 30
v1 old2.db 2000000 10 0

# it reads: the report counts its samples
tally_ok report -i old1.db
grep -q 'nomap' out || fail "the report of a format 1 database names no nomap row: $(head -c 500 out)"
grep -Eq '\b40\b' out || fail "the report of a format 1 database does not show its 40 samples: $(head -c 500 out)"
note "format 1 database reads"

# it merges: format 4, each input weighed by its own period-mean
tally_ok merge -o m.db --label host= --label run= old1.db old2.db
[[ $(session_key m.db format-version) == 4 ]] || fail "the merge of format 1 inputs is not format 4"
wt=$(session_key m.db weight-total)
[[ $wt == 60000000 ]] || fail "the merge weighs $wt ns, expected 40 x 1000000 + 10 x 2000000 = 60000000"
line10=$(grep -h '^10 ' m.db/nomap-*.prof)
[[ $line10 == "10 20 30000000" ]] ||
	fail "offset 0x10 of the merge is '$line10', expected '10 20 30000000' (10 x 1 ms + 10 x 2 ms)"
note "merge: weight-total $wt, offset 0x10: $line10"
# and the merge reads back
tally_ok report -i m.db
