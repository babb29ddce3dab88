#!/bin/bash
# export --format gmon, read by gprof: the flat profile of the main program
# (the default image) has work_a/b/c with the shares of `tally report
# --symbols --image` and of the workload's measurement, and self seconds of
# the report's period-weighted time (ticks of 1/10000 s; --samples: samples
# at rate 1); from -g stacks, the call graph gives leaf's calls from
# caller_a and caller_b in the measured split; --image picks a library
# (libtallywork.so of split_images); an --image that matches no samples, or
# the kernel, is refused with one line and no file.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

# flat: `% time  cumulative  self  [calls ...]  name`
GPROF_FLAT_PY='
import re, sys
rows = {}
on = False
for l in open(sys.argv[1]):
    if l.strip().startswith("time   seconds"):
        on = True
        continue
    if on:
        m = re.match(r"^\s*(\d+\.\d+)\s+(\d+\.\d+)\s+(\d+\.\d+)\s.*?(\S+)\s*$", l)
        if not m:
            if rows:
                break
            continue
        rows[m.group(4)] = (float(m.group(1)), float(m.group(3)))
for k in sys.argv[2:]:
    p, s = rows.get(k, (None, None))
    print(k, p, s)
'

W=$WORKLOADS/split_funcs
C=$WORKLOADS/callsplit_fp
tally_ok record -F 2000 -o flat.db -- "$W" 800
cp out flat.truth
report_json flat.json -i flat.db --symbols --image split_funcs
tally_ok export -i flat.db --format gmon
tally_ok record -g -F 2000 -o cs.db -- "$C" 400
cp out cs.truth
tally_ok export -i cs.db --format gmon -o cs.gmon
tally_ok record -F 2000 -o img.db -- "$WORKLOADS/split_images" 600

# the file itself, and the refusals (no gprof needed)
file() {
	[[ -s gmon.out ]] || fail "export --format gmon wrote no gmon.out"
	[[ $(head -c 4 gmon.out) == gmon ]] || fail "gmon.out does not start with the 'gmon' magic"
	[[ $(head -c 4 cs.gmon) == gmon ]] || fail "cs.gmon does not start with the 'gmon' magic"
	expect_fail_with "^tally: nothing to export" "$TALLY" export -i img.db --format gmon --image nosuch.so -o none.gmon
	[[ ! -e none.gmon ]] || fail "a refused gmon export left none.gmon"
	expect_fail_with "^tally: .*kernel.*(gprof|file)" "$TALLY" export -i img.db --format gmon --image kernel -o k.gmon
	[[ ! -e k.gmon ]] || fail "a refused gmon export left k.gmon"
}

# gprof's flat profile of the main program
flat() {
	local img rate f pctg secs n want s
	need_tool gprof binutils
	gprof -b -p "$W" gmon.out >flat.txt 2>flat.err || fail "gprof -b -p failed: $(head -c 600 flat.err)"
	[[ ! -s flat.err ]] || fail "gprof complained: $(head -c 600 flat.err)"
	img=$(json_value flat.json)
	rate=$(awk '/Each sample counts as/ { print 1 / $5; exit }' flat.txt)
	[[ $rate == 10000 ]] || fail "gprof: each sample counts as 1/$rate s, expected ticks of 1/10000 s: $(grep 'Each sample' flat.txt)"
	python3 -c "$GPROF_FLAT_PY" flat.txt work_a work_b work_c >flat.rows
	while read -r f pctg secs; do
		[[ $pctg != None ]] || fail "gprof's flat profile has no $f: $(head -20 flat.txt)"
		n=$(TJSON_VALUE=1 tjson flat.json func "$f" split_funcs)
		want=$(awk -v n="$n" -v t="$img" 'BEGIN { printf "%.2f", 100 * n / t }')
		near "$pctg" "$want" 0.2 "gprof: $f's % time against tally report --symbols --image split_funcs ($n of $img ns)"
		near "$secs" "$(awk -v n="$n" 'BEGIN { printf "%.3f", n / 1e9 }')" 0.011 "gprof: $f's self seconds (the report's $n ns)"
	done <flat.rows
	s=$(awk '{ s += $2 } END { print s }' flat.rows)
	# (the three's samples, whose count the shares' error is of)
	n=$(tjson flat.json shares func work_a work_b work_c | awk '{ n += $3 } END { print n }')
	for f in work_a work_b work_c; do
		share_near "$(awk -v f="$f" -v s="$s" '$1 == f { printf "%.2f", 100 * $2 / s }' flat.rows)" "$n" "$(truth "$f" flat.truth)" "gprof: $f's share of work_a/b/c"
	done
}

