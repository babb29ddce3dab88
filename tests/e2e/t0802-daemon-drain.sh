#!/bin/bash
# ctl drain: a self-contained profile of everything since the previous drain
# (report -i FILE reads it); a second drain holds only newer samples, so two
# drains are disjoint and add up to the database, which drains leave intact.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

a=$(uniq_copy split_funcs)
b="$TMP/later_$$"
cp "$a" "$b"
# no flush of its own during the test: every flush is one the test asked for
start_daemon db --flush-interval 1h -F 4000
"$a" 800 >a.out
ctl --db db drain -o d1
[[ -s d1 ]] || fail "drain -o d1 wrote nothing"
[[ ! -s $TMP/ctl.out ]] || fail "drain -o printed on stdout: $(head -c 200 "$TMP/ctl.out")"
"$b" 500 >/dev/null
"$TALLY" ctl --db db drain >d2 2>d2.err || fail "drain to stdout failed: $(cat d2.err)"
ctl --db db stop
ctl --db db drain -o d3

report_json r1.json -i d1 --symbols
report_json r2.json -i d2
report_json r3.json -i d3
na=$(tjson r1.json image "$(basename "$a")")
((na > 0)) || fail "the first drain lacks the workload run before it"
(($(tjson r2.json image "$(basename "$a")") == 0)) || fail "the second drain has samples of the first workload again"
(($(tjson r2.json image "$(basename "$b")") > 0)) || fail "the second drain lacks the workload run before it"
(($(tjson r1.json image "$(basename "$b")") == 0)) || fail "the first drain has samples of a workload run after it"
# the drain is a real profile: functions and the workload's split
check_split func r1.json a.out work_a work_b work_c
t1=$(tjson r1.json total) t2=$(tjson r2.json total) t3=$(tjson r3.json total)
note "drains: $t1, $t2 and $t3 samples (the last after 'stop')"

# the database is unaffected, and holds exactly what the drains together did
stop_daemon "$DAEMON_PID"
t=$(db_total db)
((t == t1 + t2 + t3)) || fail "the database holds $t samples, the drains $t1 + $t2 + $t3"
(($(tjson "$TMP/total.json" image "$(basename "$a")") == na)) || fail "the database lost the drained samples of the first workload"
note "database: $t = $t1 + $t2 + $t3"

# a drain is one file a report reads anywhere: no directory left behind
n=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'tally-bundle.*' -newer d1 2>/dev/null | wc -l)
((n == 0)) || fail "reading the drains left $n unpacked directories in ${TMPDIR:-/tmp}"
head -n1 d1 | grep -q '^tally-bundle: 1$' || fail "d1 does not start with the bundle header: $(head -c 40 d1)"

# a damaged drain file is refused by name
head -c 300 d1 >cut
expect_fail_with "'cut'.*damaged|'cut'.*truncated|'cut'" "$TALLY" report -i cut
