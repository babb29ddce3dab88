#!/bin/bash
# frame-pointer call graphs keep the caller of a leaf: leafsplit spends its time
# in work(), a true leaf that GCC -O2 gives no frame, called from hot_a, hot_b
# and hot_c 6:3:1 by the workload's own clock. A plain frame-pointer chain (perf
# -g, and tally before) shows driver as work's caller and loses the three; tally
# -g puts the caller back from the CFI and the stack copy, so the inclusive
# shares of hot_a/hot_b/hot_c match the truth and perf's DWARF mode (each
# against its own run's truth), and the unwind line counts the repaired
# stacks. Where the copy cannot tell (a return address beyond a 128-byte copy),
# the line says a caller may be missing, and why.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/leafsplit"

# shares FILE: `NAME PERCENT` of hot_a/hot_b/hot_c's inclusive samples among the three
shares() {
	python3 - "$1" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
inc = {f["name"]: f["inclusive"] for f in e["functions"] if f["name"] in ("hot_a", "hot_b", "hot_c")}
tot = sum(inc.values())
for n in ("hot_a", "hot_b", "hot_c"):
    print(n, "%.2f" % (100.0 * inc.get(n, 0) / tot if tot else 0.0))
PY
}

tally_repairs() {
	tally_ok record -g -o fp.db -- "$W" 1500
	cp "$TMP/out" truth.txt
	report_json fp.json -i fp.db --children
	shares fp.json >fp.shares
	for n in hot_a hot_b hot_c; do
		near "$(awk -v n=$n '$1 == n { print $2 }' fp.shares)" "$(truth $n truth.txt)" 5 "tally -g: $n inclusive share"
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
	need_tool perf linux-perf
	tally_ok record -g -o fp2.db -- "$W" 1500
	cp "$TMP/out" fp2.truth
	report_json fp2.json -i fp2.db --children
	shares fp2.json >fp2.shares
	# perf -g: the same chain without the repair (hot_* lost); its DWARF mode gets them
	perf record -q -e cpu-clock -F 999 -g -o perf-fp.data -- "$W" 1500 >/dev/null 2>perf.err ||
		skip "perf record failed: $(head -c 300 perf.err)"
	perf record -q -e cpu-clock -F 999 --call-graph dwarf -o perf-dw.data -- "$W" 1500 >perf-dw.truth 2>perf.err ||
		skip "perf record --call-graph dwarf failed: $(head -c 300 perf.err)"
	for m in fp dw; do
		perf report -i perf-$m.data --stdio --children --sort sym -q -g none 2>/dev/null |
			awk '$NF ~ /^hot_[abc]$/ { sub("%", "", $1); print $NF, $1 }' >perf-$m.raw
	done
	fp_lost=$(awk '{ s += $2 } END { print s + 0 }' perf-fp.raw)
	note "perf -g: hot_a+hot_b+hot_c inclusive ${fp_lost}% of all samples (the caller of the leaf lost)"
	total=$(awk '{ s += $2 } END { print s + 0 }' perf-dw.raw)
	fcmp "$total" ">" 50 || skip "perf --call-graph dwarf finds hot_* in only ${total}% of the samples here"
	# two runs of a workload that splits by its own clock: each run's split is
	# its truth, so what is compared is how far each tool is from its own run's
	for n in hot_a hot_b hot_c; do
		p=$(awk -v n=$n -v t=$total '$1 == n { printf "%.2f", 100 * $2 / t }' perf-dw.raw)
		t_err=$(awk -v n=$n -v t="$(truth $n fp2.truth)" '$1 == n { printf "%.2f", $2 - t }' fp2.shares)
		p_err=$(awk -v p="${p:-0}" -v t="$(truth $n perf-dw.truth)" 'BEGIN { printf "%.2f", p - t }')
		near "$t_err" "$p_err" 6 "tally -g vs perf --call-graph dwarf: $n, each one's share minus its run's truth"
	done
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
	note "$(grep '^unwind:' big.txt)"
}

subtest tally-repairs tally_repairs
subtest against-perf against_perf
subtest short-copy-said short_copy_said
