#!/bin/bash
# tally job run --host on two test hosts (tests/e2e/hosts.sh): the profilers
# run on each host through its agent, all started before the test and
# stopped after it; each host's results come back into profiling/HOST/ and
# the host's copy goes once they are checked. The hosts share this machine's
# kernel, so `tally -a` on each sees the local workload: each host's database
# gives the workload's own split. A remote root and profiler arguments
# holding spaces, quotes, ';' and '$()' reach the hosts as data, never run.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 2
W=$TMP/split_funcs_$$
cp "$WORKLOADS/split_funcs" "$W"

two_hosts() {
	# h1 by --host, h2 by the control file
	cat >two.ctl <<EOF
hosts h2
profilers add tally -a -F 1999
run --tag split -- $W 800
EOF
	job_ok two.ctl --host h1
	local d=results/two/split h left p
	awk '$1 == "truth"' $d/output | tail -n 3 >truth.txt
	[[ -s truth.txt ]] || fail "the workload printed no truth: $(head -c 500 $d/output)"
	for h in h1 h2; do
		[[ -f $d/profiling/$h/tally.db/session ]] || fail "no database from $h: $(ls -R $d/profiling | head -20)"
		report_json $h.json -i $d/profiling/$h/tally.db --symbols --image "${W##*/}"
		check_shares func $h.json truth.txt 6 work_a work_b work_c
		# checked here, so gone there
		left=$(host_sh $h "find ~/.cache/tally-profilers -path '*/results/*' -type f | wc -l")
		[[ $left == 0 ]] || fail "$h still holds $left result files after the pull"
	done
	# one view of both: summed, each host's samples under its label
	[[ -f $d/profiling/all-hosts.db/session ]] || fail "no all-hosts.db: $(ls $d/profiling)"
	for h in h1 h2; do
		report_json all-$h.json -i $d/profiling/all-hosts.db --label host=$h --image "${W##*/}"
		[[ $(tjson all-$h.json total) == $(tjson $h.json total) ]] ||
			fail "all-hosts.db under host=$h holds $(tjson all-$h.json total) samples of the workload, $h's own database $(tjson $h.json total)"
		grep -q "$h" $d/profiling/all-hosts.txt || fail "all-hosts.txt has no report of $h"
	done
	[[ $(sjson results/two/status.json "s['tests'][0]['profiling']") == complete ]] ||
		fail "profiling not complete: $(cat $d/status)"
	# the agents are gone when the job ends, their directories too
	for h in h1 h2; do
		[[ $(host_sh $h "ls ~/.cache/tally-profilers/agents 2>/dev/null | wc -l") == 0 ]] || fail "$h: an agent directory is left"
		for p in $(ip netns pids "${HOST_NS[${h#h} - 1]}"); do
			tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep 'job agent start' >/dev/null && fail "$h: an agent still runs (pid $p)"
		done
	done
	note "h1 and h2 each gave the workload's split; results pulled, the hosts' copies and agents gone"
}

metachars() {
	# a root whose name would run 'touch' in a shell (no '/': it is one directory)
	local root="/tmp/r o'o;t\$(touch pwned-root)\`touch pwned-bq\`" f
	printf '%s\n' "profilers add cmd sleep '30;\$(touch /tmp/pwned-arg)' '\`touch /tmp/pwned-bq\`'" \
		"run --tag meta -- true" >meta.ctl
	job_rc meta.ctl --host h1 --remote-root "$root"
	for f in /tmp/pwned-arg /tmp/pwned-bq pwned-root pwned-bq /root/pwned-root /root/pwned-bq; do
		host_sh h1 "test ! -e $f" || fail "the host ran what a name held: $f exists there"
		[[ ! -e $f ]] || fail "this machine ran what a name held: $f"
	done
	host_sh h1 "ls -d /tmp/r*/*/tally" | grep -xF "$root/$("$TALLY" --version | cut -d' ' -f2)/tally" >/dev/null ||
		fail "nothing installed under the root with metacharacters: $(cat job.out job.err)"
	[[ -d results/meta/meta/profiling/h1 ]] || fail "no results from h1: $(ls -R results/meta | head)"
	note "a remote root and arguments with spaces, quotes, ';' and \$() were data on both sides (job exit $JOB_RC)"
}

subtest "two hosts profile a workload with a known split" two_hosts
subtest "names with shell metacharacters stay data" metachars
