#!/bin/bash
# record split_images: the split between the program, libtallywork.so and
# libc.so.6 matches the workload's measurement; functions land in their image.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 4000 -o db -- "$WORKLOADS/split_images" 1000
cp out truth.txt

report_json img.json -i db
check_split image img.json truth.txt split_images libtallywork.so libc.so.6

total=$(tjson img.json total)
three=0
for i in split_images libtallywork.so libc.so.6; do
	n=$(tjson img.json image "$i")
	three=$((three + n))
done
fcmp "$three" '>=' "$(awk -v t="$total" 'BEGIN { print 0.95 * t }')" ||
	fail "the three images have $three of $total samples, expected at least 95%; images: $(tjson img.json images | tr '\n' ' ')"
note "three images: $three of $total samples"

report_json sym.json -i db --symbols
for pair in own_work:split_images lib_work:libtallywork.so; do
	f=${pair%%:*} i=${pair#*:}
	n=$(tjson sym.json func "$f" "$i")
	all=$(tjson sym.json func "$f")
	((n > 0)) || fail "function $f has no samples in image $i ($all samples in any image)"
	[[ $n == "$all" ]] || fail "function $f: $n samples in image $i but $all in all images"
	note "$f: $n samples, all in $i"
done
