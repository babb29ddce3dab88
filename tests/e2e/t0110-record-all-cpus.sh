#!/bin/bash
# record -a: the whole system, kernel included: a running workload's image
# and `kernel` show.  -C: only the listed CPUs: a process pinned to CPU 0
# shows with -C 0 and not with -C 1.
. "$SRCDIR/tests/e2e/lib.sh"

"$WORKLOADS/split_kernel" 5000 >sk.out 2>&1 &
wl=$!
track_pid $wl
wait_for_line sk.out '^pid '
tally_ok record -a --duration 1 -F 1000 -o all
kill $wl
report_json all.json -i all
images=$(tjson all.json images)
for i in split_kernel kernel; do
	has_line "$i" "$images" || fail "record -a: no image '$i' in the report; images: $(tr '\n' ' ' <<<"$images")"
done
note "record -a: split_kernel $(tjson all.json image split_kernel), kernel $(tjson all.json image kernel) samples"

# a uniquely named copy, so other tests running at the same time cannot
# contribute samples to its image
pin=tally_pinned_$$
cp "$WORKLOADS/sleeper" "$pin"
taskset -c 0 "./$pin" 30 burn >pin.out 2>&1 &
pp=$!
track_pid $pp
wait_for_line pin.out '^pid '

tally_ok record -a -C 0 --duration 1 -F 1000 -o c0
report_json c0.json -i c0
n=$(tjson c0.json image "$pin")
((n >= 100)) || fail "record -a -C 0: the process pinned to CPU 0 has $n samples, expected at least 100 of ~1000; images: $(tjson c0.json images | tr '\n' ' ')"
note "-C 0: pinned process has $n samples"

if (($(nproc) >= 2)); then
	tally_ok record -a -C 1 --duration 1 -F 1000 -o c1
	report_json c1.json -i c1
	n=$(tjson c1.json image "$pin")
	((n == 0)) || fail "record -a -C 1: the process pinned to CPU 0 has $n samples, expected none"
	note "-C 1: pinned process has no samples"
else
	echo "note: one CPU only, -C 1 not checked"
fi
