#!/bin/bash
# A job's hosts when things stop (docs/remote.md): a host that connects but
# never answers (its agent's requests hang) costs one --host-timeout, not
# 60 s a request, and is declared lost; the tests after
# it say that they went without it; ^C of a job on hosts still pulls,
# merges and reports every host's results (all-hosts.db, all-hosts.txt).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 2

hung_host() {
	# h2 connects, and its agent never answers a request (the installed
	# tally waits for ever on 'job agent ctl'; the probe and the agent's
	# start still work)
	local v
	v=$("$TALLY" --version)
	tally_ok job hosts --host h2
	printf '%s\n' '#!/bin/sh' 'case " $* " in *" agent ctl "*) exec sleep 1000 ;; esac' 'exec "$(dirname "$0")/tally.real" "$@"' >hung-tally
	host_sh h2 "d=~/.cache/tally-profilers/${v#tally }; mv \$d/tally \$d/tally.real && cat >\$d/tally && chmod 700 \$d/tally" <hung-tally
	printf '%s\n' "profilers add cmd uptime" "run --tag hang -- sleep 0.1" "run --tag next -- sleep 0.1" >hang.ctl
	local t0=$SECONDS el
	job_rc hang.ctl --host h1 --host h2 --host-timeout 3
	el=$((SECONDS - t0))
	((JOB_RC == 0)) || fail "exit $JOB_RC: $(cat job.err)"
	# the bound is the point: the first request waits --host-timeout (3 s),
	# then the host is lost and never asked again (60 s a request before)
	((el < 40)) || fail "the job took $el s with a hung host and --host-timeout 3"
	grep -q "host 'h2' is lost: no answer to 'start' within 3 s (--host-timeout)" results/hang/hang/status ||
		fail "h2 is not said lost: $(cat results/hang/hang/status)"
	grep -q "^profiling incomplete: .*host 'h2' is lost (since an earlier test): not profiled" results/hang/next/status ||
		fail "the next test does not say it went without h2: $(cat results/hang/next/status)"
	[[ $(sjson results/hang/status.json "s['tests'][1]['profiling']") == incomplete ]] || fail "status.json says the next test's profiling is complete"
	for t in hang next; do
		[[ -s results/hang/$t/profiling/h1/cmd-uptime.log ]] || fail "h1 has no results for $t beside the hung host"
	done
	note "$el s; $(tail -1 results/hang/next/status)"
}

interrupted() {
	printf '%s\n' "profilers add tally -F 499" "profilers only on" "run --tag long -- sleep 120.1507" "run --tag never -- true" >int.ctl
	"$TALLY" job run --host h1 int.ctl >int.out 2>int.err &
	local pid=$! rc=0 d=results/int/long/profiling
	wait_for_line int.out "^HOSTS long: recording on every host" 120
	kill -INT $pid
	wait $pid || rc=$?
	((rc == 130)) || fail "exit $rc after ^C, expected 130: $(cat int.err)"
	! grep -q "could not be merged" int.out int.err $d/../status || fail "the merge failed: $(cat $d/../status)"
	[[ -f $d/h1/tally.db/session ]] || fail "h1's results were not pulled after ^C: $(ls -R $d | head)"
	[[ -f $d/all-hosts.db/session && -s $d/all-hosts.txt ]] || fail "no all-hosts.db or all-hosts.txt after ^C: $(ls $d; cat $d/../status)"
	grep -q h1 $d/all-hosts.txt || fail "all-hosts.txt has no report of h1"
	note "after ^C: $(ls $d | tr '\n' ' ')"
}

subtest "a host that never answers is lost within the limit" hung_host
subtest "^C still merges what was pulled" interrupted
