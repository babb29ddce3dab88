#!/bin/bash
# what goes wrong, and what the user gets: one line naming the control file
# and line for every bad command (nothing runs, no results are made); an
# unknown profiler names the path searched; a profiler whose setup or
# initialize fails stops the job before any test runs, naming the profiler
# and its message, and leaves no results; a profiler failing at start, stop or report marks the
# test's profiling incomplete without losing what the others wrote.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# bad LINE2 REGEX: a control file whose line 2 is LINE2 fails with REGEX,
# exit 2, and makes no results
bad() {
	printf 'run sleeptest 0\n%s\nrun sleeptest 0\n' "$1" >bad.ctl
	expect_fail_with "^tally: 'bad.ctl' line 2: $2" "$TALLY" job run bad.ctl
	((LAST_RC == 2)) || fail "a control-file error exited $LAST_RC, expected 2"
	[[ ! -e results ]] || fail "a bad control file made results: $(find results)"
}

control_errors() {
	bad 'frob' "unknown command 'frob' \(commands: profilers add\|delete\|only, run, hosts\)"
	bad 'profilers' "'profilers' needs add, delete or only"
	bad 'profilers frob x' "unknown 'profilers frob'"
	bad 'profilers add' "'profilers add' needs a profiler's name"
	bad 'profilers add ../evil' "'../evil' is not a profiler's name"
	bad 'profilers only maybe' "'profilers only' takes on or off"
	bad 'profilers delete tally' "profiler 'tally' is not added here, nothing to delete"
	bad 'profilers delete' "'profilers delete' needs a profiler's name"
	bad 'run' "'run' needs a test \(built-in: sleeptest\) or '-- COMMAND'"
	bad 'run --' "'run --' needs a command"
	bad 'run foo' "unknown test 'foo' \(built-in tests: sleeptest; a command goes after '--'"
	bad 'run sleeptest' "sleeptest takes one duration in seconds"
	bad 'run sleeptest soon' "sleeptest takes one duration in seconds"
	bad 'run --iterations 0 sleeptest 1' "invalid --iterations '0'"
	bad 'run --iterations' "'--iterations' needs a value"
	bad 'run --timeout never sleeptest 1' "invalid --timeout"
	bad 'run --tag ../x sleeptest 1' "'../x' cannot be a tag"
	bad 'run --tag status.json sleeptest 1' "'status.json' cannot be a tag"
	bad 'run --frob sleeptest 1' "unknown run option '--frob'"
	bad "run -- echo 'open" "unterminated ' quote"
	bad 'run -- echo "open' 'unterminated " quote'
	bad 'run -- echo $HOME' "'\\$' is not expanded"
	bad 'run -- echo "$(id)"' "'\\$' is not expanded"
	bad 'run -- echo `id`' "'\`' is not run"
	bad 'run -- echo \' "a backslash ends the line"
	printf 'profilers add tally\nprofilers add tally -g\nrun sleeptest 0\n' >twice.ctl
	expect_fail_with "^tally: 'twice.ctl' line 2: profiler 'tally' is already added \(line 1\)" "$TALLY" job run twice.ctl
	printf '# only a comment\n\n' >empty.ctl
	expect_fail_with "^tally: 'empty.ctl' has no 'run' line" "$TALLY" job run empty.ctl
	expect_fail_with "^tally: cannot open 'missing.ctl': .*\(the control file\)" "$TALLY" job run missing.ctl
	# quoting that is fine runs: $ in single quotes, escaped, and no shell ever
	printf '%s\n' "run --tag q -- printf '%s|' '\$HOME' \\\$x \"a b\" 'c'\"d\"" >ok.ctl
	job_ok ok.ctl
	[[ $(cat results/ok/q/output) == '$HOME|$x|a b|cd|' ]] || fail "quoting: '$(cat results/ok/q/output)'"
}

unknown_profiler() {
	printf 'profilers add nosuch\nrun sleeptest 0\n' >u.ctl
	expect_fail_with "^tally: 'u.ctl' line 1: unknown profiler 'nosuch': not built in \(tally, cmd, perf\) and no nosuch/profiler in $TMP/a:$TMP/b:/usr/lib/tally/profilers" \
		"$TALLY" job run --profilers-path "$TMP/a:$TMP/b" u.ctl
	((LAST_RC == 2)) || fail "an unknown profiler exited $LAST_RC, expected 2 (a control-file error)"
	[[ ! -e results/u ]] || fail "results made for an unknown profiler"
}

# plugin NAME FAILSTEP: a profiler that writes NAME.out at report and fails
# at FAILSTEP with a message
plugin() {
	mkdir -p plugins/$1
	cat >plugins/$1/profiler <<EOF
#!/bin/sh
case \$1 in
version) echo 1 ;;
report) echo "$1 was here" >"\$TALLY_PROFDIR/$1.out" ;;
esac
if [ "\$1" = "$2" ]; then
	echo "some noise"
	echo "$1 cannot $2 here" >&2
	exit 3
