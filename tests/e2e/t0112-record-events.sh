#!/bin/bash
# record -e: page-faults samples every fault (-c 1) where it happens; two
# events are kept apart (report --event, JSON lists both); hardware events
# such as cycles are refused on a machine without a PMU, naming cpu-clock.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -e page-faults -c 1 -o pf -- "$WORKLOADS/touchmem" 4096 8
faults=$(truth faults)
report_json pf.json -i pf --symbols
n=$(tjson pf.json func touch_pages touchmem)
between "$n" "$(awk -v f="$faults" 'BEGIN { print 0.95 * f }')" "$(awk -v f="$faults" 'BEGIN { print 1.05 * f }')" ||
	fail "-e page-faults -c 1: touch_pages has $n samples, the workload counted $faults page faults there (+/-5%)"
note "page-faults: touch_pages $n samples, $faults faults counted by the workload"

tally_ok record -e cpu-clock,page-faults -F 2000 -o two -- "$WORKLOADS/touchmem" 4096 40
report_json two.json -i two
events=$(tjson two.json events)
[[ $events == $'cpu-clock\npage-faults' ]] ||
	fail "-e cpu-clock,page-faults: the JSON report lists events [$(tr '\n' ' ' <<<"$events")], expected exactly cpu-clock and page-faults"

report_json pfo.json -i two --event page-faults --symbols
report_json cco.json -i two --event cpu-clock
pft=$(tjson pfo.json total)
cct=$(tjson cco.json total)
((pft > 0)) || fail "report --event page-faults: no samples"
((cct > 0)) || fail "report --event cpu-clock: no samples"
tp=$(tjson pfo.json func touch_pages)
fcmp "$tp" '>=' "$(awk -v t="$pft" 'BEGIN { print 0.8 * t }')" ||
	fail "report --event page-faults: touch_pages has $tp of $pft samples, expected at least 80%"
for pair in page-faults:pfo.json cpu-clock:cco.json; do
	e=${pair%%:*} f=${pair#*:}
	evs=$(tjson "$f" events)
	[[ -z $evs || $evs == "$e" ]] || fail "report --event $e: the JSON lists events [$(tr '\n' ' ' <<<"$evs")]"
	both=$(tjson two.json total "$e")
	one=$(tjson "$f" total)
	[[ $both == "$one" ]] || fail "event $e: $both samples in the unfiltered report, $one with --event $e"
done
report_text pfo.txt -i two --event page-faults
ttext pfo.txt check image
note "two events: page-faults $pft samples (touch_pages $tp), cpu-clock $cct"

if have_hw_pmu; then
	echo "note: this machine has a hardware PMU; the refusal of -e cycles is not checked"
else
	expect_fail_with "cpu-clock" "$TALLY" record -e cycles -o cyc -- "$WORKLOADS/exitcode" 0
	[[ ! -e cyc ]] || fail "record -e cycles was refused but created the database"
	expect_fail_with "cpu-clock" "$TALLY" record -e cpu-clock,cycles -o cyc2 -- "$WORKLOADS/exitcode" 0
	[[ ! -e cyc2 ]] || fail "record -e cpu-clock,cycles was refused but created the database"
fi
