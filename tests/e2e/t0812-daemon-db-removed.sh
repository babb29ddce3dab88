#!/bin/bash
# A daemon is never left running behind a test or a removed database: a
# daemon whose database directory is removed stops by itself (it can write
# nothing more there and nobody can reach its socket), and a test that
# started a daemon without tracking it (a start cut short, a subshell) has it
# killed by lib.sh's cleanup all the same.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

((EUID == 0)) || skip "the daemon samples the whole system: needs root"

gone() { ! alive "$1"; }

db_removed() {
	start_daemon "$TMP/rm.db" --flush-interval 1h
	local pid=$DAEMON_PID
	rm -rf "$TMP/rm.db"
	wait_state() { echo "pid $pid: $(cat "/proc/$pid/status" 2>/dev/null | grep -E '^(State|Threads)' | tr '\n' ' ')"; }
	wait_for 30 "the daemon (pid $pid) stops once its database directory is removed" gone "$pid"
	note "the daemon (pid $pid) stopped once its database directory was removed"
}

untracked() {
	# a test of its own, whose daemon's database is outside that test's
	# directory (so that only the cleanup can stop it): it starts the daemon
	# and ends without stopping it or saying its pid
	mkdir -p "$TMP/inner"
	cat >"$TMP/inner.sh" <<'INNER'
. "$SRCDIR/tests/e2e/lib.sh"
"$TALLY" daemon --db "$OUTER/in.db" --flush-interval 1h >/dev/null 2>&1 || fail "the daemon did not start"
INNER
	local rc=0
	OUTER=$TMP TMPDIR=$TMP/inner bash "$TMP/inner.sh" >"$TMP/inner.out" 2>"$TMP/inner.err" || rc=$?
	((rc == 0)) || fail "the inner test exited $rc: $(head -c 1000 "$TMP/inner.out" "$TMP/inner.err")"
	[[ -s $TMP/in.db/daemon.pid ]] || fail "the inner test's daemon wrote no pid file"
	local pid
	pid=$(cat "$TMP/in.db/daemon.pid")
	track_pid "$pid"
	wait_state() { echo "pid $pid: $(cat "/proc/$pid/status" 2>/dev/null | grep -E '^(State|Threads)' | tr '\n' ' '); inner's stderr: $(tail -c 500 "$TMP/inner.err")"; }
	wait_for 10 "the daemon (pid $pid) the inner test left running is killed by its cleanup" gone "$pid"
	grep -q "cleanup: inner.*left pid $pid running" "$TMP/inner.err" || fail "the cleanup did not name the daemon it killed: $(head -c 1000 "$TMP/inner.err")"
	note "the cleanup killed the daemon (pid $pid) the inner test left, and said so"
}

subtest "a daemon stops when its database directory is removed" db_removed
subtest "a test's cleanup kills a daemon it never tracked" untracked
