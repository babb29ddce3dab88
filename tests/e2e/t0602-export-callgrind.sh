#!/bin/bash
# export --format callgrind, read by callgrind_annotate: the program total and
# leaf's self cost are `tally report`'s period-weighted values (the events
# line says nanoseconds and events), the inclusive costs of caller_a and
# caller_b (through calls= lines) split as the workload measured and match
# `tally report --children`; every event is a column; a database without
# stacks gives the flat profile; --per-process writes FILE.PID per process,
# each with that process's samples (tally report --pid) and its own function;
# --samples costs samples.
# The file's layout is checked first, without callgrind_annotate.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

# `N (P%)  M (Q%)  PROGRAM TOTALS`, figures with thousands separators
tot() { awk '/PROGRAM TOTALS/ { gsub(",", ""); print $1, $3; exit }' "$1"; }
fn() { awk -v f="$2" '$0 ~ ":" f " \\[" { gsub(",", ""); print $1; exit }' "$1"; }

W=$WORKLOADS/callsplit_fp
tally_ok record -g --per-pid -e cpu-clock,page-faults -F 2000 -o cs.db -- "$W" 400
cp out cs.truth
report_json cs.json -i cs.db --symbols
report_json children.json -i cs.db --children --event cpu-clock
total=$(json_value cs.json cpu-clock)
pf=$(json_value cs.json page-faults)
leaf=$(TJSON_VALUE=1 tjson cs.json func leaf callsplit_fp cpu-clock)

tally_ok export -i cs.db --format callgrind
tally_ok record -F 2000 -o flat.db -- "$WORKLOADS/split_funcs" 600
cp out flat.truth
report_json flat.json -i flat.db --symbols
tally_ok export -i flat.db --format callgrind -o flat.cg
tally_ok record -g --per-pid -F 2000 -o fork.db -- "$WORKLOADS/forker" 2 150 0
cp out fork.truth
tally_ok export -i fork.db --format callgrind --per-process --samples -o fork.cg

layout() {
	local n=0 cpid
	[[ -s callgrind.out.tally ]] || fail "export --format callgrind wrote no callgrind.out.tally"
	grep -q '^events: cpu-clock page-faults$' callgrind.out.tally || fail "callgrind: no 'events: cpu-clock page-faults' line"
	grep -q '^event: cpu-clock : cpu-clock nanoseconds$' callgrind.out.tally || fail "callgrind: no 'event: cpu-clock : cpu-clock nanoseconds' line"
	grep -q '^event: page-faults : page-faults events$' callgrind.out.tally || fail "callgrind: no 'event: page-faults : page-faults events' line"
	grep -q '^event: cpu-clock : cpu-clock samples$' fork.cg.* || fail "callgrind --samples: no 'event: cpu-clock : cpu-clock samples' line"
	grep -q '^calls=' callgrind.out.tally || fail "callgrind of a -g database has no calls= lines"
	! grep -q '^calls=' flat.cg || fail "a flat callgrind export has calls= lines"
	[[ ! -e fork.cg ]] || fail "--per-process also wrote the merged file fork.cg"
	while read -r _ _ cpid; do
		[[ -s fork.cg.$cpid ]] || fail "--per-process: no fork.cg.$cpid: $(ls fork.cg.*)"
		grep -q "^pid: $cpid$" "fork.cg.$cpid" || fail "fork.cg.$cpid has no 'pid: $cpid' line"
		n=$((n + 1))
	done < <(grep '^child ' fork.truth)
	((n >= 3)) || fail "forker printed $n child lines, expected 3: $(head -c 500 fork.truth)"
}

