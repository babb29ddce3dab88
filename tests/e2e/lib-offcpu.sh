# Helpers of the off-CPU tests (t1320, t1330, t1390), sourced after lib.sh.

# session_field DB KEY N: field N (1-based) of a comma-separated session value
session_field() {
	session_key "$1" "$2" | cut -d, -f"$3"
}

# within A B PCT WHAT: |A - B| <= PCT% of B
within() {
	awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }' ||
		fail "$4: tally says $1, the workload measured $2 (+/- $3%)"
	note "$4: tally $1, measured $2 (+/- $3%)"
}

# blocked_whole_run DB: a -p recording (DB) of one thread that waits nearly
# all the time holds blocked time for about the whole recording (85% to 102%
# of its duration)
blocked_whole_run() {
	local dur lo hi
	dur=$(session_key "$1" duration)
	[[ -n $dur ]] || dur=2
	lo=$(awk -v d="$dur" 'BEGIN { printf "%.0f", d * 0.85e9 }')
	hi=$(awk -v d="$dur" 'BEGIN { printf "%.0f", d * 1.02e9 }')
	between "$(session_field "$1" off-cpu-ns 1)" "$lo" "$hi" ||
		fail "-p on a process that waits: blocked $(session_field "$1" off-cpu-ns 1) ns in $dur s, expected $lo-$hi"
	note "-p: blocked $(session_field "$1" off-cpu-ns 1) ns in $dur s"
}

# need_offcpu_bpf: skips when the off-CPU BPF program cannot run here (no BTF,
# no privilege, built without libbpf: the machine's answer); fails when
# recording with it fails for any other reason
need_offcpu_bpf() {
	local rc=0
	"$TALLY" record --off-cpu --off-cpu-mechanism bpf -o probe -- true >probe.out 2>probe.err || rc=$?
	((rc == 0)) && return 0
	grep -Eq "off-CPU BPF program|built without BPF" probe.err ||
		fail "--off-cpu-mechanism bpf failed for another reason than BPF: $(head -1 probe.err)"
	skip "the off-CPU BPF program cannot run here: $(head -1 probe.err)"
}

# fpchain_offcpu_shares JSON: `NAME PERCENT WAITS` of fpchain's wait_long and
# wait_other's inclusive off-CPU time
fpchain_offcpu_shares() {
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

# fpchain_offcpu MECH: `record --off-cpu -g` of fpchain with --off-cpu-mechanism
# MECH (into MECH.db) gives wait_long and wait_other their shares of the
# off-CPU time within 3 points of the truth, and the unwind line counts the
# stacks repaired with CFI (t1322, t1323)
fpchain_offcpu() {
	local mech=$1 n share waits
	tally_ok record --off-cpu --off-cpu-mechanism "$mech" -g -o "$mech.db" -- "$WORKLOADS/fpchain" 3
	cp "$TMP/out" "$mech.truth"
	[[ $(session_key "$mech.db" off-cpu-mechanism) == "$mech" ]] ||
		fail "the session says off-cpu-mechanism '$(session_key "$mech.db" off-cpu-mechanism)', not $mech"
	report_json "$mech.json" -i "$mech.db" --event off-cpu --children
	fpchain_offcpu_shares "$mech.json" >"$mech.shares"
	for n in wait_long wait_other; do
		read -r _ share waits < <(awk -v n=$n '$1 == n' "$mech.shares")
		near "$share" "$(truth $n "$mech.truth")" 3 "$mech: $n's share of the off-CPU time ($waits waits)"
	done
	report_text "$mech.txt" -i "$mech.db" --event off-cpu --children
	grep -Eq '^unwind: .*frame pointers: functions without a frame pointer at the top of the stack were unwound with CFI in (9[0-9]|100)\.[0-9]+% of the stacks' "$mech.txt" ||
		fail "$mech: the unwind line does not count the repaired stacks: $(grep '^unwind:' "$mech.txt")"
}
