#!/bin/bash
# record -p: attaching to running processes for --duration 1 profiles them
# (sleeper_burn), stops on time, leaves them running, and -p takes a list.
. "$SRCDIR/tests/e2e/lib.sh"

F=2000
"$WORKLOADS/sleeper" 30 burn >burn.out 2>&1 &
burner=$!
track_pid $burner
"$WORKLOADS/sleeper" 30 >idle.out 2>&1 &
idler=$!
track_pid $idler
wait_for_line burn.out '^pid '
wait_for_line idle.out '^pid '

# the burner's CPU time (/proc/PID/schedstat, ns) while tally records it: the
# samples are F a second of it, whatever share of a CPU a busy machine left
# it.  Read at tally's word that it records (-v: just after its start), half
# a second later (inside the recording: a part of its CPU time), and at the
# start of tally's final write (its staging directory) or its end (after
# the recording: all of it and more)
run_ns() { awk '{ print $1 }' "/proc/$1/schedstat"; }
recorded_burn() {
	local tp c0 c1 c2 t0 t1 dur
	rm -rf db
	"$TALLY" record -v -p $burner --duration 1 -F $F -o db >rec.out 2>rec.err &
	tp=$!
	track_pid $tp
	wait_for_line rec.err "^tally: recording into 'db'" 30
	c0=$(run_ns $burner) t0=${EPOCHREALTIME/./}
	# a measured half second, not a wait for something
	sleep 0.5
	c1=$(run_ns $burner) t1=${EPOCHREALTIME/./}
	wait_for 30 "tally record's final write" eval "[[ -e .db.tmp-$tp ]] || ! alive $tp"
	c2=$(run_ns $burner)
	wait $tp || fail "record -p $burner exited $?: $(cat rec.err)"
	alive $burner || fail "the attached process died: record -p must leave it running"
	dur=$(session_key db duration)
	between "$dur" 0.99 1.5 || fail "record -p PID --duration 1: the session lasted $dur s"
	(((t1 - t0) < 900000)) || busy "the test's own read half a second into the recording came $(((t1 - t0) / 1000)) ms in: past its end, perhaps"
	echo "$(((c1 - c0) / 1000000)) $(((c2 - c0) / 1000000))" >burn.ms
	note "record -p --duration 1: the session $dur s; the target is still running, and used $(((c1 - c0) / 1000000)) ms of CPU in the half second, $(((c2 - c0) / 1000000)) ms to the end"
}
retry_busy "record -p --duration 1" recorded_burn
read -r part all <burn.ms

report_json sym.json -i db --symbols
total=$(tjson sym.json total)
burn=$(tjson sym.json func sleeper_burn sleeper)
fcmp "$burn" '>=' "$(awk -v t="$total" 'BEGIN { print 0.9 * t }')" ||
	fail "sleeper_burn has $burn of $total samples, expected at least 90% (images: $(tjson sym.json images | tr '\n' ' '))"
# F a second of its CPU time: at least three quarters of F a second of its
# half second's, at most five quarters of all it used (a few period draws
# of +-12.5%), and a few samples either way
lo=$(awk -v f=$F -v ms="$part" 'BEGIN { printf "%d", 0.75 * f * ms / 1000 - 5 }')
hi=$(awk -v f=$F -v ms="$all" 'BEGIN { printf "%d", 1.25 * f * ms / 1000 + 5 }')
between "$total" "$lo" "$hi" ||
	fail "1 s attached to a busy process at -F $F gave $total samples; it used $part ms of CPU in half a second of the recording and $all ms to its end: expected $lo to $hi"
note "sleeper_burn: $burn of $total samples (it used $part ms of CPU in half the recording, $all ms to its end: $lo to $hi expected)"

# a list of pids, kept apart with --per-pid
tally_ok record -p "$burner,$idler" --per-pid --duration 1 -F $F -o list
for p in $burner $idler; do
	report_json "p$p.json" -i list --pid "$p" --symbols
	n=$(tjson "p$p.json" func sleeper_burn)
	((n > 0)) || fail "record -p $burner,$idler: process $p has no samples in sleeper_burn"
	note "-p list: process $p has $n samples in sleeper_burn"
done
alive $idler || fail "the attached idle process died"
