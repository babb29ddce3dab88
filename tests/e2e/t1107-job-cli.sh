#!/bin/bash
# tally job's command line: run and profilers, usage errors (exit 2, one
# line), --help and the man page from the option table, completion, and
# 'job profilers' listing the built-ins with perf's availability.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

usage() {
	expect_fail_with "give a command: run CONTROL or profilers \(see 'tally job --help'\)" "$TALLY" job
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	expect_fail_with "unknown job command 'frob' \(run, profilers, hosts; see 'tally job --help'\)" "$TALLY" job frob
	expect_fail_with "'job run' needs a control file" "$TALLY" job run
	expect_fail_with "'job run' takes one control file, got 'b' too" "$TALLY" job run a b
	expect_fail_with "'job profilers' takes no argument, got 'x'" "$TALLY" job profilers x
	expect_fail_with "-r is for 'job run'" "$TALLY" job profilers -r x
	expect_fail_with "option '--frob' is unknown" "$TALLY" job run --frob x.ctl
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	# remote hosts: options checked before anything connects
	printf '%s\n' "run sleeptest 0" >h.ctl
	expect_fail_with "^tally: --remote-root 'rel/dir' must be an absolute path on the hosts, or one under '~/' \(the user's home there; see 'tally job --help'\)$" \
		"$TALLY" job run --host h1 --remote-root rel/dir h.ctl
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	expect_fail_with "^tally: --host needs a host name \(as ssh takes it; see 'tally job --help'\)$" "$TALLY" job run --host '' h.ctl
	expect_fail_with "^tally: invalid --host-timeout 'soon'" "$TALLY" job run --host h1 --host-timeout soon h.ctl
	expect_fail_with "name at least one host: --host HOST, or a control file with a 'hosts' line" "$TALLY" job hosts
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	expect_fail_with "'h.ctl' has no 'hosts' line: name the hosts there, or with --host HOST" "$TALLY" job hosts h.ctl
	expect_fail_with "unexpected argument 'b' \(one control file, or hosts with --host; see 'tally job hosts --help'\)" "$TALLY" job hosts a b
	expect_fail_with "^tally: --remote-root 'x' must be an absolute path on the hosts" "$TALLY" job hosts --host h1 --remote-root x
	expect_fail_with "^tally: invalid --timeout 'never'" "$TALLY" job hosts --host h1 --timeout never
	# the agent's commands are run by a job over ssh; by hand they say so
	expect_fail_with "the agent is started by a job: job agent start DIR, or job agent ctl DIR REQUEST" "$TALLY" job agent
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	expect_fail_with "^tally: no agent answers at '$TMP/none/agent.sock'" "$TALLY" job agent ctl "$TMP/none" status
	((LAST_RC == 3)) || fail "job agent ctl with no agent: exit $LAST_RC, expected 3"
}

