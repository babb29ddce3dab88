#!/bin/bash
# The profilers on a host as the job names them (docs/remote.md): several cmd
# profilers keep apart there (cmd-vmstat.log, cmd-uptime.log,
# cmd-vmstat.2.log, as locally); tally without -a profiles the whole host
# there (there is no test process on a host, and autotest's server-side
# profilers are system-wide); all-hosts.db and all-hosts.txt are private,
# as every other result of a job.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 1
W=$TMP/split_funcs_$$
cp "$WORKLOADS/split_funcs" "$W"

several_cmd() {
	printf '%s\n' "profilers add cmd 'vmstat 1'" "profilers add cmd uptime" "profilers add cmd 'vmstat 1'" \
		"run --tag t -- sleep 1.5" >cmds.ctl
	job_ok cmds.ctl --host h1
	local d=results/cmds/t/profiling/h1 f
	for f in cmd-vmstat.log cmd-uptime.log cmd-vmstat.2.log; do
		[[ -s $d/$f ]] || fail "no $f from h1: $(ls $d; cat results/cmds/t/status)"
	done
	grep -q 'load average' $d/cmd-uptime.log || fail "cmd-uptime.log is not uptime's: $(cat $d/cmd-uptime.log)"
	grep -q 'procs' $d/cmd-vmstat.2.log || fail "cmd-vmstat.2.log is not vmstat's: $(cat $d/cmd-vmstat.2.log)"
	[[ $(sjson results/cmds/status.json "s['tests'][0]['profiling']") == complete ]] || fail "profiling: $(cat results/cmds/t/status)"
	note "h1: $(ls $d | tr '\n' ' ')"
}

tally_whole_host() {
	printf '%s\n' "profilers add tally -F 999" "run --tag w -- $W 600" >whole.ctl
	job_ok whole.ctl --host h1
	local d=results/whole/w
	[[ $(sjson results/whole/status.json "s['tests'][0]['profiling']") == complete ]] || fail "profiling: $(cat $d/status)"
	[[ -f $d/profiling/h1/tally.db/session ]] || fail "no database from h1: $(ls -R $d/profiling | head)"
	# the hosts share this machine's kernel: the whole host saw the workload
	report_json h1.json -i $d/profiling/h1/tally.db --image "${W##*/}"
	(($(tjson h1.json total) > 0)) || fail "h1's whole-host profile has no sample of the workload"
	note "tally without -a on h1: the whole host, $(tjson h1.json total) samples of the workload"
}

private_all_hosts() {
	local d=results/whole/w/profiling f bad
	[[ -f $d/all-hosts.txt ]] || fail "no all-hosts.txt: $(ls $d)"
	bad=$(find $d/all-hosts.txt $d/all-hosts.db -type f -perm /077 -printf '%m %p\n')
	[[ -z $bad ]] || fail "readable by others: $bad"
	note "all-hosts.txt $(stat -c %a $d/all-hosts.txt)"
}

subtest "several cmd profilers on a host keep apart" several_cmd
subtest "tally without -a profiles the whole host" tally_whole_host
subtest "all-hosts.db and all-hosts.txt are private" private_all_hosts
