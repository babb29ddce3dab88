#!/bin/bash
# report --html FILE says what it wrote on stderr, as export does:
# `tally: wrote 'FILE' (HTML report, N bytes)` with N the file's size; a
# refused target writes no such line.
. "$SRCDIR/tests/e2e/lib.sh"

"$TALLY" record -o s.db -- "$WORKLOADS/split_funcs" 200 >/dev/null 2>&1 || fail "record failed"
"$TALLY" report -i s.db --html r.html >out 2>err || fail "report --html failed: $(cat err)"
[[ -s r.html ]] || fail "no r.html"
[[ ! -s out ]] || fail "report --html printed on stdout: $(head -c 300 out)"
size=$(stat -c %s r.html)
[[ $(cat err) == "tally: wrote 'r.html' (HTML report, $size bytes)" ]] ||
	fail "stderr is '$(cat err)', expected \"tally: wrote 'r.html' (HTML report, $size bytes)\""
mkdir d
expect_fail_with "d" "$TALLY" report -i s.db --html d
! grep -q wrote "$TMP/fail.err" || fail "a refused target still says wrote"
