#!/bin/bash
# record split_kernel: the user/kernel split (image `kernel`) matches the
# workload's measured split; user time lands in user_spin.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 4000 -o db -- "$WORKLOADS/split_kernel" 1000
cp out truth.txt

report_json img.json -i db
total=$(tjson img.json total)
kern=$(tjson img.json image kernel)
((total > 0)) || fail "the report has no samples"
images=$(tjson img.json images)
has_line kernel "$images" || fail "no image 'kernel' in the report; images: $(tr '\n' ' ' <<<"$images")"
kpct=$(awk -v k="$kern" -v t="$total" 'BEGIN { printf "%.2f", 100 * k / t }')
upct=$(awk -v k="$kern" -v t="$total" 'BEGIN { printf "%.2f", 100 * (t - k) / t }')
tk=$(truth kernel truth.txt)
tu=$(truth user truth.txt)
share_near "$kpct" "$total" "$tk" "kernel share ($kern samples)"
share_near "$upct" "$total" "$tu" "user share ($((total - kern)) samples)"

report_json sym.json -i db --symbols
us=$(tjson sym.json func user_spin split_kernel)
own=$(tjson sym.json image split_kernel)
((own > 0)) || fail "image split_kernel has no samples"
fcmp "$us" '>=' "$(awk -v o="$own" 'BEGIN { print 0.9 * o }')" ||
	fail "user_spin has $us of the $own samples in image split_kernel, expected at least 90%"
note "user_spin: $us of $own samples in split_kernel"
