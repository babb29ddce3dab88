#!/bin/bash
# tally job's tally profiler with --push sends each profiled run's database
# to the service (here the tests' own receiver) after its report: the
# samples the server took are those of the run's database, the functions
# the workload's, with the run's labels; a bad --push-format stops the job
# before any test runs, naming it.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

pushed_run() {
	need_tool go golang-go
	start_receiver "$TMP/rx"
	cat >push.ctl <<EOF
profilers add tally -F 2000 -g --push $RX_URL --push-format pyroscope --push-app ci --push-label suite=t1604
run -- $WORKLOADS/split_funcs 400
EOF
	job_ok push.ctl
	local db=results/push/split_funcs/profiling/tally.db
	[[ -f $db/session ]] || fail "no database: $(ls -R results/push)"
	(($(rx_count) == 1)) || fail "$(rx_count) requests for one profiled run"
	[[ $(rx_field "$RX/req-0001.json" query.name) == "ci{host=$(session_key $db host),suite=t1604}" ]] ||
		fail "name=$(rx_field "$RX/req-0001.json" query.name)"
	report_json j.json -i $db --samples
	local n
	n=$(pprof_count "$RX/req-0001.profile")
	[[ $n == $(tjson j.json total) ]] || fail "the server took $n samples, the run's database holds $(tjson j.json total)"
	gopprof_ok top.txt -top "$RX/req-0001.profile"
	grep -q work_a top.txt || fail "no work_a in what was pushed: $(head -20 top.txt)"
	note "one run, $n samples pushed"
}

bad_format() {
	cat >bad.ctl <<EOF
profilers add tally --push http://127.0.0.1:1 --push-format zipkin
run -- $WORKLOADS/split_funcs 100
EOF
	job_rc bad.ctl
	((JOB_RC != 0)) || fail "a job with --push-format zipkin ran"
	grep -q "unknown --push-format 'zipkin'" "$TMP/job.err" || fail "stderr: $(cat "$TMP/job.err")"
}

subtest "a profiled run's database pushed after its report" pushed_run
subtest "a bad --push-format stops the job before any test" bad_format