fi
exit 0
EOF
	chmod +x plugins/$1/profiler
}

before_any_test() {
	local step
	for step in setup initialize; do
		plugin bad$step $step
		printf 'profilers add cmd true\nrun -- touch %s/ran\nprofilers add bad%s\nrun sleeptest 0\n' "$TMP" $step >$step.ctl
		expect_fail_with "^tally: '$step.ctl' line 3: profiler 'bad$step' failed at $step \(exit status 3\): bad$step cannot $step here$" \
			"$TALLY" job run --profilers-path "$TMP/plugins" $step.ctl
		((LAST_RC == 1)) || fail "a failed $step exited $LAST_RC, expected 1"
		[[ ! -e ran ]] || fail "a test ran although a profiler's $step failed"
		# no test ran: no results to refuse a rerun with (the error is on stderr)
		[[ ! -e results/$step ]] || fail "results after a failed $step: $(ls -A results/$step)"
	done
	# a built-in's bad arguments: with the rest of the control file, before any test
	printf 'run -- touch %s/ran\nprofilers add tally -F 0\nrun sleeptest 0\n' "$TMP" >tinit.ctl
	expect_fail_with "^tally: 'tinit.ctl' line 2: profiler 'tally': invalid frequency -F '0'" "$TALLY" job run tinit.ctl
	printf 'profilers add cmd no-such-command-here\nrun -- touch %s/ran\n' "$TMP" >cinit.ctl
	expect_fail_with "^tally: 'cinit.ctl' line 1: profiler 'cmd' failed at initialize: command 'no-such-command-here' not found in PATH" \
		"$TALLY" job run cinit.ctl
	[[ ! -e ran ]] || fail "a test ran although a profiler could not initialize"
	# a path is named whole, however long
	local long=$TMP/a-directory-of-tools-with-a-long-name/bin/the-sampler-command
	printf 'profilers add cmd %s\nrun -- touch %s/ran\n' "$long" "$TMP" >clong.ctl
	expect_fail_with "^tally: 'clong.ctl' line 1: profiler 'cmd' failed at initialize: command '$long' not found in PATH$" \
		"$TALLY" job run clong.ctl
}

incomplete() {
	local step
	plugin good none
	for step in start stop report; do
		plugin bad$step $step
		printf 'profilers add tally\nprofilers add bad%s\nprofilers add good\nrun sleeptest 0.1\n' $step >inc$step.ctl
		job_ok inc$step.ctl --profilers-path "$TMP/plugins"
		local d=results/inc$step/sleeptest
		head -n 1 $d/status | grep -q '^GOOD ' || fail "a profiler's failed $step made the test fail: $(cat $d/status)"
		grep -qx "profiling incomplete: profiler 'bad$step' failed at $step (exit status 3): bad$step cannot $step here" $d/status ||
			fail "status after a failed $step: $(cat $d/status)"
		[[ -f $d/profiling/tally.db/session && -s $d/profiling/tally.txt && -f $d/profiling/good.out ]] ||
			fail "the other profilers' results are lost after bad$step failed: $(ls $d/profiling)"
		[[ $(sjson results/inc$step/status.json "s['tests'][0]['profiling']") == incomplete ]] || fail "status.json: not incomplete"
		[[ $(sjson results/inc$step/status.json "[(e['profiler'], e['step']) for e in s['tests'][0]['profiler_errors']]") == "[[\"bad$step\", \"$step\"]]" ]] ||
			fail "status.json profiler_errors: $(sjson results/inc$step/status.json "s['tests'][0]['profiler_errors']")"
		# report runs only after a good stop, and never for one that did not start
		if [[ $step != report && -e $d/profiling/bad$step.out ]]; then
			fail "report ran after a failed $step"
		fi
	done
}

cannot_sample() {
	# the tally profiler's initialize finds out that sampling is refused
	# here (an unprivileged user, -a, perf_event_paranoid): before any test
	local paranoid grp
	paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
	((paranoid >= 1)) || skip "perf_event_paranoid is $paranoid: unprivileged users may profile the whole system here"
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
	grp=$(id -gn nobody)
	chmod 711 "$TMP"
	mkdir -m 1777 pub
	cd pub
	printf 'profilers add tally -a\nrun -- touch %s/pub/ran\n' "$TMP" >p.ctl
	expect_fail_with "^tally: 'p.ctl' line 1: profiler 'tally' failed at initialize: .*(perf_event_paranoid|CAP_PERFMON)" \
		env TALLY_STATE_DIR="$TMP/pub/state" setpriv --reuid=nobody --regid="$grp" --clear-groups "$TALLY" job run p.ctl
	[[ ! -e ran ]] || fail "the test ran although sampling is refused"
}

subtest "control-file errors name the file and line" control_errors
subtest "an unknown profiler names the path searched" unknown_profiler
subtest "setup or initialize failing stops the job before any test" before_any_test
subtest "a profiler failing at start, stop or report: profiling incomplete, the rest kept" incomplete
subtest "tally cannot sample here: stopped at initialize" cannot_sample
