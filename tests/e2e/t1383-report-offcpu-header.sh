#!/bin/bash
# A report's header says what its numbers are: off-CPU events are waits
# weighed by their time (never "frequency 999", which is the on-CPU event's
# sampling), --samples counts waits, --wall names both halves and where its
# randomization applies, --off-cpu-min says which waits were dropped; and
# report --sort says the same.
. "$SRCDIR/tests/e2e/lib.sh"

"$TALLY" events >events.txt 2>/dev/null || true
grep -Eq '^off-cpu +tracepoint +available' events.txt ||
	skip "off-CPU recording is unavailable here (needs root and tracefs): $("$TALLY" record --off-cpu -o x -- true 2>&1 | head -1)"

tally_ok record --off-cpu --off-cpu-min 1ms -o db -- "$WORKLOADS/offcpu_split" 1
waits=$(session_key db off-cpu-waits | cut -d, -f1)
((waits > 0)) || fail "no off-CPU waits recorded: $(grep off-cpu db/session)"

tally_ok report -i db --event off-cpu
sed -n 2,3p out >h.txt
grep -q '^# event: off-cpu, every wait off the CPU (blocked' h.txt || fail "off-cpu's event line: $(head -1 h.txt)"
grep -q 'frequency' h.txt && fail "off-cpu's header names the on-CPU sampling frequency: $(cat h.txt)"
grep -q 'waits under 1 ms dropped' h.txt || fail "--off-cpu-min 1ms is not in the event line: $(head -1 h.txt)"
grep -q "^# values: msec, the time of each wait off the CPU ($waits waits in all)" h.txt ||
	fail "off-cpu's values line does not say msec of $waits waits: $(sed -n 2p h.txt)"

tally_ok report -i db --event off-cpu --samples
grep -q "^# values: waits ($waits in all), not weighted by their time" out ||
	fail "--samples of off-cpu does not count waits: $(sed -n 3p out)"

tally_ok report -i db --event off-cpu-preempted
grep -q '^# event: off-cpu-preempted, every wait off the CPU (preempted' out || fail "off-cpu-preempted's event line: $(sed -n 2p out)"

tally_ok report -i db --wall
grep -q '^# event: wall: on the CPU sampled (frequency 999, randomized), and every wait off the CPU' out ||
	fail "--wall's event line: $(sed -n 2p out)"
[[ $(sed -n 2p out) == *"(randomized)" ]] && fail "--wall's event line calls the waits randomized: $(sed -n 2p out)"
grep -q '^# values: msec, on-CPU samples weighted by period and waits off the CPU by their time' out ||
	fail "--wall's values line: $(sed -n 3p out)"

# the on-CPU event keeps its own header
tally_ok report -i db --event cpu-clock
grep -q '^# event: cpu-clock, frequency 999 (randomized)$' out || fail "cpu-clock's event line: $(sed -n 2p out)"
grep -q '^# values: msec, weighted by period (the time each sample stands for' out || fail "cpu-clock's values line: $(sed -n 3p out)"

tally_ok report -i db --event off-cpu --sort comm
grep -q "^# values: msec, the time of each wait off the CPU ($waits waits in all)" out ||
	fail "report --sort's values line for off-cpu: $(grep '^#' out | head -3)"
