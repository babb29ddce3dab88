#!/bin/bash
# an unprivileged user asking for the whole system (-a) while
# perf_event_paranoid forbids it gets a one-line error naming the
# perf_event_paranoid setting or CAP_PERFMON.
. "$SRCDIR/tests/e2e/lib.sh"

paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
((paranoid >= 1)) || skip "perf_event_paranoid is $paranoid: unprivileged users may profile the whole system here"
command -v setpriv >/dev/null || skip "setpriv is not installed"
id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
grp=$(id -gn nobody)
as_nobody=(setpriv --reuid=nobody --regid="$grp" --clear-groups)

rc=0
"${as_nobody[@]}" "$TALLY" events >/dev/null 2>nobody.err || rc=$?
((rc != 126 && rc != 127)) || skip "user nobody cannot run $TALLY (exit $rc: $(head -c 300 nobody.err))"

chmod 711 "$TMP"
mkdir -m 1777 pub
cd pub || fail "cannot enter $TMP/pub"
expect_fail_with "perf_event_paranoid|CAP_PERFMON" \
	"${as_nobody[@]}" "$TALLY" record -a --duration 0.2 -o "$TMP/pub/x"
[[ ! -e x ]] || fail "the refused record -a left a database behind"
