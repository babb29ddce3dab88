#!/bin/bash
# record a multi-threaded program: every thread's function shows, with the
# near-equal shares the threads measured.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 4000 -o db -- "$WORKLOADS/threads" 4 250
cp out truth.txt

report_json sym.json -i db --symbols
check_split func sym.json truth.txt thread_fn_0 thread_fn_1 thread_fn_2 thread_fn_3

total=$(tjson sym.json total)
sum=0
for i in 0 1 2 3; do
	n=$(tjson sym.json func thread_fn_$i threads)
	sum=$((sum + n))
done
fcmp "$sum" '>=' "$(awk -v t="$total" 'BEGIN { print 0.9 * t }')" ||
	fail "thread_fn_0..3 in image threads have $sum of $total samples, expected at least 90%"
note "thread_fn_0..3: $sum of $total samples"