stacks() {
	local t1 t2 a b f want n
	need_tool callgrind_annotate valgrind
	callgrind_annotate --threshold=100 callgrind.out.tally >self.txt 2>self.err ||
		fail "callgrind_annotate failed: $(head -c 1000 self.err)"
	callgrind_annotate --threshold=100 --inclusive=yes callgrind.out.tally >incl.txt 2>incl.err ||
		fail "callgrind_annotate --inclusive=yes failed: $(head -c 1000 incl.err)"
	! grep -q 'WARNING' self.err incl.err || fail "callgrind_annotate warned: $(cat self.err incl.err | head -5)"
	read -r t1 t2 < <(tot self.txt)
	[[ $t1 == "$total" && $t2 == "$pf" ]] ||
		fail "callgrind_annotate: totals '$t1 $t2', the report says $total ns of cpu-clock and $pf page-faults"
	[[ $(fn self.txt leaf) == "$leaf" ]] || fail "callgrind_annotate: leaf's self cost is '$(fn self.txt leaf)', the report says $leaf"
	a=$(fn incl.txt caller_a)
	b=$(fn incl.txt caller_b)
	# (the two callers' samples, whose count the share's error is of)
	n=$(python3 -c 'import json,sys; print(sum(x["inclusive"] for x in json.load(open(sys.argv[1]))["events"][0]["functions"] if x["name"] in ("caller_a", "caller_b")))' children.json)
	share_near "$(share "$a" "$b")" "$n" "$(truth caller_a cs.truth)" "callgrind_annotate --inclusive: caller_a's share"
	for f in caller_a caller_b main; do
		want=$(python3 -c 'import json,sys; print([x["inclusive_value"] for x in json.load(open(sys.argv[1]))["events"][0]["functions"] if x["name"] == sys.argv[2]][0])' children.json "$f")
		[[ $(fn incl.txt "$f") == "$want" ]] || fail "callgrind_annotate --inclusive: $f is '$(fn incl.txt "$f")', tally report --children says $want"
	done
	note "callgrind: totals $t1/$t2, leaf self $leaf, inclusive caller_a $a, caller_b $b"
}

# without stacks: the flat profile
flat() {
	local s f
	need_tool callgrind_annotate valgrind
	callgrind_annotate --threshold=100 flat.cg >flat.txt 2>flat.err || fail "callgrind_annotate flat.cg failed: $(head -c 600 flat.err)"
	[[ $(tot flat.txt | cut -d' ' -f1) == "$(json_value flat.json)" ]] || fail "flat callgrind: total $(tot flat.txt), the report says $(json_value flat.json)"
	s=0
	for f in work_a work_b work_c; do
		[[ $(fn flat.txt $f) == "$(TJSON_VALUE=1 tjson flat.json func $f split_funcs)" ]] ||
			fail "flat callgrind: $f has '$(fn flat.txt $f)', the report says $(TJSON_VALUE=1 tjson flat.json func $f split_funcs)"
		s=$((s + $(fn flat.txt $f)))
	done
	share_near "$(awk -v x="$(fn flat.txt work_a)" -v s="$s" 'BEGIN { printf "%.2f", 100 * x / s }')" \
		"$(tjson flat.json shares func work_a work_b work_c | awk '{ n += $3 } END { print n }')" "$(truth work_a flat.truth)" "flat callgrind: work_a's share"
}

# --per-process: a file per process, FILE.PID
per_process() {
	local n=0 fname cpid top sum f
	need_tool callgrind_annotate valgrind
	while read -r _ fname cpid; do
		[[ -s fork.cg.$cpid ]] || fail "--per-process: no fork.cg.$cpid for $fname's process: $(ls fork.cg.*)"
		grep -q "^pid: $cpid$" "fork.cg.$cpid" || fail "fork.cg.$cpid has no 'pid: $cpid' line"
		report_json "p$cpid.json" -i fork.db --pid "$cpid" --samples
		callgrind_annotate --threshold=100 "fork.cg.$cpid" >"p$cpid.txt" 2>/dev/null || fail "callgrind_annotate fork.cg.$cpid failed"
		[[ $(tot "p$cpid.txt" | cut -d' ' -f1) == "$(json_total "p$cpid.json")" ]] ||
			fail "fork.cg.$cpid: total $(tot "p$cpid.txt"), tally report --pid $cpid says $(json_total "p$cpid.json")"
		top=$(awk '/file:function/ { getline; getline; sub(/.*:/, ""); print $1; exit }' "p$cpid.txt")
		[[ $top == "$fname" ]] || fail "fork.cg.$cpid: the top function is '$top', expected $fname"
		n=$((n + 1))
	done < <(grep '^child ' fork.truth)
	((n >= 3)) || fail "forker printed $n child lines, expected 3: $(head -c 500 fork.truth)"
	sum=0
	for f in fork.cg.*; do
		callgrind_annotate --threshold=100 "$f" >x.txt 2>/dev/null || fail "callgrind_annotate $f failed"
		sum=$((sum + $(tot x.txt | cut -d' ' -f1)))
	done
	[[ $sum == "$(session_key fork.db samples)" ]] || fail "--per-process: the files hold $sum samples together, the session $(session_key fork.db samples)"
	note "--per-process: $(ls fork.cg.* | wc -l) files, $sum samples"
}

subtest "the file: events, calls with stacks only, a file per process" layout
subtest "callgrind_annotate: totals, leaf, inclusive callers (stacks)" stacks
subtest "callgrind_annotate: a flat profile" flat
subtest "callgrind_annotate: --per-process files" per_process
