#!/bin/bash
# What goes wrong with remote hosts, and what the job does (docs/remote.md):
# a host unreachable from the start stops the job before any test, named; an
# agent killed during a test while the host's boot id changes (what a reboot
# looks like from here) is found, its gap said in the test's status and
# status.json, its agent started again, and the next test profiles that host
# again; a host that never comes back within --host-timeout is lost and the
# job finishes with the others; results that hold a symbolic link are refused
# by name and nothing lands outside profiling/HOST/.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 2

unreachable() {
	printf '%s\n' "profilers add tally -a -F 499" "run --tag t -- true" >u.ctl
	job_rc u.ctl --host h1 --host nosuchhost --host-timeout 2
	((JOB_RC == 1)) || fail "exit $JOB_RC with a host that cannot be reached, expected 1"
	grep -q "host 'nosuchhost': cannot connect" job.err || fail "the host is not named: $(cat job.err)"
	[[ ! -e results/u/t ]] || fail "a test ran although a host could not be reached"
	note "$(tail -1 job.err)"
}

# the agent of host $1 killed, and its boot id changed: a reboot
cat >reboot.sh <<EOF
#!/bin/bash
i=\${1#h}
for p in \$(ip netns pids tally-$$-h\$i); do
	tr '\\0' ' ' </proc/\$p/cmdline 2>/dev/null | grep 'job agent start' >/dev/null && kill -KILL \$p
done
cat /proc/sys/kernel/random/uuid >$HOSTS/h\$i/boot_id
sleep 0.5
EOF
chmod +x reboot.sh

reboot() {
	printf '%s\n' "profilers add tally -a -F 499" "run --tag boom -- $TMP/reboot.sh h1" "run --tag after -- sleep 0.3" >r.ctl
	job_ok r.ctl --host h1 --host h2
	local b=results/r/boom a=results/r/after
	grep -q "^profiling incomplete: .*host 'h1': rebooted (its boot id changed); profilers tally did not survive it" $b/status ||
		fail "the reboot is not in boom's status: $(cat $b/status)"
	grep -q "its agent started again" $b/status || fail "the restart is not said: $(cat $b/status)"
	[[ $(sjson results/r/status.json "s['tests'][0]['profiling']") == incomplete ]] || fail "status.json does not say boom's profiling is incomplete"
	[[ -f $b/profiling/h2/tally.db/session ]] || fail "h2, which did not reboot, has no results for boom"
	for h in h1 h2; do
		[[ -f $a/profiling/$h/tally.db/session ]] || fail "$h: no results for the test after the reboot: $(cat $a/status)"
	done
	[[ $(sjson results/r/status.json "s['tests'][1]['profiling']") == complete ]] || fail "the test after the reboot: $(cat $a/status)"
	note "$(grep profiling $b/status)"
}

lost() {
	cat >lose.sh <<EOF
#!/bin/bash
kill \$(cat $HOSTS/h2/sshd.pid) 2>/dev/null
for p in \$(ip netns pids tally-$$-h2); do kill -KILL \$p 2>/dev/null; done
true
EOF
	chmod +x lose.sh
	printf '%s\n' "profilers add tally -a -F 499" "run --tag lose -- $TMP/lose.sh" "run --tag next -- sleep 0.2" >l.ctl
	job_ok l.ctl --host h1 --host h2 --host-timeout 3
	grep -q "host 'h2' is lost: it did not come back within 3 s" results/l/lose/status ||
		fail "h2 is not said lost: $(cat results/l/lose/status)"
	[[ -f results/l/lose/profiling/h1/tally.db/session && -f results/l/next/profiling/h1/tally.db/session ]] ||
		fail "h1 has no results beside the lost host: $(ls -R results/l | head -20; cat results/l/*/status)"
	[[ ! -e results/l/next/profiling/h2 ]] || fail "the lost host was asked again"
	note "$(grep lost results/l/lose/status)"
}

escape() {
	cat >plant.sh <<EOF
#!/bin/bash
ssh -F $HOSTS/ssh_config h1 'for d in ~/.cache/tally-profilers/agents/*/results/esc/iteration.*; do [ -d "\$d" ] && ln -s /etc/passwd "\$d/evil"; done; true'
EOF
	chmod +x plant.sh
	printf '%s\n' "profilers add tally -a -F 499" "run --tag esc -- $TMP/plant.sh" >e.ctl
	job_ok e.ctl --host h1 --host h2
	grep -q "host 'h1': refused 'evil': a symbolic link, not a regular file or a directory" results/e/esc/status ||
		fail "the link is not refused by name: $(cat results/e/esc/status)"
	[[ ! -e results/e/esc/profiling/h1/evil && ! -L results/e/esc/profiling/h1/evil ]] || fail "the link came back"
	[[ -f results/e/esc/profiling/h2/tally.db/session ]] || fail "h2's results are missing beside h1's refused ones"
	note "$(grep refused results/e/esc/status)"
}

subtest "a host unreachable from the start" unreachable
subtest "an agent killed and the boot id changed: a reboot" reboot
subtest "results that hold a link are refused" escape
subtest "a host that does not come back is lost" lost
