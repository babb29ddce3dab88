#!/bin/bash
# A bundle whose first line is cut short: a file that is exactly
# 'tally-bundle:' printed an uninitialized stack buffer as its "version"
# (valgrind: a conditional jump on uninitialised values).  The error is now a
# fixed text, checked exactly and under valgrind when it is installed; a
# version holding escape sequences is quoted escaped.
. "$SRCDIR/tests/e2e/lib.sh"

printf 'tally-bundle:' >short.bundle
expect_fail_with "^tally: 'short\.bundle' is a damaged bundle: its first line names no format-version \(drain it again\)$" \
	"$TALLY" report -i short.bundle
[[ $LAST_ERR == "tally: 'short.bundle' is a damaged bundle: its first line names no format-version (drain it again)" ]] ||
	fail "unexpected text: $LAST_ERR"

printf 'tally-bundle:  \n' >blank.bundle
expect_fail_with "^tally: 'blank\.bundle' is a damaged bundle: its first line names no format-version" "$TALLY" report -i blank.bundle

printf 'tally-bundle: \033]0;owned\007\n' >esc.bundle
expect_fail_with "^tally: 'esc\.bundle' is a bundle of format-version \\\\x1b\]0;owned\\\\x07, and this tally reads version 1" \
	"$TALLY" report -i esc.bundle
LC_ALL=C grep -q '[^[:print:]]' "$TMP/fail.err" && fail "raw bytes in the error: $(od -c "$TMP/fail.err" | head -3)"

if grep -qa -e __asan_init -e __msan_init "$TALLY"; then
	note "a sanitizer build (valgrind cannot run it): the exact text was checked without valgrind"
elif command -v valgrind >/dev/null 2>&1; then
	rc=0
	valgrind -q --error-exitcode=99 --log-file="$TMP/vg.log" "$TALLY" report -i short.bundle 2>"$TMP/vg.err" || rc=$?
	((rc != 99)) || fail "valgrind found errors: $(head -c 2000 "$TMP/vg.log")"
	((rc == 1)) || fail "under valgrind: exit $rc, expected 1; $(cat "$TMP/vg.err")"
	note "valgrind: no error reading short.bundle"
else
	note "valgrind is not installed: the exact text was checked without it"
fi
