#!/bin/bash
# frame-pointer call graphs through chains of libc functions without frame
# pointers: fpchain's sort_a and sort_b (2:1 by its own CPU clock) spend their
# time in qsort, whose merge sort (libc, no frame pointers, rbp used as a
# general register) calls the workload's comparator; the chain the kernel
# reads from rbp is junk there and perf -g loses both. tally -g unwinds the
# top of the stack with the CFI over its stack copy: each one's inclusive
# share within 3 points of the truth (or 4 binomial sigmas of the samples,
# if more), most stacks repaired and the unwind line saying so; with no copy
# (fp,0) the plain chain loses them, as perf -g does.
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/fpchain

# shares JSON: `NAME PERCENT SAMPLES` of sort_a and sort_b's inclusive samples
shares() {
	python3 - "$1" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
tot = e["unwind"]["samples"]
inc = {f["name"]: f["inclusive"] for f in e["functions"]}
for n in ("sort_a", "sort_b"):
    print(n, "%.2f" % (100.0 * inc.get(n, 0) / tot if tot else 0.0), tot)
PY
}

repaired() {
	tally_ok record -g -F 2000 -o q.db -- "$W" 2 qsort
	cp "$TMP/out" q.truth
	report_json q.json -i q.db --children
	shares q.json >q.shares
	for n in sort_a sort_b; do
		read -r _ share total < <(awk -v n=$n '$1 == n' q.shares)
		near_share "$share" "$(truth $n q.truth)" 3 "$total" "tally -g: $n inclusive share of $total samples"
	done
	python3 - q.json <<'PY' || fail "unwind.fp_leaf: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["events"][0]["unwind"])' q.json)"
import json, sys
u = json.load(open(sys.argv[1]))["events"][0]["unwind"]
f = u.get("fp_leaf") or {}
ok = f.get("checked", 0) >= 0.95 * u["samples"] and f.get("repaired", 0) >= 0.9 * f.get("checked", 1) \
    and f.get("frames", 0) >= 2 * f.get("repaired", 1) and set(f.get("stops", {})) == \
    {"no_cfi", "stack_copy_too_small", "chain_not_rejoined", "depth_limit"}
print("ok: fp_leaf", f, "of", u["samples"], "samples")
sys.exit(0 if ok else 1)
PY
	report_text q.txt -i q.db --children
	grep -Eq '^unwind: .*frame pointers: functions without a frame pointer at the top of the stack were unwound with CFI in (9[0-9]|100)\.[0-9]+% of the stacks \([0-9.]+ frames put back in each\)' q.txt ||
		fail "the unwind line does not count the repaired stacks: $(grep '^unwind:' q.txt)"
	[[ $(session_key q.db fp-leaf-stack) == 2048 ]] || fail "-g: session fp-leaf-stack is '$(session_key q.db fp-leaf-stack)', expected the default 2048"
}

plain_chain() {
	# no stack copy: the chain from rbp, which libc's merge sort reused
	tally_ok record --call-graph fp,0 -F 2000 -o p.db -- "$W" 1 qsort
	report_json p.json -i p.db --children
	shares p.json >p.shares
	a=$(awk '$1 == "sort_a" { print $2 }' p.shares)
	fcmp "$a" '<' 10 || fail "fp,0: sort_a has $a% of the samples: the plain chain was expected to lose it"
	note "fp,0: sort_a in $a% of the stacks (truth $(truth sort_a))"
	need_tool perf linux-perf
	perf record -q -e cpu-clock -F 2000 -g -o perf.data -- "$W" 1 qsort >perf.truth 2>perf.err ||
		skip "perf record failed: $(head -c 300 perf.err)"
	pa=$(perf report -i perf.data --stdio --children --sort sym -q -g none 2>/dev/null | awk '$NF == "sort_a" { sub("%", "", $1); print $1 }')
	note "perf -g: sort_a in ${pa:-0}% of the stacks (truth $(truth sort_a perf.truth))"
}

subtest "qsort's merge sort between the user's functions and the comparator" repaired
subtest "a plain chain (fp,0) and perf -g lose them" plain_chain
