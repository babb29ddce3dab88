#!/bin/bash
# record -p: attaching to running processes for --duration 1 profiles them
# (sleeper_burn), stops on time, leaves them running, and -p takes a list.
. "$SRCDIR/tests/e2e/lib.sh"

F=2000
"$WORKLOADS/sleeper" 30 burn >burn.out 2>&1 &
burner=$!
track_pid $burner
"$WORKLOADS/sleeper" 30 >idle.out 2>&1 &
idler=$!
track_pid $idler
wait_for_line burn.out '^pid '
wait_for_line idle.out '^pid '

start=$(date +%s.%N)
tally_ok record -p $burner --duration 1 -F $F -o db
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
between "$elapsed" 0.9 5 ||
	fail "record -p PID --duration 1 took $elapsed s, expected about 1 s"
alive $burner || fail "the attached process died: record -p must leave it running"
note "record -p --duration 1 took $elapsed s; the target is still running"

report_json sym.json -i db --symbols
total=$(tjson sym.json total)
burn=$(tjson sym.json func sleeper_burn sleeper)
fcmp "$burn" '>=' "$(awk -v t="$total" 'BEGIN { print 0.9 * t }')" ||
	fail "sleeper_burn has $burn of $total samples, expected at least 90% (images: $(tjson sym.json images | tr '\n' ' '))"
# one busy thread for 1 s at -F $F: at most ~F samples; at least a quarter
# even when the machine is shared with other tests
between "$total" $((F / 4)) $((F * 3 / 2)) ||
	fail "1 s attached to a busy process at -F $F gave $total samples, expected between $((F / 4)) and $((F * 3 / 2))"
note "sleeper_burn: $burn of $total samples"

# a list of pids, kept apart with --per-pid
tally_ok record -p "$burner,$idler" --per-pid --duration 1 -F $F -o list
for p in $burner $idler; do
	report_json "p$p.json" -i list --pid "$p" --symbols
	n=$(tjson "p$p.json" func sleeper_burn)
	((n > 0)) || fail "record -p $burner,$idler: process $p has no samples in sleeper_burn"
	note "-p list: process $p has $n samples in sleeper_burn"
done
alive $idler || fail "the attached idle process died"
