#!/bin/bash
# ^C cuts a hung plugin step short: a first ^C ends the step that is running
# (version, start, stop, report: SIGTERM, then SIGKILL) and the job ends
# INTERRUPTED long before the step's own limit (60 s, report 10 min); the
# wait for another job's setup lock ends too (it waited for good); after a
# second ^C nothing waits: a stop that ignores SIGTERM is killed and no
# report runs. Nothing a step started is left running.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# hang STEP [IGNORE]: a plugin 'hang' that hangs at STEP after writing
# $TMP/at-STEP; it notes in $TMP/hang.log that it got SIGTERM (and ignores
# it with IGNORE)
hang() {
	rm -rf plugins/hang "$TMP"/at-* "$TMP/hang.log"
	mkdir -p plugins/hang
	cat >plugins/hang/profiler <<EOF
#!/bin/bash
if [ "\$1" = version ] && [ "$1" != version ]; then echo "$1"; exit 0; fi
if [ "\$1" = "$1" ]; then
	trap 'echo "term at $1" >>"$TMP/hang.log"; [ -n "${2:-}" ] || exit 1' TERM
	echo "\$\$" >"$TMP/at-$1"
	while :; do sleep 1009.1109 & wait \$!; done
fi
exit 0
EOF
	chmod +x plugins/hang/profiler
}

# ends_within PID SECS WHAT: PID (a job) exits within SECS (the step's own
# limit is far above), else fail
ends_within() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		alive "$1" || return 0
		sleep 0.05
	done
	fail "$3: the job still runs $2 s after ^C: $(ps -o pid,stat,etime,args --ppid "$1" -p "$1" 2>&1)"
}

# one_step STEP CONTROL: the job hangs at STEP; a ^C there ends it
one_step() {
	local step=$1 pid rc=0
	hang "$step"
	printf '%s\n' "$2" >$step.ctl
	"$TALLY" job run --profilers-path "$TMP/plugins" $step.ctl >$step.out 2>$step.err </dev/null &
	pid=$!
	track_pid $pid
	wait_for_line "$TMP/at-$step" . 30
	kill -INT $pid
	ends_within $pid 30 "a hung $step"
	wait $pid || rc=$?
	((rc == 130)) || fail "a job interrupted at $step exited $rc: $(cat $step.err)"
	grep -qx "term at $step" hang.log || fail "the $step step did not get SIGTERM: $(cat hang.log 2>&1)"
	no_leftovers 'sleep 1009\.1109'
}

start_stop_report() {
	local step d
	for step in start stop report; do
		one_step $step 'profilers add hang
run sleeptest 0'
		d=results/$step/sleeptest
		grep -qx "profiling incomplete: profiler 'hang' failed at $step: interrupted (ended by ^C)" $d/status ||
			fail "status after ^C at $step: $(cat $d/status)"
		[[ $(sjson results/$step/status.json "s['status']") == INTERRUPTED ]] || fail "status.json after ^C at $step"
	done
	# a ^C at start also ends the test it was starting for
	head -n 1 results/start/sleeptest/status | grep -q '^FAIL .*(interrupted)' || fail "$(cat results/start/sleeptest/status)"
}

version() {
	one_step version 'profilers add hang
run -- touch '"$TMP"'/ran'
	grep -q "^tally: 'version.ctl' line 1: profiler 'hang' failed at version: interrupted (ended by ^C)$" version.err ||
		fail "stderr: $(cat version.err)"
	[[ ! -e ran ]] || fail "a test ran after ^C at version"
}

setup_lock() {
	# job A hangs in setup, holding the lock; job B waits for it
	hang setup
	printf 'profilers add hang\nrun sleeptest 0\n' >a.ctl
	cp a.ctl b.ctl
	"$TALLY" job run --profilers-path "$TMP/plugins" a.ctl >a.out 2>a.err </dev/null &
	local a=$! b rc=0
	track_pid $a
	wait_for_line "$TMP/at-setup" . 30
	rm "$TMP/at-setup"
	"$TALLY" job run --profilers-path "$TMP/plugins" b.ctl >b.out 2>b.err </dev/null &
	b=$!
	track_pid $b
	# B is waiting when it holds the lock file open and has not run setup
	local i
	for ((i = 0; i < 600; i++)); do
		ls -l /proc/$b/fd 2>/dev/null | grep -q '\.setup-lock$' && break
		sleep 0.05
	done
	((i < 600)) || fail "job B never opened the setup lock: $(cat b.err)"
	sleep 0.2 # B inside its wait (it has not got the lock: A holds it)
	kill -INT $b
	ends_within $b 30 "the wait for another job's setup lock"
	wait $b || rc=$?
	((rc == 130)) || fail "job B exited $rc: $(cat b.err)"
	grep -q "profiler 'hang' failed at setup: interrupted (ended by ^C) while another job held '$TMP/state/hang/.setup-lock'" b.err ||
		fail "job B: $(cat b.err)"
	[[ ! -e $TMP/at-setup ]] || fail "job B ran setup while job A held the lock"
	kill -INT $a
	ends_within $a 30 "job A's hung setup"
	rc=0
	wait $a || rc=$?
	((rc == 130)) || fail "job A exited $rc: $(cat a.err)"
	no_leftovers 'sleep 1009\.1109'
}

second_int() {
	# the first ^C ends the test; a profiler's stop then hangs, ignoring
	# SIGTERM; the second ^C kills it, and no report runs (the other
	# profiler's, stopped first, included)
	hang stop ignore
	mkdir -p plugins/rep
	printf '#!/bin/sh\n[ "$1" = version ] && echo 1\n[ "$1" = report ] && touch "%s/reported"\nexit 0\n' "$TMP" >plugins/rep/profiler
	chmod +x plugins/rep/profiler
	printf 'profilers add hang\nprofilers add rep\nprofilers only on\nrun --tag t -- sh -c "echo started; exec sleep 1008.1109"\n' >two.ctl
	"$TALLY" job run --profilers-path "$TMP/plugins" two.ctl >two.out 2>two.err </dev/null &
	local pid=$! rc=0
	track_pid $pid
	wait_for_line results/two/t/output '^started$' 30
	kill -INT $pid
	wait_for_line "$TMP/at-stop" . 30
	kill -INT $pid
	ends_within $pid 30 "a stop that ignores SIGTERM, after a second ^C"
	wait $pid || rc=$?
	((rc == 130)) || fail "exit $rc: $(cat two.err)"
	[[ ! -e reported ]] || fail "a report ran after the second ^C"
	grep -q "profiler 'rep' failed at report: not run (a second ^C)" results/two/t/status || fail "status: $(cat results/two/t/status)"
	grep -q "profiler 'hang' failed at stop: interrupted (ended by ^C)" results/two/t/status || fail "status: $(cat results/two/t/status)"
	no_leftovers 'sleep 1009\.1109'
	no_leftovers 'sleep 1008\.1109'
}

subtest "a first ^C ends a hung start, stop or report" start_stop_report
subtest "a first ^C ends a hung version step" version
subtest "^C ends the wait for another job's setup lock" setup_lock
subtest "after a second ^C nothing waits" second_int
