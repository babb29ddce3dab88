#!/bin/bash
# The push backlog is bounded by what bounds the epochs: while the server
# answers 503, --keep deletes epochs that were never sent; what they held is
# counted as dropped, in the log (naming the epochs) and in 'ctl status',
# and once the server is back the rest arrives: the samples taken plus those
# dropped are what the daemon flushed, and the samples taken are what its
# remaining epochs hold.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

((EUID == 0)) || skip "the daemon samples the whole system: needs root"
need_tool go golang-go
start_receiver "$TMP/rx"
rx_answer 503
start_burner
DB=$TMP/d.db
start_daemon "$DB" --flush-interval 1h --keep 1s --push "$RX_URL" --push-format pyroscope --push-retry-max 1s

# epochs, each flushed and tried (503) before the next begins
for i in 1 2 3 4 5; do
	n=$(rx_count)
	ctl --db "$DB" epoch
	rx_wait $((n + 1)) 120
done
# flushes prune what is past --keep (the newest three stay)
for ((i = 0; i < 300; i++)); do
	grep -q "deleted [0-9]* epochs\? older than --keep" "$DB/daemon.log" && break
	ctl --db "$DB" flush
	sleep 0.1
done
grep -q "deleted [0-9]* epochs\? older than --keep" "$DB/daemon.log" || fail "--keep deleted no epoch: $(tail -5 "$DB/daemon.log")"
for ((i = 0; i < 1200; i++)); do
	ctl --db "$DB" status
	d=$(status_val push-backlog | sed -E 's/.*; ([0-9]+) dropped.*/\1/')
	((d > 0)) && break
	sleep 0.1
done
((d > 0)) || fail "ctl status counts nothing dropped: $(status_val push-backlog)"
grep -Eq "push: dropped [0-9]+ samples? never sent: epochs? [0-9]" "$DB/daemon.log" || fail "the log does not say what was dropped: $(tail -5 "$DB/daemon.log")"
note "dropped: $(grep 'push: dropped' "$DB/daemon.log" | head -1 | sed 's/.*push: //')"

rx_answer 200
wait_pushed
ctl --db "$DB" flush
wait_pushed
ctl --db "$DB" status
flushed=$(($(status_val samples) - $(status_val in-memory | awk '{ print $1 }')))
dropped=$(status_val push-backlog | sed -E 's/.*; ([0-9]+) dropped.*/\1/')
sent=$(rx_samples)
written=$(flushed_samples)
((sent == written)) || fail "the server took $sent samples, the remaining epochs hold $written"
((sent + dropped == flushed)) || fail "taken $sent + dropped $dropped != flushed $flushed"
note "flushed $flushed = taken $sent + dropped $dropped"
stop_daemon "$DAEMON_PID"
