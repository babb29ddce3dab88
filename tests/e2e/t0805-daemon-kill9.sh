#!/bin/bash
# kill -9 at any moment, ten times over during heavy activity, with a flush
# every 50 ms and call graphs (so the daemon is often in the middle of a
# write): the database is always readable and only grows; a new daemon
# clears what a killed one left half-written. Each daemon is killed at a
# random moment (0 to 0.3 s) after its first flush has landed, so that every
# kill falls among its writes however slow the machine (a fixed moment after
# the start fell before the first flush under ASan on a loaded machine).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

# samples_in JSON: the samples of every event of a report (0 when unreadable)
samples_in() {
	python3 -c 'import json, sys; print(sum(e["samples"] for e in json.load(open(sys.argv[1]))["events"]))' "$1" 2>/dev/null || echo 0
}

# flushed: the daemon's status counts samples it has written (its samples
# less those still in memory)
flushed() {
	ctl --db db status
	(($(status_val samples) - $(status_val in-memory | cut -d' ' -f1) > 0))
}
start_load
prev=0
grew=0
for ((i = 1; i <= 10; i++)); do
	start_daemon db --flush-interval 50ms -g
	# its first flush, as its status says (a report of the growing database
	# every 0.1 s to see it cost more than the flushes on a busy machine)
	wait_state() { echo "status: samples $(status_val samples), in-memory $(status_val in-memory); flush: $(status_val flush)"; }
	wait_for 60 "daemon number $i's first flush" flushed
	# then a moment somewhere in the next 0.3 s
	sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", rand() * 0.3 }')"
	kill -KILL "$DAEMON_PID"
	for ((w = 0; w < 200; w++)); do alive "$DAEMON_PID" || break; sleep 0.02; done
	alive "$DAEMON_PID" && fail "the daemon survived kill -9"
	rc=0
	"$TALLY" report -i db --json >r.json 2>r.err || rc=$?
	((rc == 0)) || fail "kill -9 number $i left an unreadable database: $(cat r.err)"
	t=$(samples_in r.json)
	((t >= prev)) || fail "kill -9 number $i: the database shrank from $prev to $t samples"
	((t > prev)) && grew=$((grew + 1))
	prev=$t
done
((grew == 10)) || fail "the database grew in only $grew of 10 runs, though each daemon was killed after its first flush"
note "10 kills: the database stayed readable and grew to $prev samples ($grew runs added samples)"

# what the killed daemons left (staging copies) is cleared by the next one
start_daemon db --flush-interval 50ms
# (a copy named after the new daemon's own pid is its flush in progress)
left=$(find db -maxdepth 1 -name '.*' ! -name . ! -name "*-$DAEMON_PID" | wc -l)
((left == 0)) || fail "a new daemon left the killed ones' half-written copies in place: $(find db -maxdepth 1 -name '.*' ! -name .)"
ctl --db db flush
stop_daemon "$DAEMON_PID"
left=$(find db -maxdepth 1 -name '.*' ! -name . | wc -l)
((left == 0)) || fail "a daemon stopped cleanly left copies behind: $(find db -maxdepth 1 -name '.*' ! -name .)"
t=$(db_total db)
((t >= prev)) || fail "after a clean stop the database shrank from $prev to $t samples"
report_json cg.json -i db --children
note "clean restart: $t samples, no leftovers, call graphs readable"
