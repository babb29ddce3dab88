#!/bin/bash
# A fixed sampling period in step with the workload still gives its measured
# split: split_funcs takes its next call at random (workload.h, wl_pick), so a
# period near the length of three of its calls (what was a round of work_a,
# work_b and work_c, 10 units: about 1 ms, in step with 999 Hz) lands in each
# function with the probability of its share of the time.  Five recordings
# with --no-randomize -c P, P from 0.99 to 1.01 of that length measured here:
# every function's share within the binomial error of its samples (in fixed
# rounds one of them was 9 to 13 sigmas off: the samples fell on the same
# point of the round for hundreds of periods on end).
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/split_funcs
"$W" 300 >cal.out
rounds=$(info_val rounds cal.out)
cpu_ms=$(info_val cpu_ms cal.out)
len=$(awk -v r="$rounds" -v ms="$cpu_ms" 'BEGIN { printf "%d", ms * 1e6 / r }')
note "three calls (10 units) take $len ns of CPU here ($rounds in $cpu_ms ms)"

in_step() {
	local p
	p=$(awk -v l="$len" -v f="$1" 'BEGIN { printf "%d", l * f }')
	tally_ok record --no-randomize -c "$p" -o "p$1.db" -- "$W" 400
	cp out "p$1.truth"
	report_json "p$1.json" -i "p$1.db" --symbols
	check_split func "p$1.json" "p$1.truth" work_a work_b work_c
}

for f in 0.975 0.980 0.985 0.990 0.995 1.000 1.005 1.010 1.015 1.020 1.025; do
	subtest "a period of $f times three calls" in_step $f
done
