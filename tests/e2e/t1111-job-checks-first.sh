#!/bin/bash
# what the job can check is checked before anything is made: a control file
# that is missing, unreadable or a directory, and bad arguments to the
# built-in profilers (tally -F abc, an unknown option, cmd without a
# command), are control-file errors: one line, exit 2, no results; a job
# that fails before its first test (a plugin's setup or initialize) exits 1
# and leaves no results behind, so that its rerun is not refused.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# usage_error REGEX ARGS...: tally job run ARGS fails with REGEX, exit 2, no results
usage_error() {
	local re=$1
	shift
	expect_fail_with "$re" "$TALLY" job run "$@"
	((LAST_RC == 2)) || fail "'job run $*' exited $LAST_RC, expected 2: $LAST_ERR"
	[[ ! -e results ]] || fail "'job run $*' made results: $(find results)"
}

control_file() {
	usage_error "^tally: cannot open 'missing.ctl': .*\(the control file\)$" missing.ctl
	mkdir dir.ctl
	usage_error "^tally: .*'dir.ctl'.* \(the control file\)$" dir.ctl
	command -v setpriv >/dev/null || skip "setpriv is not installed (root reads any file: the unreadable case needs another user)"
	id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
	chmod 711 "$TMP"
	mkdir -m 1777 pub
	printf 'run sleeptest 0\n' >pub/secret.ctl
	chmod 600 pub/secret.ctl
	cd pub
	expect_fail_with "^tally: cannot open 'secret.ctl': .*\(the control file\)$" \
		env TALLY_STATE_DIR="$TMP/pub/state" setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$TALLY" job run secret.ctl
	((LAST_RC == 2)) || fail "an unreadable control file exited $LAST_RC, expected 2"
	[[ ! -e results ]] || fail "an unreadable control file made results"
}

builtin_args() {
	local line re
	while IFS='|' read -r line re; do
		printf 'run sleeptest 0\n%s\nrun sleeptest 0\n' "$line" >b.ctl
		usage_error "^tally: 'b.ctl' line 2: profiler '(tally|cmd)': $re" b.ctl
	done <<'EOF'
profilers add tally -F abc|invalid frequency -F 'abc'
profilers add tally -F 0|invalid frequency -F '0'
profilers add tally --bogus|.*'--bogus'
profilers add tally -F 99 -c 1000|-F and -c both set the sampling rate: give one
profilers add tally extra|unexpected argument 'extra'
profilers add cmd|no command \(e.g. profilers add cmd 'vmstat 1'\)
profilers add cmd ''|no command
profilers add cmd 'vmstat $x'|'\$' is not expanded
EOF
}

fails_before_tests() {
	mkdir -p plugins/p
	cat >plugins/p/profiler <<'EOF'
#!/bin/sh
case $1 in
version) echo 1 ;;
initialize) [ -e "$TALLY_SRCDIR/../../ok" ] || { echo "not ready" >&2; exit 1; } ;;
esac
exit 0
EOF
	chmod +x plugins/p/profiler
	printf 'profilers add p\nrun sleeptest 0\n' >f.ctl
	expect_fail_with "^tally: 'f.ctl' line 1: profiler 'p' failed at initialize \(exit status 1\): not ready$" \
		"$TALLY" job run --profilers-path "$TMP/plugins" f.ctl
	((LAST_RC == 1)) || fail "a failed initialize exited $LAST_RC, expected 1"
	[[ ! -e results/f ]] || fail "a job that failed before any test left results: $(ls -A results/f)"
	touch ok
	job_ok f.ctl --profilers-path "$TMP/plugins"
	[[ $(sjson results/f/status.json "s['status']") == GOOD ]] || fail "the rerun: $(cat results/f/status.json)"
}

subtest "a control file missing, unreadable or a directory: exit 2" control_file
subtest "bad arguments to built-in profilers: control-file errors, nothing made" builtin_args
subtest "a job failing before its first test leaves no results" fails_before_tests
