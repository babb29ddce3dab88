#!/bin/bash
# What a job on hosts tells (docs/remote.md, docs/job.md): an external
# profiler found here goes to each host with the agent and runs there (its
# setup once per version, each said with a SETUP line naming the host);
# status.json lists the hosts (state, boot id, install), gives the
# profilers' version and setup, each host's times, files and bytes for each
# profiled iteration, and each host's failure as an entry of its own.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 2
example_plugin plugins

external_profiler() {
	printf '%s\n' "profilers add loadavg 0.05" "run --tag t -- sleep 0.5" >ext.ctl
	job_ok ext.ctl --host h1 --host h2 --profilers-path "$TMP/plugins"
	local h
	for h in h1 h2; do
		grep -q '^samples [1-9]' results/ext/t/profiling/$h/loadavg.txt ||
			fail "$h: the external profiler did not run there: $(ls results/ext/t/profiling/$h; cat results/ext/t/status)"
		grep -q "^SETUP loadavg 1 ($TMP/plugins/loadavg) on host '$h'\$" job.out || fail "no SETUP line for $h: $(cat job.out)"
	done
	[[ $(sjson results/ext/status.json "s['profilers'][0]['version']") == 1 ]] || fail "version of loadavg: $(sjson results/ext/status.json "s['profilers'][0]")"
	# a second job: set up already, on both hosts
	job_ok ext.ctl --host h1 --host h2 --profilers-path "$TMP/plugins" -r again
	! grep -q '^SETUP' job.out || fail "the setup ran again for the same version: $(cat job.out)"
	note "loadavg sent to both hosts, set up once each"
}

status_json() {
	printf '%s\n' "profilers add cmd uptime" "run --tag t -- sleep 0.5" >st.ctl
	job_ok st.ctl --host h1 --host h2
	local s=results/st/status.json
	[[ $(sjson $s "s['profilers'][0]['version']") == "$("$TALLY" --version | cut -d' ' -f2)" ]] || fail "version of cmd: $(sjson $s "s['profilers'][0]")"
	[[ $(sjson $s "s['profilers'][0]['setup']") == "on the hosts" ]] || fail "setup: $(sjson $s "s['profilers'][0]")"
	[[ $(sjson $s "[h['host'] + ' ' + h['status'] + ' ' + h['boot_id'] for h in s['hosts']]") == \
		"[\"h1 ok $(cat "$HOSTS/h1/boot_id")\", \"h2 ok $(cat "$HOSTS/h2/boot_id")\"]" ]] || fail "hosts: $(sjson $s "s.get('hosts')")"
	[[ $(sjson $s "sorted(h['host'] for h in s['tests'][0]['hosts'])") == '["h1", "h2"]' ]] || fail "the hosts of the test: $(sjson $s "s['tests'][0].get('hosts')")"
	[[ $(sjson $s "all(h['start'] > 0 and h['stop'] > 0 and h['pull'] > 0 and h['files'] >= 1 and h['bytes'] > 0 and h['state'] == 'ok' for h in s['tests'][0]['hosts'])") == true ]] ||
		fail "the hosts of the test: $(sjson $s "s['tests'][0]['hosts']")"
	note "$(sjson $s "s['tests'][0]['hosts'][0]")"
}

per_host_errors() {
	printf '%s\n' '#!/bin/bash' "ssh -F $HOSTS/ssh_config h1 'for d in ~/.cache/tally-profilers/agents/*/results/esc/iteration.*; do [ -d \"\$d\" ] && ln -s /etc/passwd \"\$d/evil\"; done; true'" >plant.sh
	chmod +x plant.sh
	printf '%s\n' "profilers add cmd uptime" "run --tag esc -- $TMP/plant.sh" >e.ctl
	job_ok e.ctl --host h1 --host h2
	local s=results/e/status.json
	[[ $(sjson $s "[(e['profiler'], e.get('host'), e['step']) for e in s['tests'][0]['profiler_errors']]") == '[["hosts", "h1", "pull"]]' ]] ||
		fail "the errors are not one entry for h1's pull: $(sjson $s "s['tests'][0]['profiler_errors']")"
	grep -q "refused 'evil'" <<<"$(sjson $s "s['tests'][0]['profiler_errors'][0]['message']")" || fail "the message: $(sjson $s "s['tests'][0]['profiler_errors']")"
	note "$(sjson $s "s['tests'][0]['profiler_errors'][0]")"
}

subtest "an external profiler goes to the hosts" external_profiler
subtest "status.json tells the hosts" status_json
subtest "each host's failure is an entry of its own" per_host_errors
