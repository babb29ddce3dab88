#!/bin/bash
# Host names become directory names (docs/remote.md): the results' profiling/HOST/
# and the agent's directory on the host. A name that cannot be one ('..',
# '.', one with '/', all-hosts.db, ...) is refused before anything runs, by
# --host and on a 'hosts' line, although ssh takes it (here through a config
# 'Host *'); a host named twice is refused up front; two names of one machine
# are two hosts whose agents keep apart, and both profile.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 1
# any name reaches h1, as a config's 'Host *' makes it; h1b is another name of h1
{
	cat "$HOSTS/ssh_config"
	for name in h1b '*'; do
		sed -n '/^Host h1$/,/^Host /p' "$HOSTS/ssh_config" | sed '/^Host /d' | sed "1i Host $name" | sed '$a \  HostKeyAlias h1'
	done
} >any_config
export TALLY_SSH="ssh -F $TMP/any_config"
ssh -F any_config ../x true || skip "ssh does not take '../x' through 'Host *'"

bad_names() {
	local n
	printf '%s\n' "profilers add cmd uptime" "run --tag t -- true" >good.ctl
	for n in ../../../escaped .. . a/b all-hosts.db; do
		expect_fail_with "^tally: host name '$(sed 's/[.]/[.]/g' <<<"$n")' cannot name its directory of results " \
			"$TALLY" job run --host "$n" -r "res-$RANDOM" good.ctl
		((LAST_RC == 2)) || fail "--host '$n': exit $LAST_RC, expected 2"
		expect_fail_with "^tally: host name .* cannot name its directory of results " "$TALLY" job hosts --host "$n"
	done
	printf '%s\n' "hosts h1 ../../x" "profilers add cmd uptime" "run --tag t -- true" >dots.ctl
	expect_fail_with "^tally: 'dots.ctl' line 1: host name '../../x' cannot name its directory of results " "$TALLY" job run dots.ctl
	((LAST_RC == 2)) || fail "a 'hosts ../../x' line: exit $LAST_RC, expected 2"
	expect_fail_with "^tally: 'dots.ctl' line 1: host name '../../x' cannot name" "$TALLY" job hosts dots.ctl
	[[ ! -e x && ! -e escaped && ! -e results/x ]] || fail "something was written outside the results: $(ls -R . | head)"
	note "names that are not directory names refused, by --host and on a 'hosts' line"
}

twice() {
	printf '%s\n' "profilers add cmd uptime" "run --tag t -- true" >twice.ctl
	expect_fail_with "^tally: host 'h1' is named twice " "$TALLY" job run --host h1 --host h1 -r r1 twice.ctl
	printf '%s\n' "hosts h1" "profilers add cmd uptime" "run --tag t -- true" >line.ctl
	expect_fail_with "^tally: host 'h1' is named twice " "$TALLY" job run --host h1 -r r2 line.ctl
	printf '%s\n' "hosts h1 h1" "profilers add cmd uptime" "run --tag t -- true" >same.ctl
	expect_fail_with "^tally: 'same.ctl' line 1: host 'h1' is named twice " "$TALLY" job run -r r3 same.ctl
	expect_fail_with "^tally: host 'h1' is named twice " "$TALLY" job hosts --host h1 --host h1
	[[ -z $(host_sh h1 'ls ~/.cache/tally-profilers/agents 2>/dev/null') ]] || fail "an agent was started for a job refused"
	note "a host named twice is refused before anything runs on it"
}

two_names() {
	printf '%s\n' "profilers add cmd uptime" "run --tag t -- sleep 0.2" >two.ctl
	job_ok two.ctl --host h1 --host h1b
	local h
	for h in h1 h1b; do
		compgen -G "results/two/t/profiling/$h/cmd*.log" >/dev/null || fail "$h: no results: $(ls -R results/two/t/profiling; cat results/two/t/status)"
	done
	[[ $(sjson results/two/status.json "s['tests'][0]['profiling']") == complete ]] || fail "profiling not complete: $(cat results/two/t/status)"
	[[ -z $(host_sh h1 'ls ~/.cache/tally-profilers/agents 2>/dev/null') ]] || fail "an agent's directory is left: $(host_sh h1 'ls ~/.cache/tally-profilers/agents')"
	local p
	for p in $(ip netns pids "${HOST_NS[0]}"); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'job agent start' && fail "an agent still runs on h1 (pid $p)"
	done
	note "h1 and h1b, one machine: two agents apart, both profiled, none left"
}

subtest "names that cannot be directories are refused" bad_names
subtest "a host named twice is refused" twice
subtest "two names of one machine" two_names
