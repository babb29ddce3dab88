#!/bin/bash
# off-CPU call graphs with frame pointers through libc's chain of functions
# without them: fpchain's wait_long and wait_other (3 waits to 1, by its own
# clock around each) each wait in nanosleep(), which calls clock_nanosleep,
# neither with a frame pointer, both called through one function pointer (the
# chain from rbp is the same for both and names neither). `record --off-cpu
# -g` gives each one's share of the off-CPU time within 3 points of the
# truth (every wait is recorded: no sampling error), with the sched_switch
# tracepoint and its stack copy (the BPF mechanism walks frame pointers only,
# docs/offcpu.md), and the unwind line counts the repaired stacks.
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/fpchain

# offcpu_shares JSON: `NAME PERCENT WAITS` of wait_long and wait_other's
# inclusive off-CPU time
offcpu_shares() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = [e for e in d["events"] if e["name"] == "off-cpu"][0]
u = e["unwind"]
inc = {f["name"]: f["inclusive_value"] for f in e["functions"]}
tot = sum(f["self_value"] for f in e["functions"])
for n in ("wait_long", "wait_other"):
    print(n, "%.2f" % (100.0 * inc.get(n, 0) / tot if tot else 0.0), u["samples"])
PY
}

# one mechanism: MECH
chain() {
	local mech=$1
	tally_ok record --off-cpu --off-cpu-mechanism "$mech" -g -o "$mech.db" -- "$W" 3
	cp "$TMP/out" "$mech.truth"
	[[ $(session_key "$mech.db" off-cpu-mechanism) == "$mech" ]] ||
		fail "the session says off-cpu-mechanism '$(session_key "$mech.db" off-cpu-mechanism)', not $mech"
	report_json "$mech.json" -i "$mech.db" --event off-cpu --children
	offcpu_shares "$mech.json" >"$mech.shares"
	for n in wait_long wait_other; do
		read -r _ share waits < <(awk -v n=$n '$1 == n' "$mech.shares")
		near "$share" "$(truth $n "$mech.truth")" 3 "$mech: $n's share of the off-CPU time ($waits waits)"
	done
	report_text "$mech.txt" -i "$mech.db" --event off-cpu --children
	grep -Eq '^unwind: .*frame pointers: functions without a frame pointer at the top of the stack were unwound with CFI in (9[0-9]|100)\.[0-9]+% of the stacks' "$mech.txt" ||
		fail "$mech: the unwind line does not count the repaired stacks: $(grep '^unwind:' "$mech.txt")"
}

tracepoint() {
	chain tracepoint
}

subtest "the tracepoint's stack copy" tracepoint
