#!/bin/bash
# the results: RESULTS/TAG/{status,output,profiling/} per run line with tags
# made unique, ./results/JOBNAME by default, never overwritten; the extra
# profiled iteration (profile-only) against 'profilers only on'
# (iteration.N/); status.json; GOOD and FAIL with exit status and time; the
# job's exit status; --timeout.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

layout() {
	cat >lay.ctl <<EOF
# comments and blank lines are fine

run sleeptest 0.1
run sleeptest 0.1    # a repeat gets .2
run --tag mine -- echo "hello   world"
run -- $WORKLOADS/exitcode 3
EOF
	job_rc lay.ctl
	((JOB_RC == 1)) || fail "a job with a failed test exited $JOB_RC, expected 1; $(cat "$TMP/job.err")"
	local r=results/lay
	[[ -d $r/sleeptest && -d $r/sleeptest.2 && -d $r/mine && -d $r/exitcode ]] || fail "tags: $(ls $r)"
	[[ $(cat $r/mine/output) == "hello   world" ]] || fail "output of the test: '$(cat $r/mine/output)'"
	read -r word _ code _ time _ <$r/sleeptest/status
	[[ $word == GOOD && $code == 0 ]] || fail "sleeptest status: $(cat $r/sleeptest/status)"
	between "$time" 0.09 0.5 || fail "sleeptest 0.1 took $time s"
	head -n 1 $r/exitcode/status | grep -Eq '^FAIL exit 3 time [0-9.]+ s \(exit status 3\)$' ||
		fail "exitcode status: $(cat $r/exitcode/status)"
	[[ ! -e $r/mine/profiling ]] || fail "profiling/ without profilers"
	[[ $(sjson $r/status.json "s['status']") == FAIL ]] || fail "job status $(sjson $r/status.json "s['status']")"
	[[ $(sjson $r/status.json "[t['tag'] + ':' + t['status'] for t in s['tests']]") == '["sleeptest:GOOD", "sleeptest.2:GOOD", "mine:GOOD", "exitcode:FAIL"]' ]] ||
		fail "status.json tests: $(sjson $r/status.json "s['tests']")"
	[[ $(sjson $r/status.json "s['tests'][3]['exit']") == 3 ]] || fail "status.json has not the exit status"
	cmp -s lay.ctl $r/control || fail "the control file is not kept beside the results"
	grep -q "4 tests, 1 failed: results in 'results/lay'" "$TMP/job.out" || fail "summary: $(cat "$TMP/job.out")"
}

all_good_exit_0() {
	printf 'run sleeptest 0\n' >good.ctl
	job_ok good.ctl
	[[ $(sjson results/good/status.json "s['status']") == GOOD ]] || fail "job status not GOOD"
}

never_overwritten() {
	printf 'run -- echo first\n' >once.ctl
	job_ok once.ctl
	printf 'run -- echo second\n' >once.ctl
	expect_fail_with "results 'results/once' already exist: give another -r DIR" "$TALLY" job run once.ctl
	[[ $(cat results/once/echo/output) == first ]] || fail "the old results were touched"
	job_ok once.ctl -r other/place
	[[ $(cat other/place/echo/output) == second ]] || fail "-r was not used"
}

profile_only() {
	# one unprofiled iteration per --iterations, then one profiled
	cat >po.ctl <<EOF
profilers add cmd echo profiled
run --iterations 2 -- sh -c 'echo run'
profilers only on
run --iterations 2 --tag only -- sh -c 'echo run'
profilers only off
profilers delete cmd
run --tag none -- sh -c 'echo run'
EOF
	job_ok po.ctl
	local r=results/po
	[[ $(grep -c run $r/sh/output) == 3 ]] || fail "--iterations 2 with a profiler ran $(grep -c run $r/sh/output) times, expected 2 + 1 profiled"
	[[ $(sjson $r/status.json "[i['profiled'] for i in s['tests'][0]['iterations']]") == '[false, false, true]' ]] ||
		fail "iterations: $(sjson $r/status.json "s['tests'][0]['iterations']")"
	[[ -f $r/sh/profiling/cmd-echo.log && ! -e $r/sh/profiling/iteration.1 ]] || fail "profile-only: $(ls -R $r/sh/profiling)"
	[[ $(grep -c run $r/only/output) == 2 ]] || fail "'profilers only on' with --iterations 2 ran $(grep -c run $r/only/output) times"
	[[ -f $r/only/profiling/iteration.1/cmd-echo.log && -f $r/only/profiling/iteration.2/cmd-echo.log ]] ||
		fail "'profilers only on': $(ls -R $r/only/profiling)"
	[[ $(sjson $r/status.json "[i['profiled'] for i in s['tests'][1]['iterations']]") == '[true, true]' ]] || fail "only on: not all profiled"
	[[ $(grep -c run $r/none/output) == 1 && ! -e $r/none/profiling ]] || fail "after 'profilers delete cmd' the test was still profiled"
}

default_place() {
	mkdir sub
	printf 'run sleeptest 0\n' >sub/nightly.control
	(cd sub && job_ok nightly.control)
	[[ -f sub/results/nightly/sleeptest/status ]] || fail "default results: $(find sub -maxdepth 3)"
}

timeout() {
	cat >to.ctl <<EOF
run --timeout 300ms -- sleep 30.1102
run sleeptest 0
EOF
	local t0 t1
	t0=$(date +%s.%N)
	job_rc to.ctl
	t1=$(date +%s.%N)
	((JOB_RC == 1)) || fail "a timed-out test: job exited $JOB_RC"
	fcmp "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "<" 5 || fail "the 300 ms time limit did not end 'sleep 30' soon"
	head -n 1 results/to/sleep/status | grep -q '^FAIL .*(timed out after 0.3 s)' || fail "status: $(cat results/to/sleep/status)"
	[[ $(sjson results/to/status.json "s['tests'][1]['status']") == GOOD ]] || fail "the next test did not run after a time-out"
	no_leftovers "^sleep 30\.1102$"
}

subtest "layout, tags, GOOD and FAIL, exit status 1" layout
subtest "all good: exit status 0" all_good_exit_0
subtest "results are never overwritten" never_overwritten
subtest "the extra profiled iteration, profilers only on" profile_only
subtest "results/JOBNAME by default" default_place
subtest "--timeout" timeout
