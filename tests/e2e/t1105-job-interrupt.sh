#!/bin/bash
# ^C stops the test, stops and reports the profilers and leaves the results
# whole (status, status.json INTERRUPTED, exit 130, later tests not run); a
# test that fails or times out is FAIL with its profilers still stopped and
# reported; nothing a test or a profiler started is left running after the
# job, whatever happened.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# a plugin whose start leaves a process behind that its stop never ends
mkdir -p plugins/leaky
cat >plugins/leaky/profiler <<'EOF'
#!/bin/sh
case $1 in
version) echo 1 ;;
start) sleep 1000.1105 >/dev/null 2>&1 </dev/null & echo started >"$TALLY_PROFDIR/leaky.txt" ;;
esac
exit 0
EOF
chmod +x plugins/leaky/profiler
cat >ticker <<'EOF'
#!/bin/sh
while :; do echo tick; sleep 0.05; done
EOF
chmod +x ticker

interrupted() {
	cat >int.ctl <<EOF
profilers add tally -F 500
profilers add cmd $TMP/ticker
profilers add leaky
profilers only on
run --tag long -- sh -c 'echo started; sleep 998.1105 & sleep 999.1105'
run --tag never sleeptest 0
EOF
	"$TALLY" job run --profilers-path "$TMP/plugins" int.ctl >int.out 2>int.err &
	local pid=$! rc=0 t0 t1
	wait_for_line results/int/long/output '^started$' 10
	sleep 0.3
	t0=$(date +%s.%N)
	kill -INT $pid
	wait $pid || rc=$?
	t1=$(date +%s.%N)
	((rc == 130)) || fail "an interrupted job exited $rc, expected 130: $(cat int.err)"
	fcmp "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "<" 8 || fail "the job took too long to stop after ^C"
	grep -q "^tally: interrupted: the results so far are in 'results/int'" int.err || fail "stderr: $(cat int.err)"
	local d=results/int/long
	head -n 1 $d/status | grep -q '^FAIL .*(interrupted)' || fail "status of the interrupted test: $(cat $d/status)"
	grep -qx 'profiling complete' $d/status || fail "profilers not stopped and reported after ^C: $(cat $d/status)"
	[[ -f $d/profiling/tally.db/session && -s $d/profiling/tally.txt && -s $d/profiling/tally.html ]] ||
		fail "the tally profiler was not stopped and reported: $(ls $d/profiling)"
	grep -q tick $d/profiling/cmd-ticker.log || fail "no cmd log"
	[[ $(sjson results/int/status.json "s['status']") == INTERRUPTED ]] || fail "status.json: $(sjson results/int/status.json "s['status']")"
	[[ $(sjson results/int/status.json "len(s['tests'])") == 1 && ! -e results/int/never ]] || fail "a test after ^C ran"
	"$TALLY" report -i $d/profiling/tally.db >/dev/null 2>rep.err || fail "the database after ^C does not read: $(cat rep.err)"
	no_leftovers "^sleep 999\.1105$"
	no_leftovers "^sleep 998\.1105$"
	no_leftovers "^sleep 1000\.1105$"
	no_leftovers "$TMP/ticker"
}

fail_and_timeout() {
	cat >ft.ctl <<EOF
profilers add tally -F 500
profilers add cmd $TMP/ticker
profilers add leaky
profilers only on
run --tag fails -- sh -c 'sleep 997.1105 & exit 3'
run --tag slow --timeout 300ms -- sleep 996.1105
EOF
	job_rc ft.ctl --profilers-path "$TMP/plugins"
	((JOB_RC == 1)) || fail "failed tests: job exited $JOB_RC"
	local t
	for t in fails slow; do
		head -n 1 results/ft/$t/status | grep -q '^FAIL ' || fail "$t: $(cat results/ft/$t/status)"
		grep -qx 'profiling complete' results/ft/$t/status || fail "$t: profilers not stopped and reported: $(cat results/ft/$t/status)"
		[[ -f results/ft/$t/profiling/tally.db/session && -s results/ft/$t/profiling/tally.txt && -f results/ft/$t/profiling/leaky.txt ]] ||
			fail "$t: $(ls results/ft/$t/profiling)"
		grep -q tick results/ft/$t/profiling/cmd-ticker.log || fail "$t: no cmd log"
	done
	head -n 1 results/ft/fails/status | grep -q '^FAIL exit 3 ' || fail "fails: $(cat results/ft/fails/status)"
	head -n 1 results/ft/slow/status | grep -q '(timed out after 0.3 s)' || fail "slow: $(cat results/ft/slow/status)"
	no_leftovers "^sleep 997\.1105$"
	no_leftovers "^sleep 996\.1105$"
	no_leftovers "^sleep 1000\.1105$"
	no_leftovers "$TMP/ticker"
}

failed_unprofiled() {
	# the default mode: a test failing in its unprofiled iteration is not profiled, and says so
	printf 'profilers add cmd %s\nrun -- false\n' "$TMP/ticker" >fu.ctl
	job_rc fu.ctl
	((JOB_RC == 1)) || fail "exit $JOB_RC"
	grep -qx 'profiling not run: the test failed before its profiled iteration' results/fu/false/status ||
		fail "status: $(cat results/fu/false/status)"
	[[ $(sjson results/fu/status.json "s['tests'][0]['profiling']") == "not run" ]] || fail "status.json profiling"
}

subtest "^C leaves the results whole" interrupted
subtest "a failed or timed-out test still has its profilers stopped and reported" fail_and_timeout
subtest "a test failing before its profiled iteration" failed_unprofiled
