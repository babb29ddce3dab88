#!/bin/bash
# Exports carry the resolver's source lines and inline chains: inline_chain
# (built -O2 -g, leaf_mix and mid_mix always_inline in hot_loop) exported as
# pprof gives locations whose lines name the three spin lines, with the
# inlined functions as frames of their own (`go tool pprof -lines -top`), and
# callgrind places hot_loop's self cost in inline_chain.c at those lines
# (file names absolute: the compilation directory joined, so
# callgrind_annotate finds and annotates the source).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

W="$WORKLOADS/inline_chain"
tally_ok record -g -F 2000 -o db -- "$W" 800
cp out truth.txt
lh=$(info_val line_hot truth.txt)
lm=$(info_val line_mid truth.txt)
ll=$(info_val line_leaf truth.txt)
# the exports are checked against tally's own report of the same recording
# (the same samples: to their rounding), and that report once against the
# workload's split (within the binomial error of its samples)
report_json lines.json -i db --lines
python3 - lines.json "$lh" "$lm" "$ll" >lines.txt <<'PY' || fail "report --lines --json: $(cat lines.txt)"
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
img = [i for i in e["images"] if i["name"] == "inline_chain"]
if not img:
    sys.exit("no image inline_chain")
want = dict(zip(("hot_loop", "mid_mix", "leaf_mix"), (int(x) for x in sys.argv[2:5])))
rows = {f: [r for r in img[0]["lines"] if r["function"] == f and r["line"] == l] for f, l in want.items()}
if not all(rows.values()):
    sys.exit("no line row for %s" % [f for f, r in rows.items() if not r])
n = sum(r[0]["samples"] for r in rows.values())
v = sum(r[0]["value"] for r in rows.values())
# NAME, its share of the three by samples and by value, its percent of the
# event's value, the three's samples
for f, r in rows.items():
    print(f, "%.4f" % (100.0 * r[0]["samples"] / n), "%.4f" % (100.0 * r[0]["value"] / v),
          "%.4f" % (100.0 * r[0]["value"] / e["value"]), n)
PY
while read -r fn sh _ _ n; do
	share_near "$(printf %.2f "$sh")" "$n" "$(truth "$fn" truth.txt)" "tally report --lines: the line of $fn, of the three"
done <lines.txt
# col NAME K: column K of NAME's line in lines.txt
col() { awk -v f="$1" -v k="$2" '$1 == f { print $k }' lines.txt; }
src=$(cd "$SRCDIR" && pwd)/tests/workloads/inline_chain.c

pprof_lines() {
	local want fn pct
	need_tool go golang-go
	tally_ok export -i db --format pprof -o p.pb.gz
	gopprof_ok top.txt -lines -top -nodecount=50 p.pb.gz
	for want in "leaf_mix .*inline_chain.c:$ll" "mid_mix .*inline_chain.c:$lm" "hot_loop .*inline_chain.c:$lh"; do
		grep -Eq "$want" top.txt || fail "go tool pprof -lines -top has no line matching '$want': $(cat top.txt)"
	done
	# the truth is each function's share of the three together: so is pprof's
	# flat% here, renormalized over the three rows (the rest of the samples,
	# the kernel's and the loader's, are in neither)
	local sum3
	sum3=$(awk '$6 == "leaf_mix" || $6 == "mid_mix" || $6 == "hot_loop" { sub(/%/, "", $2); if (!seen[$6]++) s += $2 } END { print s + 0 }' top.txt)
	for fn in leaf_mix mid_mix hot_loop; do
		pct=$(awk -v f="$fn" -v s="$sum3" '$6 == f { sub(/%/, "", $2); printf "%.2f", s ? 100 * $2 / s : 0; exit }' top.txt)
		# (pprof prints two decimals of a percent of the whole, three times)
		near "${pct:-0}" "$(col "$fn" 3)" 0.05 "go tool pprof -lines -top: $fn flat% of the three, against tally report --lines"
	done
	# the leaf's location has the inline chain: leaf_mix inlined in mid_mix in hot_loop
	gopprof_ok traces.txt -traces p.pb.gz
	grep -A3 -E '^ +[0-9].* leaf_mix \(inline\)$' traces.txt | grep 'mid_mix' >/dev/null ||
		fail "go tool pprof -traces: leaf_mix is not followed by its inlining caller mid_mix: $(head -40 traces.txt)"
	note "pprof: lines $ll/$lm/$lh and the inline chain leaf_mix < mid_mix < hot_loop"
}

# the file names in callgrind's fl= lines (no tool needed)
callgrind_files() {
	tally_ok export -i db --format callgrind -o cg.out
	grep -q "^fl=([0-9]*) $src\$" cg.out || fail "callgrind: no fl= naming $src: $(grep '^fl=' cg.out | head)"
}

callgrind_lines() {
	local hot call lo hi
	need_tool callgrind_annotate valgrind
	tally_ok export -i db --format callgrind -o cg.out
	callgrind_annotate cg.out >ann.txt 2>&1 || fail "callgrind_annotate failed: $(head -c 1000 ann.txt)"
	grep -q "Auto-annotated source: $src" ann.txt || fail "callgrind_annotate did not annotate $src: $(head -60 ann.txt)"
	# hot_loop's own spin line carries hot_loop's self share; the inlined code's cost
	# sits on its call site in hot_loop (the line that calls mid_mix)
	hot=$(awk '/line_hot = __LINE__;/ && /%\)/ { gsub(/[(%)]/, "", $2); print $2; exit }' ann.txt)
	[[ -n $hot ]] || fail "callgrind_annotate: no cost on the line_hot source line: $(grep -A30 'Auto-annotated' ann.txt)"
	# (callgrind_annotate prints a percent of the whole to a tenth or a hundredth)
	near "$hot" "$(col hot_loop 4)" 0.06 "callgrind_annotate: hot_loop's spin line, against tally report --lines"
	call=$(awk '/return mid_mix\(/ && /%\)/ { gsub(/[(%)]/, "", $2); print $2; exit }' ann.txt)
	# the call site holds the inlined lines' cost (mid_mix's and leaf_mix's
	# lines in tally report --lines) and at most all that mid_mix runs (its
	# inclusive figure in --children: the kernel's time in the clock reads
	# inlined with it too), to callgrind_annotate's rounding
	report_json ch.json -i db --children
	lo=$(awk -v a="$(col mid_mix 4)" -v b="$(col leaf_mix 4)" 'BEGIN { printf "%.4f", a + b - 0.06 }')
	hi=$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
print("%.4f" % (100.0 * [f["inclusive_value"] for f in e["functions"] if f["name"] == "mid_mix"][0] / e["value"] + 0.06))' ch.json)
	between "${call:-0}" "$lo" "$hi" ||
		fail "callgrind_annotate: the inlined mid_mix + leaf_mix at their call site hold ${call:-0}%, expected from their lines' $lo% to mid_mix's inclusive $hi% (tally report)"
	note "callgrind_annotate: the call site of the inlined code ${call:-0}%, between its lines' $lo% and mid_mix's inclusive $hi%"
	note "callgrind: $src annotated by callgrind_annotate"
}

subtest "pprof -lines: the three lines and the inline chain" pprof_lines
subtest "callgrind: absolute source file names" callgrind_files
subtest "callgrind_annotate: the lines of hot_loop and of the inlined code" callgrind_lines
