#!/bin/bash
# the database holds counts, not samples: recording three times as long
# triples the sample count (as the two runs' measured CPU times, +/-20%: the
# few period draws of a short run) but leaves the size nearly unchanged.
#
# "Nearly": the size may differ by 30% plus 1 KiB.  These databases are only
# a few KiB, and whether a rarely sampled location shows at all (a start-up
# sample in ld.so or libc, one more kernel interrupt path) is chance, each
# costing a profile header or a kernel symbol line.  Storing anything per
# sample would add at least ~5 bytes for each of the ~3000 extra samples.
. "$SRCDIR/tests/e2e/lib.sh"

T=400
tally_ok record -F 4000 -o short.db -- "$WORKLOADS/split_funcs" $T
cs=$(info_val cpu_ms)
tally_ok record -F 4000 -o long.db -- "$WORKLOADS/split_funcs" $((3 * T))
cl=$(info_val cpu_ms)

report_json short.json -i short.db
report_json long.json -i long.db
ns=$(tjson short.json total)
nl=$(tjson long.json total)
((ns > 0)) || fail "the short recording has no samples"
ratio=$(awk -v a="$nl" -v b="$ns" 'BEGIN { printf "%.2f", a / b }')
want=$(awk -v a="$cl" -v b="$cs" 'BEGIN { printf "%.2f", a / b }')
between "$ratio" "$(awk -v w="$want" 'BEGIN { print 0.8 * w }')" "$(awk -v w="$want" 'BEGIN { print 1.2 * w }')" ||
	fail "samples: $cs ms of CPU gave $ns, $cl ms gave $nl (ratio $ratio), expected the CPU times' ratio $want +/- 20%"
note "samples: $ns vs $nl (ratio $ratio; the CPU times' $want)"

ss=$(db_size short.db)
sl=$(db_size long.db)
limit=$(awk -v s="$ss" 'BEGIN { printf "%d", 0.3 * s + 1024 }')
diff=$((sl > ss ? sl - ss : ss - sl))
((diff <= limit)) ||
	fail "database size: $ss bytes for ${T} ms ($ns samples), $sl bytes for $((3 * T)) ms ($nl samples): they differ by $diff bytes, expected at most $limit (30% + 1 KiB); files: $(cd long.db && find . -type f -printf '%p:%s ' )"
note "database size: $ss vs $sl bytes (differ by $diff, limit $limit)"
