#!/bin/bash
# kill -9 of 'tally job run' (the OOM killer, a crash) leaves nothing
# running: the test, what it started, the cmd profiler and a plugin's
# daemon in a session of its own end with the job (its watcher ends them),
# and status.json says the job died instead of RUNNING; with the watcher
# killed too, the job's own children still end with it, and the next run
# finds the results of a job that died (nobody holds their lock) and says
# so; a job killed before its first test leaves no results to refuse a
# rerun.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# what the test leaves, were tally to leave it: ended at the end by pid
at_exit 'for p in $(pgrep -f "sleep 10[0-9][0-9]\.1110|$TMP/ticker|$TMP/plugins/"); do kill -KILL $p; done 2>/dev/null || true'

mkdir -p plugins/daemon plugins/slowset
cat >plugins/daemon/profiler <<EOF
#!/bin/sh
case \$1 in
version) echo 1 ;;
start) setsid sleep 1002.1110 </dev/null >/dev/null 2>&1 & echo started >"\$TALLY_PROFDIR/daemon.txt" ;;
esac
exit 0
EOF
cat >plugins/slowset/profiler <<EOF
#!/bin/sh
case \$1 in
version) echo 1 ;;
setup) echo setting-up >"$TMP/at-setup"; exec sleep 1003.1110 ;;
esac
exit 0
EOF
chmod +x plugins/daemon/profiler plugins/slowset/profiler
cat >ticker <<'EOF'
#!/bin/sh
while :; do echo tick; sleep 0.05; done
EOF
chmod +x ticker

# gone PATTERN...: within a bound, no process matches any PATTERN
gone() {
	local i p left
	for ((i = 0; i < 400; i++)); do
		left=
		for p in "$@"; do
			left+=$(pgrep -f -- "$p" || true)
		done
		[[ -z $left ]] && return 0
		sleep 0.05
	done
	for p in "$@"; do
		no_leftovers "$p"
	done
}

# start_job NAME: the job of k.ctl as NAME, in the background, up to its test's start; JOB its pid
start_job() {
	cat >$1.ctl <<EOF
profilers add cmd $TMP/ticker
profilers add daemon
profilers only on
run --tag t -- sh -c 'echo started; sleep 1000.1110 & exec sleep 1001.1110'
EOF
	"$TALLY" job run --profilers-path "$TMP/plugins" $1.ctl >$1.out 2>$1.err </dev/null &
	JOB=$!
	wait_for_line results/$1/t/output '^started$' 30
	wait_for_line results/$1/t/profiling/daemon.txt started 30
}

killed() {
	start_job k
	kill -KILL $JOB
	wait $JOB 2>/dev/null || true
	gone 'sleep 1000\.1110' 'sleep 1001\.1110' 'sleep 1002\.1110' "$TMP/ticker"
	[[ $(sjson results/k/status.json "s['status']") == ERROR ]] || fail "status.json after kill -9: $(cat results/k/status.json)"
	sjson results/k/status.json "s['error']" | grep -q "^the job (pid $JOB) died before it finished while test 't' ran (killed" ||
		fail "status.json's error: $(sjson results/k/status.json "s['error']")"
	flock -n results/k true || fail "the results of a dead job are still locked"
}

killed_with_watcher() {
	start_job k2
	local w
	w=$(pgrep -P $JOB -x tally-watch) || fail "no watcher among the job's children: $(ps -o pid,comm,args --ppid $JOB)"
	kill -KILL $w
	kill -KILL $JOB
	wait $JOB 2>/dev/null || true
	# the job's own children end with it (the test, cmd); what they started is lost with the watcher
	gone 'sleep 1001\.1110' "$TMP/ticker"
	[[ $(sjson results/k2/status.json "s['status']") == RUNNING ]] || fail "status.json: $(sjson results/k2/status.json "s['status']")"
	flock -n results/k2 true || fail "the results of a dead job are still locked"
	expect_fail_with "^tally: results 'results/k2' already exist, of a job that died before it finished \(its status.json said RUNNING, now ERROR\): give another -r DIR or move them away$" \
		"$TALLY" job run --profilers-path "$TMP/plugins" k2.ctl
	[[ $(sjson results/k2/status.json "s['status']") == ERROR ]] || fail "status.json not marked: $(sjson results/k2/status.json "s['status']")"
	sjson results/k2/status.json "s['error']" | grep -q "found by the next run" || fail "$(sjson results/k2/status.json "s['error']")"
	# a job still running is told apart from a dead one
	"$TALLY" job run --profilers-path "$TMP/plugins" -r live k2.ctl >live.out 2>&1 </dev/null &
	local live=$!
	wait_for_line live/t/output '^started$' 30
	expect_fail_with "^tally: results 'live' are being written by a job that still runs: give another -r DIR$" \
		"$TALLY" job run --profilers-path "$TMP/plugins" -r live k2.ctl
	kill -INT $live
	wait $live || true
}

killed_in_setup() {
	printf 'profilers add slowset\nrun sleeptest 0\n' >s.ctl
	"$TALLY" job run --profilers-path "$TMP/plugins" s.ctl >s.out 2>s.err </dev/null &
	JOB=$!
	wait_for_line "$TMP/at-setup" . 30
	kill -KILL $JOB
	wait $JOB 2>/dev/null || true
	gone 'sleep 1003\.1110'
	local i
	for ((i = 0; i < 200; i++)); do
		[[ -e results/s ]] || break
		sleep 0.05
	done
	[[ ! -e results/s ]] || fail "a job killed before its first test left its results: $(ls -A results/s)"
}

subtest "kill -9: nothing left running, status.json says it died" killed
subtest "kill -9 of the job and its watcher: the next run says it died" killed_with_watcher
subtest "kill -9 before the first test: no results left" killed_in_setup
