#!/bin/bash
# frame-pointer call graphs keep the caller of a leaf: leafsplit spends its time
# in work(), a true leaf that GCC -O2 gives no frame, called from hot_a, hot_b
# and hot_c 6:3:1 by the workload's own clock. A plain frame-pointer chain (perf
# -g, and tally before) shows driver as work's caller and loses the three; tally
# -g puts the caller back from the CFI and the stack copy, so the inclusive
# shares of hot_a/hot_b/hot_c match the truth and perf's DWARF mode on the same
# run (perf attached to the process tally records), within the binomial error
# of their samples, and the unwind line counts the repaired stacks. Where the
# copy cannot tell (a return address beyond a 128-byte copy), the line says a
# caller may be missing, and why.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/leafsplit"

# shares FILE: `NAME PERCENT N` of hot_a/hot_b/hot_c's inclusive samples among
# the three, N their samples
shares() {
	python3 - "$1" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
inc = {f["name"]: f["inclusive"] for f in e["functions"] if f["name"] in ("hot_a", "hot_b", "hot_c")}
tot = sum(inc.values())
for n in ("hot_a", "hot_b", "hot_c"):
    print(n, "%.2f" % (100.0 * inc.get(n, 0) / tot if tot else 0.0), tot)
PY
}

tally_repairs() {
	tally_ok record -g -o fp.db -- "$W" 1500
	cp "$TMP/out" truth.txt
	report_json fp.json -i fp.db --children
	shares fp.json >fp.shares
	for n in hot_a hot_b hot_c; do
		read -r _ sh tot < <(awk -v n=$n '$1 == n' fp.shares)
		share_near "$sh" "$tot" "$(truth $n truth.txt)" "tally -g: $n inclusive share"
	done
	python3 - fp.json <<'PY' || fail "unwind.fp_leaf: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["unwind"])' fp.json)"
import json, sys
u = json.load(open(sys.argv[1]))["events"][0]["unwind"]
f = u.get("fp_leaf") or {}
ok = f.get("checked", 0) >= 0.95 * u["samples"] and f.get("repaired", 0) >= 0.9 * f.get("checked", 1)
print("ok: fp_leaf", f, "of", u["samples"], "samples")
sys.exit(0 if ok else 1)
PY
	report_text fp.txt -i fp.db --children
	grep -Eq '^unwind: .*frame pointers: functions without a frame pointer at the top of the stack were unwound with CFI in (9[0-9]|100)\.[0-9]+% of the stacks' fp.txt ||
		fail "the unwind line does not count the repaired stacks: $(grep '^unwind:' fp.txt)"
}

against_perf() {
	local all in3 sh tot p m
	# perf --call-graph dwarf on the run tally -g records (perf follows tally
	# into the workload): the same run, under the same load
	PERF_OPTS="--call-graph dwarf" perf_around perf-dw.data "$TALLY" record -g -o fp2.db -- "$W" 1500
	report_json fp2.json -i fp2.db --children
	shares fp2.json >fp2.shares
	# perf's inclusive percents (of all its samples, tally's too) of hot_*, and its samples
	perf_report -i perf-dw.data --children --sort sym -g none --comm leafsplit |
		awk '$NF ~ /^hot_[abc]$/ { sub("%", "", $1); print $NF, $1 }' >perf-dw.raw
	all=$(perf_report -i perf-dw.data -n --no-children --sort comm -g none | awk '$1 ~ /%$/ { s += $2 } END { print s + 0 }')
	in3=$(awk '{ s += $2 } END { print s + 0 }' perf-dw.raw)
	fcmp "$in3" ">" 25 || skip "perf --call-graph dwarf finds hot_* in only ${in3}% of its samples here"
	for n in hot_a hot_b hot_c; do
		read -r _ sh tot < <(awk -v n=$n '$1 == n' fp2.shares)
		p=$(awk -v n=$n -v t="$in3" '$1 == n { printf "%.2f", 100 * $2 / t }' perf-dw.raw)
		share_near "$sh" "$tot" "${p:-0}" "tally -g vs perf --call-graph dwarf of the same run: $n inclusive share" \
			"$(awk -v a="$all" -v t="$in3" 'BEGIN { printf "%d", a * t / 100 }')"
	done
	# perf -g: the same chain without the repair (hot_* lost), for the record
	HOME=$TMP/perfhome perf record -q -e cpu-clock -F 999 -g -o perf-fp.data -- "$W" 300 >/dev/null 2>perf.err ||
		fail "perf record -g failed: $(head -c 300 perf.err)"
	m=$(perf_report -i perf-fp.data --children --sort sym -g none | awk '$NF ~ /^hot_[abc]$/ { sub("%", "", $1); s += $1 } END { print s + 0 }')
	note "perf -g: hot_a+hot_b+hot_c inclusive ${m}% of all samples (the caller of the leaf lost)"
}

short_copy_said() {
	# a leaf with a big local frame and no frame pointer: its return address is beyond a 128-byte
	# copy, so it cannot be checked, and the unwind line says a caller may be
	# missing, and why (instead of a clean 100% rooted)
	cat >big.c <<'C'
#include <stdio.h>
#include <stdint.h>
#include <time.h>
__attribute__((noinline, optimize("omit-frame-pointer"))) uint64_t big_leaf(uint64_t s)
{
	volatile uint64_t buf[64];
	for (int r = 0; r < 20000; r++)
		for (int i = 0; i < 64; i++)
			buf[i] = s = s * 6364136223846793005u + (uint64_t)i;
	return buf[7];
}
__attribute__((noinline)) uint64_t mid(uint64_t s) { return big_leaf(s) + 1; }
int main(void)
{
	uint64_t s = 1;
	clock_t end = clock() + CLOCKS_PER_SEC / 2;
	while (clock() < end)
		s = mid(s);
	printf("%llu\n", (unsigned long long)s);
	return 0;
}
C
	need_tool cc gcc
	cc -O2 -fno-omit-frame-pointer -o big big.c
	tally_ok record --call-graph fp,128 -o big.db -- ./big
	report_text big.txt -i big.db --children
	grep -Eq '^unwind: .*the chain could not be rejoined in (9[0-9]|100)\.[0-9]+% \((.*, )?stack copy too small [0-9.]+% of 128 bytes.*\): a caller may be missing there' big.txt ||
		fail "the unwind line does not say the stacks it could not check: $(grep '^unwind:' big.txt)"
	grep -Eq '^unwind: .*a caller may be missing there; a larger stack copy reaches further \(--call-graph fp,16384, or dwarf\)' big.txt ||
		fail "the unwind line does not say how to reach further: $(grep '^unwind:' big.txt)"
	note "$(grep '^unwind:' big.txt)"
}

subtest tally-repairs tally_repairs
subtest against-perf against_perf
subtest short-copy-said short_copy_said
