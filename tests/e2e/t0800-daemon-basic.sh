#!/bin/bash
# tally daemon: detaches with a pid file; a workload with a known split run
# while it samples shows that split after `ctl flush`; status says what runs;
# the directory and socket are private; one daemon per database (the second
# is refused with the first's pid); SIGTERM writes what is in memory and
# exits, removing the socket; --foreground logs to stderr.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

wl=$(uniq_copy split_funcs)
name=$(basename "$wl")
start_daemon db --flush-interval 60s -F 4000
grep -q "daemon pid $DAEMON_PID" "$TMP/daemon.err" || fail "the daemon's start line names no pid: $(cat "$TMP/daemon.err")"
[[ $(stat -c %a db) == 700 ]] || fail "the database directory is mode $(stat -c %a db), expected 700"
[[ -S db/ctl.sock ]] || fail "no socket db/ctl.sock"
[[ $(stat -c %a db/ctl.sock) == 600 ]] || fail "the socket is mode $(stat -c %a db/ctl.sock), expected 600"

ctl --db db status
[[ $(status_val state) == running ]] || fail "status: state is '$(status_val state)'; status: $(cat "$TMP/ctl.out")"
[[ $(status_val pid) == "$DAEMON_PID" ]] || fail "status: pid '$(status_val pid)', the pid file says $DAEMON_PID"
[[ $(status_val events) == cpu-clock ]] || fail "status: events '$(status_val events)'"
grep -Eq '^sampling: frequency 4000 Hz' "$TMP/ctl.out" || fail "status: no 'sampling: frequency 4000 Hz'; $(cat "$TMP/ctl.out")"
grep -Eq '^cpu 0: on' "$TMP/ctl.out" || fail "status: no 'cpu 0: on'; $(cat "$TMP/ctl.out")"
for k in samples lost memory db-size epoch uptime writing; do
	[[ -n $(status_val $k) ]] || fail "status has no '$k:' line: $(cat "$TMP/ctl.out")"
done
epoch=$(status_val epoch | cut -d' ' -f1)
[[ $epoch =~ ^[0-9]{12}(-[0-9]+)?$ ]] || fail "status: epoch '$epoch' is not YYYYMMDDHHMM[-N]"
[[ -d db/$epoch ]] || fail "the current epoch '$epoch' has no directory in db: $(ls db)"
note "status: $(tr '\n' ';' <"$TMP/ctl.out" | head -c 400)"

"$wl" 800 >wl.out
ctl --db db flush
grep -Eq "^flushed [0-9]+ samples? into epoch $epoch" "$TMP/ctl.out" || fail "ctl flush said: $(cat "$TMP/ctl.out")"
report_json r.json -i db --symbols --image "$name"
check_split func r.json wl.out work_a work_b work_c
n1=$(db_total db)
note "after the workload: $n1 samples in the database"

# one daemon per database
expect_fail_with "in use by tally daemon pid $DAEMON_PID" "$TALLY" daemon --db db --foreground

# SIGTERM: what came after the last flush is written, then it exits
"$wl" 200 >/dev/null
stop_daemon "$DAEMON_PID"
[[ ! -e db/ctl.sock ]] || fail "the socket is still there after the daemon exited"
n2=$(db_total db)
((n2 > n1)) || fail "SIGTERM did not flush: $n2 samples after, $n1 before"
grep -q "stopped (flushed" db/daemon.log || fail "the log does not say the daemon stopped: $(tail -3 db/daemon.log)"
note "SIGTERM flushed: $n1 -> $n2 samples"

# a restart continues the database in a new epoch; --foreground logs to stderr
"$TALLY" daemon --db db --foreground --flush-interval 100ms -v 2>fg.err &
fg=$!
track_pid $fg
wait_for_line fg.err 'started: events cpu-clock'
wait_for_line fg.err 'flush \(interval\)'
kill -INT $fg
wait $fg || fail "the --foreground daemon exited $? on SIGINT"
grep -q 'stopped' fg.err || fail "--foreground: no 'stopped' line on stderr: $(tail -3 fg.err)"
n3=$(db_total db)
((n3 >= n2)) || fail "the restarted daemon lost samples: $n3 < $n2"
nep=$(find db -maxdepth 1 -regextype egrep -regex '.*/[0-9]{12}(-[0-9]+)?' | wc -l)
((nep == 2)) || fail "after a restart the database has $nep epochs, expected 2: $(ls db)"
note "restart: $nep epochs, $n3 samples"
