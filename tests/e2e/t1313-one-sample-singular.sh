#!/bin/bash
# One sample is "1 sample", not "1 samples": record's closing line, the SVG
# flame graph's frames and subtitle, and the HTML report's flame graph and
# unwinding line. A recording at 1 Hz of 1.5 s of CPU on one CPU has one
# sample (on two, the time a command's events count is split between the CPUs:
# a busy machine that moved it about gave none).
. "$SRCDIR/tests/e2e/lib.sh"
need_tool taskset util-linux

"$TALLY" record -g -F 1 --no-randomize -o one.db -- taskset -c 0 "$WORKLOADS/split_funcs" 1500 >/dev/null 2>rec.err ||
	fail "record failed: $(cat rec.err)"
n=$("$TALLY" report -i one.db --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"][0]["samples"])')
[[ $n == 1 ]] || fail "the 1 Hz recording of 1.5 s of CPU on CPU 0 took $n samples, not 1: $(cat rec.err)"
grep -q "^tally: wrote 'one.db': 1 sample, 0 lost" rec.err || fail "record says: $(cat rec.err)"
# (in samples: by default the figures are msec)
"$TALLY" export -i one.db --format svg --samples -o one.svg 2>/dev/null || fail "export svg failed"
"$TALLY" report -i one.db --html one.html --samples 2>/dev/null || fail "report --html failed"
for f in one.svg one.html rec.err; do
	! grep -q '\b1 samples' $f || fail "$f says '1 samples': $(grep -o '.\{30\}1 samples.\{20\}' $f | head -2)"
done
grep -q '1 sample' one.svg || fail "the SVG does not say '1 sample'"
grep -q '1 sample' one.html || fail "the HTML report does not say '1 sample'"
