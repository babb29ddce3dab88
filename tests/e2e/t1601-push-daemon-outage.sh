#!/bin/bash
# tally daemon --push sends what each flush adds, from a thread of its own:
# while the server answers 503 for several flushes, the daemon keeps
# flushing (nothing waits on the server), says the error and the backlog in
# 'ctl status', tries again with a back-off, and once the server answers
# 200 sends what it missed: the samples the server took add up to exactly
# what the daemon wrote into its epochs, none twice, and each request it
# took decodes (go tool pprof) with its from/until within the daemon's life.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

((EUID == 0)) || skip "the daemon samples the whole system: needs root"
need_tool go golang-go
start_receiver "$TMP/rx"
start_burner
DB=$TMP/d.db
t0=$(date +%s)
start_daemon "$DB" --flush-interval 1h --push "$RX_URL" --push-format pyroscope --push-retry-max 1s --push-label run=t1601

# an ordinary flush, taken
ctl --db "$DB" flush
rx_wait 1 120
wait_pushed
note "first flush: $(push_status push-last)"

# the outage: every try answered 503, over three flushes
rx_answer 503
for i in 1 2 3; do
	n=$(rx_count)
	ctl --db "$DB" flush
	grep -q "flushed" "$TMP/ctl.out" || fail "flush $i during the outage: $(cat "$TMP/ctl.out")"
	rx_wait $((n + 1)) 120
done
push_status push-error
err=$(status_val push-error)
[[ $err == *"answered 503"* ]] || fail "ctl status during the outage says push-error '$err'"
b=$(status_val push-backlog | awk '{ print $1 }')
((b > 0)) || fail "ctl status during the outage says push-backlog '$(status_val push-backlog)'"
grep -q "push: .*answered 503" "$DB/daemon.log" || fail "the log does not say the 503: $(tail -5 "$DB/daemon.log")"
tries=$(($(rx_count) - $(rx_ok_count)))
note "outage: $tries tries answered 503, backlog $b samples, error: $err"

# the server back: the backlog goes, then one more ordinary flush
rx_answer 200
wait_pushed
ctl --db "$DB" flush
wait_pushed
grep -q "push: the server takes pushes again" "$DB/daemon.log" || fail "the log does not say the server is back"

sent=$(rx_samples)
written=$(flushed_samples)
((sent == written)) || fail "the server took $sent samples, the daemon wrote $written into its epochs"
# each request taken: one epoch's time, within the daemon's life, and the run's label
now=$(date +%s)
for f in "$RX"/req-*.json; do
	[[ $(rx_field "$f" status) == 200 ]] || continue
	from=$(rx_field "$f" query.from)
	until=$(rx_field "$f" query.until)
	((from >= t0 - 61 && until >= from && until <= now + 1)) || fail "$f: from=$from until=$until outside [$t0, $now]"
	[[ $(rx_field "$f" query.name) == "tally{host=$(hostname),run=t1601}" ]] || fail "$f: name=$(rx_field "$f" query.name)"
done
note "the server took $(rx_ok_count) requests holding $sent samples: what the daemon wrote ($written), none twice"
stop_daemon "$DAEMON_PID"
