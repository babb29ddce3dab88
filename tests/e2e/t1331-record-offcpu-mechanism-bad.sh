#!/bin/bash
# --off-cpu-mechanism refused with one line naming the value and the fix: an
# unknown mechanism, the option without --off-cpu, and (for the daemon) the
# same parser.
. "$SRCDIR/tests/e2e/lib.sh"

expect_fail_with "unknown off-CPU mechanism 'ebpf' \(known: auto, bpf, tracepoint" \
	"$TALLY" record --off-cpu --off-cpu-mechanism ebpf -o b1 -- true
((LAST_RC == 2)) || fail "an unknown mechanism exited $LAST_RC, expected 2 (a usage mistake)"
expect_fail_with "unknown off-CPU mechanism ''" "$TALLY" record --off-cpu --off-cpu-mechanism '' -o b2 -- true
expect_fail_with "off-cpu-mechanism needs --off-cpu" "$TALLY" record --off-cpu-mechanism bpf -o b3 -- true
expect_fail_with "unknown off-CPU mechanism 'fast'" "$TALLY" daemon --off-cpu --off-cpu-mechanism fast --db d4
[[ ! -e b1 && ! -e b3 && ! -e d4/session ]] || fail "a refused recording left a database behind: $(ls -d b1 b3 d4 2>/dev/null)"

