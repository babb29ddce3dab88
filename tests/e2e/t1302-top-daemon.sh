#!/bin/bash
# tally top --db: what a running daemon samples, read from its memory (ctl
# peek) with no perf events of tally top's own: a workload with a known split
# run while the daemon samples shows that split; a flush in the middle (the
# daemon's memory emptied, every 2 s and once on demand) neither loses the
# window nor counts anything twice;
# ctl peek -o writes a profile report reads and forgets nothing.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/top.sh"

wl=$(uniq_copy split_funcs)
name=$(basename "$wl")
start_daemon db --flush-interval 2s -F 999 --per-pid

"$wl" 6000 >wl.out &
wpid=$!
track_pid $wpid
wait_for_line wl.out '^pid '
# what the daemon took before tally top started: not in top's window (on a
# busy machine, starting the workload and top takes seconds of the daemon's)
ctl --db db status
daemon_before=$(status_val samples | awk '{ print $1 }')
inmem_before=$(status_val in-memory | awk '{ print $1 }')

"$TALLY" top --db db -d 0.5 -n 10 --rows 0 --image "$name" >top.out 2>top.err &
tpid=$!
track_pid $tpid
sleep 1.5
# no perf event of its own: its descriptors are files, pipes, sockets
if ls -l /proc/$tpid/fd 2>/dev/null | grep 'perf_event' >/dev/null; then
	fail "tally top --db opened perf events: $(ls -l /proc/$tpid/fd | grep perf_event | head -3)"
fi
# a flush empties the daemon's memory: tally top goes on from there
ctl --db db flush
rc=0
wait $tpid || rc=$?
((rc == 0)) || fail "tally top --db exited $rc: $(head -c 500 top.err)"
# what the daemon took until top ended (the workload may run on for long on
# a busy machine, and the daemon samples every CPU)
ctl --db db status
daemon_total=$(status_val samples | awk '{ print $1 }')
wait $wpid

[[ $(snapshots top.out) == 10 ]] || fail "-n 10 printed $(snapshots top.out) snapshots"
grep -q "^# tally top: functions by share, image '$name', daemon 'db', cpu-clock," top.out || fail "the header does not name the daemon: $(grep -m1 '^#' top.out)"
top_check top.out wl.out 5 work_a work_b work_c
# the command column: the copy's comm (15 characters at most)
grep -Eq "  ${name:0:15}  +work_a\$" top.out || fail "the command column does not name '${name:0:15}': $(grep work_a top.out | tail -1)"
# nothing counted twice across the flushes: tally top's samples are at most
# what the daemon took from its start to top's end, less what it had
# flushed before top started (top's first peek counts the daemon's whole
# memory; a flush between two peeks would otherwise add what the peeks
# before it saw again)
top_total=$(awk '/^# tally top:/ { s = $0 } END { print s }' top.out | sed -E 's/.* ([0-9]+) samples,.*/\1/')
note "samples: tally top $top_total, the daemon $daemon_total from its start to top's end, $daemon_before of them before top ($inmem_before of those in memory)"
[[ $top_total =~ ^[0-9]+$ && $daemon_total =~ ^[0-9]+$ && $daemon_before =~ ^[0-9]+$ && $inmem_before =~ ^[0-9]+$ ]] ||
	fail "cannot read the totals: top '$top_total', daemon '$daemon_total', before top '$daemon_before' ('$inmem_before' in memory)"
flushed_before=$((daemon_before - inmem_before))
((top_total <= daemon_total - flushed_before)) ||
	fail "tally top counted $top_total samples, the daemon took $daemon_total to top's end, $flushed_before of them flushed before top: counted twice"
((top_total * 4 >= daemon_total - daemon_before)) ||
	fail "tally top counted $top_total samples of the daemon's $((daemon_total - daemon_before)) since top started"
awk '/^# tally top:/ { if (!match($0, /, [0-9]+ samples,/)) { print "no count in: " $0; exit 1 }
	n = substr($0, RSTART + 2, RLENGTH - 11) + 0
	if (n < last) { print "the sample count went down: " last " then " n; exit 1 } last = n }' top.out >check.out || fail "$(cat check.out)"
grep -q 'ctl (uid [0-9]*): peek' db/daemon.log && fail "every peek is logged (the log fills at one line a second)"

# ctl peek: a profile of the memory; nothing flushed or forgotten
"$wl" 500 >/dev/null
# (a periodic flush between the two status calls empties the memory too:
# then again)
checked=
for attempt in 1 2 3 4 5; do
	ctl --db db status
	before=$(status_val in-memory | awk '{ print $1 }')
	f1=$(grep -o '[0-9]* flushes' "$TMP/ctl.out" | awk '{ print $1 }')
	ctl --db db peek -o peek.prof
	ctl --db db status
	after=$(status_val in-memory | awk '{ print $1 }')
	f2=$(grep -o '[0-9]* flushes' "$TMP/ctl.out" | awk '{ print $1 }')
	[[ -n $f1 && $f1 == "$f2" ]] || continue
	fcmp "$after" ">=" "$before" || fail "ctl peek emptied the memory: $before samples before, $after after (no flush between)"
	checked=1
	break
done
[[ -n $checked ]] || fail "a flush came between every status and peek: cannot tell whether peek empties the memory"
note "in memory: $before before the peek, $after after"
[[ -s peek.prof ]] || fail "ctl peek -o wrote nothing"
"$TALLY" report -i peek.prof --symbols >peek-all.txt 2>peek.err || fail "report -i peek.prof: $(cat peek.err)"
# the workload's samples are in it unless a flush emptied the memory after
# the workload ended and before the peek
if "$TALLY" report -i peek.prof --image "$name" --symbols >peek.txt 2>peek.err; then
	grep -q work_a peek.txt || note "(the last peek came after a flush: no work_a in it)"
elif grep -q "matches no image with samples" peek.err; then
	note "(the last peek came after a flush: no samples of $name in it)"
else
	fail "report -i peek.prof --image $name: $(cat peek.err)"
fi
stop_daemon "$DAEMON_PID"
