#!/bin/bash
# What a job leaves on its hosts when it is killed (docs/remote.md): its
# agents hold a lease (they end, with what they started, when the job has not
# asked for that long); an agent killed takes its profilers' processes with
# it; the next job removes the agents' directories and the local
# /tmp/tally-ssh-PID-* that a dead job left.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 1
NS=${HOST_NS[0]}

# on_host PATTERN: the pids of h1 whose command line matches PATTERN
on_host() {
	local p
	for p in $(ip netns pids "$NS"); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$1" && echo "$p"
	done
	true
}

# gone_within SECONDS PATTERN WHAT: wait until nothing on h1 matches
gone_within() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		[[ -z $(on_host "$2") ]] && return 0
		sleep 0.1
	done
	fail "$3 still runs on h1 after $1 s: $(for p in $(on_host "$2"); do tr '\0' ' ' </proc/$p/cmdline; echo; done)"
}

job_killed() {
	printf '%s\n' "profilers add cmd 'sleep 1000.1509'" "profilers only on" "run --tag t -- sleep 1000.15091" >k.ctl
	"$TALLY" job run --host h1 --host-timeout 2 k.ctl >k.out 2>k.err &
	local pid=$!
	wait_for_line k.out "^HOSTS t: recording on every host" 120
	[[ -n $(on_host 'sleep 1000.1509 $') ]] || fail "the cmd profiler does not run on h1"
	kill -KILL $pid
	wait $pid 2>/dev/null || true
	pkill -KILL -f '^sleep 1000.15091$' || true
	# its lease is 4 x --host-timeout, 10 s at least: then it ends, with its profiler
	gone_within 40 'job agent start' "the agent of the killed job"
	gone_within 10 'sleep 1000.1509 $' "the cmd profiler of the killed job"
	[[ -z $(host_sh h1 'ls ~/.cache/tally-profilers/agents') ]] || fail "the agent's directory is left: $(host_sh h1 'ls ~/.cache/tally-profilers/agents')"
	note "the killed job's agent ended on its lease, its profiler with it"
}

agent_killed() {
	# the test kills h1's agent (not its watcher, the agent's child), and
	# looks for the profiler it started
	cat >killagent.sh <<EOF
#!/bin/bash
cmd() { tr '\\0' ' ' </proc/\$1/cmdline 2>/dev/null; }
agent=
for p in \$(ip netns pids $NS); do
	cmd \$p | grep -q 'job agent start' || continue
	cmd \$(awk '{ print \$4 }' /proc/\$p/stat) | grep -q 'job agent start' || agent=\$p
done
kill -KILL \$agent
for i in \$(seq 100); do
	ok=1
	for p in \$(ip netns pids $NS); do cmd \$p | grep -q 'sleep 1000.1510 ' && ok=0; done
	((ok)) && { echo profiler-gone; exit 0; }
	sleep 0.1
done
echo profiler-left
EOF
	chmod +x killagent.sh
	printf '%s\n' "profilers add cmd 'sleep 1000.1510'" "profilers only on" "run --tag t -- $TMP/killagent.sh" >a.ctl
	job_ok a.ctl --host h1
	grep -q '^profiler-gone$' results/a/t/output || fail "the profiler of a killed agent still ran: $(cat results/a/t/output)"
	gone_within 10 'sleep 1000.1510 $' "the cmd profiler of the killed agent"
	note "$(grep profiling results/a/t/status)"
}

next_run_cleans() {
	# what a dead job left: its agent killed with it (no lease runs out for
	# it) and its local directory of shared connections
	printf '%s\n' "profilers add cmd 'sleep 1000.1511'" "profilers only on" "run --tag t -- sleep 1000.15111" >d.ctl
	"$TALLY" job run --host h1 --host-timeout 2 d.ctl >d.out 2>d.err &
	local pid=$! left
	wait_for_line d.out "^HOSTS t: recording on every host" 120
	kill -KILL $pid $(on_host 'job agent start')
	wait $pid 2>/dev/null || true
	pkill -KILL -f '^sleep 1000.15111$' || true
	[[ -d $(echo /tmp/tally-ssh-$pid-*) ]] || fail "the killed job left no /tmp/tally-ssh-$pid-* to clean (the test's premise)"
	[[ -n $(host_sh h1 'ls ~/.cache/tally-profilers/agents') ]] || fail "the killed agent left no directory (the test's premise)"
	# its lease (10 s) runs out, then the next job cleans
	sleep 11
	printf '%s\n' "profilers add cmd uptime" "run --tag t -- true" >n.ctl
	job_ok n.ctl --host h1 --host-timeout 2
	left=$(host_sh h1 'ls ~/.cache/tally-profilers/agents')
	[[ -z $left ]] || fail "the dead job's agent directory is left on h1: $left"
	[[ ! -e $(echo /tmp/tally-ssh-$pid-*) ]] || fail "the dead job's /tmp/tally-ssh-$pid-* is left"
	note "the next job removed the dead job's agent directory and /tmp/tally-ssh-$pid-*"
}

subtest "a killed job's agent ends on its lease" job_killed
subtest "a killed agent's profilers end with it" agent_killed
subtest "the next job cleans what a dead one left" next_run_cleans
