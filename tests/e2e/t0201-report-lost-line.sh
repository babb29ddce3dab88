#!/bin/bash
# every text report, whatever its filters, ends its tables with the
# `lost:` line (lost and throttled samples), so missing data is never silent.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record --per-pid -F 2000 -o db -- "$WORKLOADS/split_funcs" 300
pid=$(workload_pid out)

i=0
while IFS= read -r args; do
	i=$((i + 1))
	read -ra argv <<<"$args"
	report_text r$i.txt -i db "${argv[@]}"
	grep -Eq '^lost:.*[0-9]' r$i.txt ||
		fail "report $args: no line starting with 'lost:' and giving a number; report: $(head -c 1500 r$i.txt)"
	note "report $args: $(grep -E '^lost:' r$i.txt | head -1)"
done <<EOT

--symbols
--exclude-dependent
--top 1
--symbols --top 2
--image split_funcs
--image split_funcs --symbols
--event cpu-clock
--pid $pid
--comm split_funcs --symbols
EOT