# the agent a job starts on each host, here on this machine: its requests
# and its answers to requests it does not take (one line, exit 1)
agent() {
	local out
	out=$("$TALLY" job agent start "$TMP/ag" </dev/null 2>agent.err) || fail "job agent start failed: $(cat agent.err)"
	# ready PID BOOT-ID SETUPS: this agent has no profilers, so none were set up
	[[ $out =~ ^ready\ ([0-9]+)\ [-0-9a-f]+\ -$ ]] || fail "the agent's start line is '$out'"
	track_pid "${BASH_REMATCH[1]}"
	[[ $(stat -c %a "$TMP/ag") == 700 ]] || fail "the agent's directory is not private"
	out=$("$TALLY" job agent ctl "$TMP/ag" status) || fail "status: $out"
	[[ $out == "ok $(cat /proc/sys/kernel/random/boot_id) -" ]] || fail "status answered '$out'"
	expect_fail_with "^tally: unknown request 'frob' \(start TAG ITERATION PROFILERS, stop, status, clean TAG, quit\)$" \
		"$TALLY" job agent ctl "$TMP/ag" frob
	((LAST_RC == 1)) || fail "an unknown request: exit $LAST_RC"
	expect_fail_with "^tally: nothing was started \(start TAG ITERATION PROFILERS first\)$" "$TALLY" job agent ctl "$TMP/ag" stop
	expect_fail_with "^tally: tag '../x' cannot name a directory \(1 to 199 bytes, no '/', not starting with '.'\)$" \
		"$TALLY" job agent ctl "$TMP/ag" start ../x 1 -
	# an agent of no profilers: every number is refused, as what is not a number
	expect_fail_with "^tally: iteration '1x' is not a number from 0 to 4294967295$" "$TALLY" job agent ctl "$TMP/ag" start t 1x -
	expect_fail_with "^tally: iteration '' is not a number" "$TALLY" job agent ctl "$TMP/ag" start t '' -
	expect_fail_with "^tally: profiler '0' does not exist \(this agent has none: '-'\)$" "$TALLY" job agent ctl "$TMP/ag" start t 1 0
	expect_fail_with "^tally: 'start' takes 3 words after it, not 1 \(start TAG ITERATION PROFILERS\)$" \
		"$TALLY" job agent ctl "$TMP/ag" start t
	expect_fail_with "^tally: 'status' takes 0 words after it, not 1 \(status\)$" "$TALLY" job agent ctl "$TMP/ag" status x
	[[ ! -e $TMP/ag/results/t ]] || fail "a refused start made its results directory"
	expect_fail_with "a request word holds a tab or a newline" "$TALLY" job agent ctl "$TMP/ag" "sta$(printf '\t')tus"
	out=$("$TALLY" job agent ctl "$TMP/ag" quit) || fail "quit: $out"
	sleep 0.2
	[[ ! -e $TMP/ag/agent.sock ]] || fail "the agent's socket stays after quit"
	note "the agent answers status and quit, and refuses what it does not take"
}

help_man() {
	"$TALLY" job --help >help.txt || fail "job --help failed"
	grep -q '^usage: tally job run \[-r RESULTS\]' help.txt || fail "help: $(head -3 help.txt)"
	for o in --results --profilers-path --state-dir 'profilers add NAME' 'profilers only on|off' sleeptest; do
		grep -q -- "$o" help.txt || fail "job --help does not mention '$o'"
	done
	"$TALLY" help --man job >job.1 || fail "help --man job"
	grep -q '^\.TH TALLY-JOB' job.1 || fail "man page: $(head -2 job.1)"
	grep -qF 'profilers\-path' job.1 || fail "the man page lacks --profilers-path"
	"$TALLY" help --completion >comp.sh
	grep -q 'job) opts=".*--profilers-path' comp.sh || fail "completion has no job options"
	"$TALLY" --list-cmds | grep -x job >/dev/null || fail "--list-cmds lacks job"
}

list() {
	"$TALLY" job profilers >list.txt 2>list.err || fail "job profilers failed: $(cat list.err)"
	head -n 1 list.txt | grep -Eq '^name +version +set up +where$' || fail "header: $(head -n 1 list.txt)"
	for p in tally cmd; do
		grep -Eq "^$p +[0-9][^ ]* +built-in +built-in$" list.txt || fail "no built-in $p: $(cat list.txt)"
	done
	if command -v perf >/dev/null; then
		grep -Eq '^perf +[^ ]+ +built-in +built-in$' list.txt || fail "perf is installed but listed as: $(grep perf list.txt)"
	else
		grep -Eq '^perf +[^ ]+ +unavailable' list.txt || fail "perf is not installed but listed as: $(grep perf list.txt)"
	fi
	# perf hidden: listed as unavailable, and a job adding it stops before any test
	mkdir bin
	for t in sh sleep cat; do ln -s "$(command -v $t)" bin/$t; done
	PATH=$TMP/bin "$TALLY" job profilers >np.txt
	grep -Eq "^perf +[^ ]+ +unavailable" np.txt || fail "without perf: $(grep perf np.txt)"
	grep -q "'perf' is not installed (Debian package linux-perf)" np.txt || fail "without perf, no reason: $(cat np.txt)"
	printf 'profilers add perf\nrun sleeptest 0\n' >p.ctl
	expect_fail_with "^tally: 'p.ctl' line 1: profiler 'perf' failed at setup: 'perf' is not installed \(Debian package linux-perf\)" \
		env PATH="$TMP/bin" "$TALLY" job run p.ctl
}

subtest "usage errors" usage
subtest "--help, man page, completion" help_man
subtest "job profilers lists the built-ins" list
subtest "the agent's requests" agent
