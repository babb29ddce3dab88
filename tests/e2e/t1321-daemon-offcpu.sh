#!/bin/bash
# tally daemon --off-cpu: a workload that waits, run while the daemon samples
# every CPU, has its waits in off-cpu after `ctl flush` (at the libc functions
# that waited: clock_nanosleep and ppoll), and under report --wall its process
# adds up to its wall time (within 5%); `ctl status` says how (as the
# session) and counts the waits; while the daemon is paused
# (`ctl stop`) a second run adds no off-CPU sample; a new rate for the CPUs
# (`ctl cpus all on period 2000000`: the sampling events' period in ns) is
# taken, and leaves one sample per wait.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

"$TALLY" events >events.txt 2>/dev/null || true
grep -Eq '^off-cpu +tracepoint +available' events.txt ||
	skip "off-CPU recording is unavailable here (needs root and tracefs)"

wl=$(uniq_copy offcpu_split)
start_daemon db --off-cpu --per-pid --flush-interval 60s
ctl --db db status
[[ $(status_val events) == cpu-clock,off-cpu,off-cpu-preempted ]] ||
	fail "status: events '$(status_val events)', expected cpu-clock,off-cpu,off-cpu-preempted"

"$wl" 2 pid >wl.out
pid=$(workload_pid wl.out)
ctl --db db flush
report_json r.json -i db --event off-cpu --pid "$pid" --flat
funcs=$(tjson r.json funcs)
for f in clock_nanosleep ppoll; do
	grep -qx "$f" <<<"$funcs" || fail "the waits of process $pid have no row for $f: $(tr '\n' ' ' <<<"$funcs")"
done
note "process $pid waited in: $(tr '\n' ' ' <<<"$funcs")"
# status says how off-CPU time is recorded, as the epoch's session does, and
# counts the waits so far
ctl --db db status
ep=$(status_val epoch | cut -d' ' -f1)
mech=$(session_key "db/$ep" off-cpu-mechanism)
[[ $(status_val off-cpu) =~ ^$mech(\ \(auto:\ [^\)]*\))?,\ ([0-9]+)\ waits\ blocked, ]] && ((BASH_REMATCH[2] > 0)) ||
	fail "status's off-cpu line is '$(status_val off-cpu)', expected the mechanism '$mech' and the waits"

rc=0
"$TALLY" report -i db --wall --pid "$pid" --json >wall.json 2>wall.err || rc=$?
if ((rc != 0)) && grep -q 'keeps no sample weights' wall.err; then
	note "--wall not checked: the database keeps no sample weights yet"
else
	((rc == 0)) || fail "report --wall exited $rc: $(cat wall.err)"
	total=$(python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["events"][0]; print(e.get("value", e["samples"]))' wall.json)
	loop=$(info_val loop_ns wl.out)
	awk -v a="$total" -v b="$loop" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= b * 0.05) }' ||
		fail "--wall: process $pid has $total ns, it ran its loop for $loop ns (+/- 5%)"
	note "--wall: process $pid has $total ns, its loop took $loop ns"
fi

# a new rate for the CPUs changes the sampling events, not off-CPU time: one
# sample per wait still (the epoch's session counts the waits of every task)
ctl --db db status
epoch=$(status_val epoch | cut -d' ' -f1)
before=$(session_key "db/$epoch" off-cpu-waits | cut -d, -f1)
ctl --db db cpus all on period 2000000
"$wl" 1 pid >wl3.out
ctl --db db flush
after=$(session_key "db/$epoch" off-cpu-waits | cut -d, -f1)
own=$(awk '$1 == "info" && $2 == "loop_ns" { printf "%d", $3 / 9.3e6 * 4 * 0.7 }' wl3.out)
(((after - before) >= own)) ||
	fail "after 'cpus all on period 2000000' the daemon counted $((after - before)) waits while the workload alone made about $own"
note "after a rate change: $((after - before)) waits counted (the workload made about $own)"

# paused: nothing of a second run
ctl --db db stop
"$wl" 1 pid >wl2.out
pid2=$(workload_pid wl2.out)
ctl --db db flush
n=$("$TALLY" report -i db --event off-cpu --pid "$pid2" --flat 2>/dev/null | grep -c 'clock_nanosleep\|ppoll' || true)
((n == 0)) || fail "the daemon was paused, yet process $pid2 has off-CPU rows: $("$TALLY" report -i db --event off-cpu --pid "$pid2" --flat 2>&1 | head -5)"
note "paused: no off-CPU rows for process $pid2"
stop_daemon "$DAEMON_PID"
