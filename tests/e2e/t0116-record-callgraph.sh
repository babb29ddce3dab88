#!/bin/bash
# record -g / --call-graph fp still gives the right flat profile: leaf holds
# nearly all samples of callsplit, built with and without frame pointers,
# and the database gets its `stacks` file.
. "$SRCDIR/tests/e2e/lib.sh"

for opt in -g "--call-graph fp"; do
	for w in callsplit_fp callsplit_nofp; do
		db=db-${opt//[ -]/}-$w
		read -ra o <<<"$opt"
		tally_ok record "${o[@]}" -F 2000 -o "$db" -- "$WORKLOADS/$w" 300
		[[ -s $db/stacks ]] || fail "record $opt: the database has no 'stacks' file (docs/format.md); files: $(ls "$db" | tr '\n' ' ')"
		n=$(stacks_text "$db" | grep -vc '^#') || true
		((n > 0)) || fail "record $opt: the 'stacks' file holds no stack: $(stacks_text "$db" | head -c 300)"
		# its calls are picked at random, one of two: 3:1 of the time within their scatter
		SHARE_OF=calls share_near "$(truth caller_a)" "$(info_val calls)" 75 "$w: the workload's own caller_a share"
		report_json "$db.json" -i "$db" --symbols
		total=$(tjson "$db.json" total)
		leaf=$(tjson "$db.json" func leaf "$w")
		fcmp "$leaf" '>=' "$(awk -v t="$total" 'BEGIN { print 0.9 * t }')" ||
			fail "record $opt -- $w: leaf has $leaf of $total samples, expected at least 90%"
		note "record $opt -- $w: leaf $leaf of $total samples"
	done
done
