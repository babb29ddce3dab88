#!/bin/bash
# tally top --db: what a running daemon samples, read from its memory (ctl
# peek) with no perf events of tally top's own: a workload with a known split
# run while the daemon samples shows that split; a flush in the middle (the
# daemon's memory emptied) neither loses the window nor counts anything twice;
# ctl peek -o writes a profile report reads and forgets nothing.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/top.sh"

wl=$(uniq_copy split_funcs)
name=$(basename "$wl")
start_daemon db --flush-interval 1h -F 999 --per-pid

"$wl" 6000 >wl.out &
wpid=$!
track_pid $wpid
wait_for_line wl.out '^pid '

"$TALLY" top --db db -d 0.5 -n 10 --rows 0 --image "$name" >top.out 2>top.err &
tpid=$!
track_pid $tpid
sleep 1.5
# no perf event of its own: its descriptors are files, pipes, sockets
if ls -l /proc/$tpid/fd 2>/dev/null | grep -q 'perf_event'; then
	fail "tally top --db opened perf events: $(ls -l /proc/$tpid/fd | grep perf_event | head -3)"
fi
# a flush empties the daemon's memory: tally top goes on from there
ctl --db db flush
rc=0
wait $tpid || rc=$?
((rc == 0)) || fail "tally top --db exited $rc: $(head -c 500 top.err)"
wait $wpid

[[ $(snapshots top.out) == 10 ]] || fail "-n 10 printed $(snapshots top.out) snapshots"
grep -q "^# tally top: functions by share, image '$name', daemon 'db', cpu-clock," top.out || fail "the header does not name the daemon: $(grep -m1 '^#' top.out)"
top_check top.out wl.out 5 work_a work_b work_c
# the command column: the copy's comm (15 characters at most)
grep -Eq "  ${name:0:15}  +work_a\$" top.out || fail "the command column does not name '${name:0:15}': $(grep work_a top.out | tail -1)"
# the samples a second of each tick: never more than the daemon can take
# (every CPU at 999 Hz, and some slack), so that nothing is counted twice
# across the flush; the count since the start only grows
ncpu=$(nproc)
awk -v max=$((ncpu * 999 * 3 / 2)) '/^# tally top:/ {
	if (!match($0, /, [0-9]+ samples\/s, [0-9]+ samples,/)) { print "no rate in: " $0; exit 1 }
	split(substr($0, RSTART + 2, RLENGTH - 3), w, " "); rate = w[1] + 0; n = w[3] + 0
	if (NR > 1 && ticks++ > 0 && rate > max) { print "a tick of " rate " samples/s, more than " max; exit 1 }
	if (n < last) { print "the sample count went down: " last " then " n; exit 1 }
	last = n }' top.out >check.out || fail "$(cat check.out)"
note "rates and totals: $(grep '^# tally' top.out | sed -E 's/.*, ([0-9]+) samples\/s, ([0-9]+) samples.*/\1:\2/' | tr '\n' ' ')"

# ctl peek: a profile of the memory; nothing flushed or forgotten
"$wl" 500 >/dev/null
ctl --db db status
before=$(status_val in-memory | awk '{ print $1 }')
ctl --db db peek -o peek.prof
[[ -s peek.prof ]] || fail "ctl peek -o wrote nothing"
"$TALLY" report -i peek.prof --image "$name" --symbols >peek.txt 2>peek.err || fail "report -i peek.prof: $(cat peek.err)"
grep -q work_a peek.txt || fail "the peek holds no work_a: $(head -20 peek.txt)"
ctl --db db status
after=$(status_val in-memory | awk '{ print $1 }')
fcmp "$after" ">=" "$before" || fail "ctl peek emptied the memory: $before samples before, $after after"
note "in memory: $before before the peek, $after after"
stop_daemon "$DAEMON_PID"
