#!/bin/bash
# --off-cpu-mechanism refused with one line naming the value and the fix: an
# unknown mechanism, the option without --off-cpu, and (for the daemon) the
# same parser; bpf asked where it cannot load (root without CAP_BPF,
# CAP_PERFMON and CAP_SYS_ADMIN) says why and names the tracepoint.
. "$SRCDIR/tests/e2e/lib.sh"

expect_fail_with "unknown off-CPU mechanism 'ebpf' \(known: auto, bpf, tracepoint" \
	"$TALLY" record --off-cpu --off-cpu-mechanism ebpf -o b1 -- true
((LAST_RC == 2)) || fail "an unknown mechanism exited $LAST_RC, expected 2 (a usage mistake)"
expect_fail_with "unknown off-CPU mechanism ''" "$TALLY" record --off-cpu --off-cpu-mechanism '' -o b2 -- true
expect_fail_with "off-cpu-mechanism needs --off-cpu" "$TALLY" record --off-cpu-mechanism bpf -o b3 -- true
expect_fail_with "unknown off-CPU mechanism 'fast'" "$TALLY" daemon --off-cpu --off-cpu-mechanism fast --db d4
[[ ! -e b1 && ! -e b3 && ! -e d4/session ]] || fail "a refused recording left a database behind: $(ls -d b1 b3 d4 2>/dev/null)"

if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null &&
	"$TALLY" record --off-cpu --off-cpu-mechanism bpf -o b5 -- true 2>/dev/null; then
	expect_fail_with "^tally: cannot load the off-CPU BPF program: .*use --off-cpu-mechanism tracepoint\)$" \
		setpriv --bounding-set=-bpf,-sys_admin,-perfmon "$TALLY" record --off-cpu --off-cpu-mechanism bpf -o b6 -- true
	((LAST_RC == 1)) || fail "bpf that cannot load exited $LAST_RC, expected 1 (the machine's answer)"
	[[ ! -e b6 ]] || fail "a refused recording left 'b6' behind"
else
	note "not checked: a BPF program that cannot load (needs root, setpriv, and BPF loading here)"
fi
