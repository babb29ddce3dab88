#!/bin/bash
# record's exit status is the command's: N for exit(N), 128+N when killed by
# signal N, 127 with a one-line error when the command cannot be run.
. "$SRCDIR/tests/e2e/lib.sh"

for code in 0 7; do
	rc=0
	"$TALLY" record -o db$code -- "$WORKLOADS/exitcode" $code >out 2>err || rc=$?
	[[ $rc == "$code" ]] || fail "record -- exitcode $code exited $rc, expected $code; stderr: $(head -c 1000 err)"
	report_json r$code.json -i db$code
	n=$(tjson r$code.json total)
	((n > 0)) || fail "record -- exitcode $code left a database with no samples"
	note "exitcode $code -> $rc, database has $n samples"
done

rc=0
"$TALLY" record -o dbsig -- "$WORKLOADS/exitcode" -15 >out 2>err || rc=$?
[[ $rc == 143 ]] || fail "record -- exitcode -15 (killed by SIGTERM) exited $rc, expected 143 (128+15); stderr: $(head -c 1000 err)"
report_json sig.json -i dbsig
note "killed by SIGTERM -> 143"

expect_fail_with "/nonexistent/tally-no-such-cmd" \
	"$TALLY" record -o db127 -- /nonexistent/tally-no-such-cmd
[[ $LAST_RC == 127 ]] || fail "record of a missing command exited $LAST_RC, expected 127"

expect_fail_with "tally-no-such-cmd-in-path" \
	"$TALLY" record -o db127b -- tally-no-such-cmd-in-path
[[ $LAST_RC == 127 ]] || fail "record of a command not in PATH exited $LAST_RC, expected 127"

printf '#!/bin/sh\nexit 0\n' >notexec.sh
chmod 644 notexec.sh
expect_fail_with "notexec\.sh" "$TALLY" record -o db127c -- ./notexec.sh
[[ $LAST_RC == 127 ]] || fail "record of a non-executable file exited $LAST_RC, expected 127 (docs/cli.md: 127 when it cannot be run)"
