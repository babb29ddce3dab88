#!/bin/bash
# tally job's command line: run and profilers, usage errors (exit 2, one
# line), --help and the man page from the option table, completion, and
# 'job profilers' listing the built-ins with perf's availability.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

usage() {
	expect_fail_with "give a command: run CONTROL or profilers \(see 'tally job --help'\)" "$TALLY" job
	((LAST_RC == 2)) || fail "exit $LAST_RC"
	expect_fail_with "unknown job command 'frob' \(run, profilers, hosts\)" "$TALLY" job frob
	expect_fail_with "'job run' needs a control file" "$TALLY" job run
	expect_fail_with "'job run' takes one control file, got 'b' too" "$TALLY" job run a b
	expect_fail_with "'job profilers' takes no argument, got 'x'" "$TALLY" job profilers x
	expect_fail_with "-r is for 'job run'" "$TALLY" job profilers -r x
	expect_fail_with "option '--frob' is unknown" "$TALLY" job run --frob x.ctl
	((LAST_RC == 2)) || fail "exit $LAST_RC"
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
	"$TALLY" --list-cmds | grep -qx job || fail "--list-cmds lacks job"
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
