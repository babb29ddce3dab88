#!/bin/bash
# record -a stops cleanly after --duration, on SIGINT and on SIGTERM, and
# leaves a readable database each time.
. "$SRCDIR/tests/e2e/lib.sh"

start=$(date +%s.%N)
tally_ok record -a --duration 1 -F 500 -o dur
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
between "$elapsed" 0.9 5 ||
	fail "record -a --duration 1 took $elapsed s, expected about 1 s"
report_text dur.txt -i dur --samples
ttext dur.txt check image
n=$(ttext dur.txt total)
((n > 0)) || fail "record -a --duration 1: the report's Total is '$n', expected samples"
note "--duration 1: $elapsed s, $n samples"

for sig in INT TERM; do
	db=sig$sig
	# background jobs of a script start with SIGINT ignored: undo that,
	# as for a recording started from a terminal
	env --default-signal="$sig" "$TALLY" record -a -F 500 -o $db >$db.out 2>$db.err &
	tp=$!
	track_pid $tp
	sleep 1
	kill -"$sig" $tp
	for ((i = 0; i < 100; i++)); do
		alive $tp || break
		sleep 0.05
	done
	alive $tp && fail "record -a still running 5 s after SIG$sig"
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