# call arcs from the stacks
arcs() {
	local a b
	need_tool gprof binutils
	gprof -b "$C" cs.gmon >cg.txt 2>cg.err || fail "gprof -b failed: $(head -c 600 cg.err)"
	# in leaf's entry, its callers: `self children called/total name [i]`
	read -r a b < <(awk '/^\[[0-9]+\].* leaf \[[0-9]+\]$/ { print ca, cb; exit }
		/^ +[0-9.]+ +[0-9.]+ +[0-9]+\/[0-9]+ +caller_a \[/ { split($3, x, "/"); ca = x[1] }
		/^ +[0-9.]+ +[0-9.]+ +[0-9]+\/[0-9]+ +caller_b \[/ { split($3, x, "/"); cb = x[1] }
		/^-+$/ { ca = cb = "" }' cg.txt)
	[[ -n $a && -n $b ]] || fail "gprof's call graph: no caller_a and caller_b lines above leaf: $(sed -n '/Call graph/,$p' cg.txt | head -30)"
	# (the calls of an arc are its samples)
	share_near "$(share "$a" "$b")" $((a + b)) "$(truth caller_a cs.truth)" "gprof call graph: caller_a's share of leaf's calls"
}

# a library
library() {
	local pctg n
	need_tool gprof binutils
	report_json img.json -i img.db --symbols --image libtallywork.so
	tally_ok export -i img.db --format gmon --image libtallywork.so -o lib.gmon
	gprof -b -p "$WORKLOADS/libtallywork.so" lib.gmon >lib.txt 2>lib.err || fail "gprof on libtallywork.so failed: $(head -c 600 lib.err)"
	read -r _ pctg _ < <(python3 -c "$GPROF_FLAT_PY" lib.txt lib_work)
	n=$(TJSON_VALUE=1 tjson img.json func lib_work libtallywork.so)
	near "$pctg" "$(awk -v n="$n" -v t="$(json_value img.json)" 'BEGIN { printf "%.2f", 100 * n / t }')" 0.2 "gprof libtallywork.so: lib_work's % time"
}

# --percent-limit leaves out the arcs under P% (caller_b's quarter under 40%); the histogram stays
limit() {
	need_tool gprof binutils
	tally_ok export -i cs.db --format gmon --percent-limit 40 -o cut.gmon
	gprof -b "$C" cut.gmon >cut.txt 2>/dev/null || fail "gprof -b on the --percent-limit 40 gmon.out failed"
	grep -Eq '^ +[0-9.]+ +[0-9.]+ +[0-9]+/[0-9]+ +caller_a \[' cut.txt || fail "--percent-limit 40 dropped caller_a's arc (75%)"
	! grep -Eq '^ +[0-9.]+ +[0-9.]+ +[0-9]+/[0-9]+ +caller_b \[' cut.txt || fail "--percent-limit 40 kept caller_b's arc (25%)"
	cmp <(gprof -b -p "$C" cs.gmon 2>/dev/null | awk '$NF == "leaf" { print $1, $3 }') <(gprof -b -p "$C" cut.gmon 2>/dev/null | awk '$NF == "leaf" { print $1, $3 }') ||
		fail "--percent-limit changed the flat profile of leaf"
}

# --samples: the bins count samples, one unit each
samples() {
	local n want
	need_tool gprof binutils
	tally_ok export -i flat.db --format gmon --samples -o n.gmon
	grep -q "bins count samples" err || fail "export --format gmon --samples does not say what the bins count: $(cat err)"
	gprof -b -p "$W" n.gmon >n.txt 2>n.err || fail "gprof -b -p on the --samples gmon.out failed: $(head -c 600 n.err)"
	grep -q 'Each sample counts as 1 samples' n.txt || fail "gprof of --samples: $(grep 'Each sample' n.txt)"
	report_json n.json -i flat.db --symbols --image split_funcs --samples
	# `% time  cumulative samples  self samples ... name`
	n=$(awk '$NF == "work_a" && NF >= 4 { print $3; exit }' n.txt)
	want=$(tjson n.json func work_a split_funcs)
	near "$n" "$want" 0.5 "gprof of --samples: work_a's self 'seconds' are its $want samples"
}

subtest "the files and the refusals" file
subtest "gprof: --samples counts samples" samples
subtest "gprof: the flat profile of the main program" flat
subtest "gprof: leaf's callers from the stacks" arcs
subtest "gprof: a library (--image)" library
subtest "gprof: --percent-limit cuts arcs, not the histogram" limit
