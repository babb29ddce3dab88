#!/bin/bash
# the built-in tally profiler around a test gives the workload's own split:
# in its database, its text report and its HTML report, in the profiled
# (extra) iteration only, following the test's process tree; with -g the
# call-graph view is written too.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

split_in_db() {
	cat >split.ctl <<EOF
profilers add tally -F 2000
run -- $WORKLOADS/split_funcs 600
EOF
	job_ok split.ctl
	local d=results/split/split_funcs n
	[[ -f $d/profiling/tally.db/session ]] || fail "no database in $d/profiling: $(ls -R $d)"
	[[ $(sjson results/split/status.json "[i['profiled'] for i in s['tests'][0]['iterations']]") == '[false, true]' ]] ||
		fail "expected one unprofiled then one profiled iteration: $(sjson results/split/status.json "s['tests'][0]['iterations']")"
	# the profiled iteration's truth: the second run's lines
	awk '$1 == "truth"' $d/output | tail -n 3 >truth.txt
	report_json sym.json -i $d/profiling/tally.db --symbols
	check_shares func sym.json truth.txt 6 work_a work_b work_c
	grep -q work_a $d/profiling/tally.txt || fail "tally.txt names no work_a: $(head -c 1000 $d/profiling/tally.txt)"
	grep -qi '<html' $d/profiling/tally.html || fail "tally.html is no HTML page"
	[[ ! -e $d/profiling/tally-callgraph.txt ]] || fail "a call-graph view without -g"
	# only the profiled iteration was sampled: about 600 ms at 2 kHz, not 1200
	n=$(tjson sym.json total)
	between "$n" 500 1600 || fail "$n samples for one 600 ms iteration at 2 kHz (two iterations sampled?)"
	note "$n samples in the profiled iteration"
}

process_tree() {
	cat >tree.ctl <<EOF
profilers add tally -F 2000 -g
profilers only on
run --tag tree -- sh -c "'$WORKLOADS/split_funcs' 500; true"
EOF
	job_ok tree.ctl
	local d=results/tree/tree/profiling
	report_json tree.json -i $d/tally.db --symbols
	awk '$1 == "truth"' results/tree/tree/output >truth.txt
	check_shares func tree.json truth.txt 6 work_a work_b work_c
	[[ -s $d/tally-callgraph.txt ]] || fail "recorded with -g but no tally-callgraph.txt: $(ls $d)"
	grep -q work_a $d/tally-callgraph.txt || fail "the call-graph view names no work_a"
}

subtest "tally around a test gives its split" split_in_db
subtest "a grandchild of the test is profiled, -g writes the call graph" process_tree
