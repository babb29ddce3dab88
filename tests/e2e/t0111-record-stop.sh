#!/bin/bash
# record -a stops cleanly after --duration, on SIGINT and on SIGTERM, and
# leaves a readable database each time.
. "$SRCDIR/tests/e2e/lib.sh"

# --duration 1: the session's own clock says about a second (a late timer on
# a busy machine is retried once, with the load it ran under printed)
duration_one() {
	local start elapsed dur
	start=$(date +%s.%N)
	rm -rf dur
	tally_ok record -a --duration 1 -F 500 -o dur
	elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
	fcmp "$elapsed" '>=' 0.99 || fail "record -a --duration 1 ended after $elapsed s"
	dur=$(session_key dur duration)
	between "$dur" 0.99 1.5 || fail "record -a --duration 1: the session lasted $dur s (the command $elapsed s)"
	note "--duration 1: the session $dur s, the command $elapsed s"
}
retry_busy "--duration 1" duration_one
report_text dur.txt -i dur --samples
ttext dur.txt check image
n=$(ttext dur.txt total)
((n > 0)) || fail "record -a --duration 1: the report's Total is '$n', expected samples"
note "--duration 1: $n samples"

for sig in INT TERM; do
	db=sig$sig
	# background jobs of a script start with SIGINT ignored: undo that,
	# as for a recording started from a terminal
	env --default-signal="$sig" "$TALLY" record -v -a -F 500 -o $db >$db.out 2>$db.err &
	tp=$!
	track_pid $tp
	# the signal once it records, and some CPU time of a program recorded
	wait_for_line $db.err "^tally: recording into '$db'" 30
	"$WORKLOADS/split_funcs" 100 >/dev/null
	kill -"$sig" $tp
	wait_state() { echo "tally record (pid $tp): $(sed -E 's/^.*\) (.).*$/state \1/' /proc/$tp/stat 2>/dev/null || echo gone); stderr: $(head -c 500 $db.err)"; }
	wait_for 10 "record -a's end after SIG$sig" eval '! alive $tp'
	rc=0
	wait $tp || rc=$?
	signum=$(kill -l "$sig")
	[[ $rc == 0 || $rc == $((128 + signum)) ]] ||
		fail "record -a stopped by SIG$sig exited $rc, expected 0 (or $((128 + signum))); stderr: $(head -c 1000 $db.err)"
	report_text $db.txt -i $db --samples
	ttext $db.txt check image
	n=$(ttext $db.txt total)
	((n > 0)) || fail "record -a stopped by SIG$sig: the report's Total is '$n', expected samples"
	note "SIG$sig: exit $rc, $n samples"
done
