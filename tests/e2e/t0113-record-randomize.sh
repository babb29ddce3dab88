#!/bin/bash
# sample periods: --no-randomize -c N keeps the period at N (the kernel reports
# period-min == period-max == N, and the measured intervals between samples stay
# within a few percent of N); by default the intervals the timer really used
# (session interval-p10-p50-p90) spread around N by about +-10% while the mean
# stays N, so -c N still gives about one sample per N ns of CPU time.
. "$SRCDIR/tests/e2e/lib.sh"

P=100000
for mode in fixed random; do
	opt=() ms=1000
	[[ $mode == fixed ]] && opt=(--no-randomize)
	# a new period is drawn every 200 ms: 6 s give about 30 draws, enough for
	# their p10..p90 to show the spread (5 draws in 1 s left it under 10% about
	# one run in eleven) and for their median to stay within 8% of the period
	# (15 draws in 3 s left it at -8.0% once, under the sanitizers: the median
	# of n uniform draws of +-12.5% wanders by about 9%/sqrt(n))
	[[ $mode == random ]] && ms=6000
	tally_ok record "${opt[@]}" -c $P -o $mode -- "$WORKLOADS/split_funcs" $ms
	cpu_ms=$(info_val cpu_ms)
	min=$(session_key $mode period-min)
	max=$(session_key $mode period-max)
	iv=$(session_key $mode interval-p10-p50-p90)
	[[ $iv =~ ^([0-9]+)/([0-9]+)/([0-9]+)$ ]] ||
		fail "$mode: interval-p10-p50-p90 is '$iv', expected P10/P50/P90; session: $(head -c 1000 $mode/session)"
	p10=${BASH_REMATCH[1]} p50=${BASH_REMATCH[2]} p90=${BASH_REMATCH[3]}
	spread=$(awk -v a=$p10 -v b=$p90 -v p=$P 'BEGIN { printf "%.1f", 100 * (b - a) / p }')
	# the median interval is the mean period whether randomized or not (randomized:
	# about 5 draws a second, so the median of those draws wanders a little)
	tol=5
	[[ $mode == random ]] && tol=8
	between "$p50" $((P * (100 - tol) / 100)) $((P * (100 + tol) / 100)) || fail "$mode: median interval $p50 ns, expected $P +-$tol%"
	if [[ $mode == fixed ]]; then
		((min == P && max == P)) || fail "--no-randomize -c $P: period-min $min, period-max $max, expected both $P"
		awk -v s=$spread 'BEGIN { exit !(s < 6) }' ||
			fail "--no-randomize: intervals p10..p90 $p10..$p90 spread ${spread}% of the period, expected under 6%"
	else
		awk -v s=$spread 'BEGIN { exit !(s > 10) }' ||
			fail "randomized: intervals p10..p90 $p10..$p90 spread only ${spread}% of the period, expected over 10% (a new period every 200 ms, uniform +-12.5%, gives ~20%)"
	fi
	report_json $mode.json -i $mode
	total=$(tjson $mode.json total)
	expect=$(awk -v ms="$cpu_ms" -v p=$P 'BEGIN { printf "%d", ms * 1e6 / p }')
	between "$total" "$(awk -v e="$expect" 'BEGIN { print 0.75 * e }')" "$(awk -v e="$expect" 'BEGIN { print 1.25 * e + 50 }')" ||
		fail "$mode -c $P: $total samples over ${cpu_ms} ms of CPU time, expected about $expect"
	note "$mode: intervals p10/p50/p90 $p10/$p50/$p90 ns (spread ${spread}%), $total samples (expected ~$expect)"
done
