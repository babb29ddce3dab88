#!/bin/bash
# tally events: one `name  type  available|unavailable  description` line per
# event (name may list aliases, `a|b`); the software events are available and, without a hardware PMU,
# the hardware events are listed as unavailable.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok events
cp out events.txt
bad=$(awk 'NF < 3 || ($3 != "available" && $3 != "unavailable")' events.txt)
[[ -z $bad ]] || fail "tally events: lines not of the form 'name type available|unavailable description': $bad"

# the state of event $1; the name column may list aliases: `page-faults|faults`
state() { awk -v e="$1" '{ n = split($1, a, "|"); for (i = 1; i <= n; i++) if (a[i] == e) { print $3; exit } }' events.txt; }
for e in cpu-clock task-clock page-faults context-switches; do
	s=$(state $e)
	[[ $s == available ]] || fail "tally events: $e is '${s:-not listed}', expected available"
done
if have_hw_pmu; then
	echo "note: this machine has a hardware PMU; unavailable hardware events not checked"
else
	for e in cycles instructions; do
		s=$(state $e)
		[[ $s == unavailable ]] || fail "tally events: $e is '${s:-not listed}', expected unavailable (no hardware PMU here)"
	done
fi
note "tally events: $(wc -l <events.txt) events, cpu-clock available"
