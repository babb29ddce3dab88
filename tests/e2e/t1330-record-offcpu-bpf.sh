#!/bin/bash
# record --off-cpu --off-cpu-mechanism bpf (the waits summed in the kernel by
# a BPF program) on offcpu_split, which measures its own waits: the session
# says bpf; the blocked total within 5% of what the workload measured and
# about 4 waits a round; the split by time between the two places that waited
# (clock_nanosleep for block_a, ppoll for block_b) within 3 points; --wall's
# total within 5% of the run's wall time and export --wall the same;
# --off-cpu-min drops the short waits in the kernel and counts them; preempted
# time apart from blocked; -p; -e off-cpu alone (its waits resolve through the
# side-band records of a dummy event); -g walks the callers (and export --wall
# adds up to --wall's total); auto takes bpf
# without call graphs and the tracepoint with them, and the tracepoint when
# asked still gives the same total.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-offcpu.sh"

need_offcpu_bpf

# mech DB WANT: the session names the mechanism
mech() {
	[[ $(session_key "$1" off-cpu-mechanism) == "$2" ]] ||
		fail "$1: off-cpu-mechanism is '$(session_key "$1" off-cpu-mechanism)', expected $2"
}

# flat_split JSON EVENT: the shares of clock_nanosleep and ppoll in the flat report, by time
flat_split() {
	python3 - "$1" <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))["events"][0]
v = {f["name"]: f["value"] for f in ev["functions"] if f.get("image", "").startswith("libc")}
a, b = v.get("clock_nanosleep", 0), v.get("ppoll", 0)
print("%.2f %.2f %d" % (100.0 * a / (a + b) if a + b else -1, 100.0 * b / (a + b) if a + b else -1, ev["value"]))
EOF
}

case_total() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf -o db -- "$WORKLOADS/offcpu_split" 3
	mech db bpf
	[[ $(session_key db events) == cpu-clock,off-cpu,off-cpu-preempted ]] ||
		fail "events '$(session_key db events)', expected cpu-clock,off-cpu,off-cpu-preempted"
	within "$(session_field db off-cpu-ns 1)" "$(info_val blocked_ns)" 5 "blocked off-CPU time (ns)"
	waits=$(session_field db off-cpu-waits 1)
	rounds=$(info_val rounds)
	between "$waits" $((rounds * 3)) $((rounds * 5)) ||
		fail "$waits waits recorded, expected about $((rounds * 4)) (4 in each of about $rounds rounds)"
	# the report's sample count is the number of waits, not of map entries
	report_json off.json -i db --event off-cpu --flat
	n=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"][0]["samples"])' off.json)
	[[ $n == "$waits" ]] || fail "the off-cpu report counts $n samples, the session $waits waits"
	note "$waits waits"
}

case_split() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf -o sp -- "$WORKLOADS/offcpu_split" 3
	local ta tb a b total
	ta=$(truth block_a)
	tb=$(truth block_b)
	report_json off.json -i sp --event off-cpu --flat
	read -r a b total < <(flat_split off.json)
	near "$a" "$ta" 3 "clock_nanosleep's (block_a's) share of the off-cpu time"
	near "$b" "$tb" 3 "ppoll's (block_b's) share of the off-cpu time"
	report_json wall.json -i sp --wall --flat
	read -r a b total < <(flat_split wall.json)
	near "$a" "$ta" 3 "clock_nanosleep's share of the waits under --wall"
	within "$total" "$(info_val loop_ns)" 5 "wall time of the single-threaded run (ns)"
}

case_min() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf --off-cpu-min 1ms -o min -- "$WORKLOADS/offcpu_split" 2 short
	mech min bpf
	local short long want dropped kept
	short=$(info_val short_waits)
	long=$(info_val short_long_waits)
	want=$((short - long))
	dropped=$(session_key min off-cpu-dropped | awk '{ print $1 }')
	between "$dropped" $((want * 9 / 10)) $((want * 11 / 10 + 20)) ||
		fail "--off-cpu-min 1ms dropped $dropped waits, expected block_b's $want shorter than 1 ms"
	note "dropped $dropped waits, block_b made $want shorter than 1 ms"
	kept=$(awk -v a="$(info_val block_a_ns)" -v l="$(info_val short_long_ns)" 'BEGIN { printf "%.0f", a + l }')
	within "$(session_field min off-cpu-ns 1)" "$kept" 5 "blocked time kept (block_a's waits and block_b's over 1 ms)"
}

case_preempt() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf -o pre -- "$WORKLOADS/offcpu_split" 2 preempt
	within "$(session_field pre off-cpu-ns 2)" "$(info_val preempted_ns)" 10 "preempted time of two threads sharing CPU 0 (ns)"
	within "$(session_field pre off-cpu-ns 1)" "$(info_val join_ns)" 10 "blocked time (the main thread's join, ns)"
}

case_pid() {
	"$WORKLOADS/offcpu_split" 0 pid >pid.out 2>&1 &
	local w=$! dur lo hi
	track_pid $w
	wait_for_line pid.out '^pid '
	tally_ok record -p "$w" --off-cpu --off-cpu-mechanism bpf --duration 2 -o p
	mech p bpf
	blocked_whole_run p
}

case_alone() {
	tally_ok record -e off-cpu --off-cpu-mechanism bpf -o alone -- "$WORKLOADS/offcpu_split" 2
	mech alone bpf
	[[ $(session_key alone events) == off-cpu,off-cpu-preempted ]] ||
		fail "events '$(session_key alone events)', expected off-cpu,off-cpu-preempted"
	within "$(session_field alone off-cpu-ns 1)" "$(info_val blocked_ns)" 5 "-e off-cpu alone: blocked time (ns)"
	report_json alone.json -i alone --event off-cpu --flat
	read -r a b _ < <(flat_split alone.json)
	near "$a" "$(truth block_a)" 3 "-e off-cpu alone: clock_nanosleep's share (its maps known from the dummy event)"
}

case_callers() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf -g -o g -- "$WORKLOADS/offcpu_split" 2
	mech g bpf
	report_json g.json -i g --event off-cpu --children
	m=$(python3 - g.json <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))["events"][0]
inc = {f["name"]: f.get("inclusive_value", f.get("inclusive", 0)) for f in ev["functions"]}
print("%.2f" % (100.0 * inc.get("main", 0) / ev["value"] if ev["value"] else 0))
EOF
)
	fcmp "$m" ">=" 95 || fail "-g with bpf: main holds $m% of the off-CPU time, expected its callers walked (>= 95%)"
	note "-g with bpf: main holds $m% of the waits"
	# export --wall: the same time, stack by stack
	report_json gw.json -i g --wall --flat
	total=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"][0]["value"])' gw.json)
	within "$total" "$(info_val loop_ns)" 5 "-g with bpf: wall time of the run (ns)"
	"$TALLY" export -i g --wall --format folded -o wall.folded 2>exp.err || fail "export --wall exited $?: $(cat exp.err)"
	folded=$(awk '{ s += $NF } END { printf "%.0f", s }' wall.folded)
	within "$folded" "$total" 0.01 "export --wall --format folded: the stacks' sum (ns)"
}

case_nostack() {
	# 20000 waits from distinct call paths at once: more stacks than the
	# kernel's stack maps take between two reads (8192 slots, and collisions
	# before that; t1391 paces them); those waits keep
	# one frame, and that is counted and said, never silent; every wait is
	# still counted
	tally_ok record --off-cpu --off-cpu-mechanism bpf -g -o ns -- "$WORKLOADS/waitpaths" 20000
	mech ns bpf
	local n waits
	n=$(session_key ns off-cpu-no-stack | awk '{ print $1 }')
	waits=$(session_field ns off-cpu-waits 1)
	[[ $n =~ ^[0-9]+$ ]] || fail "the session has no off-cpu-no-stack count: '$(session_key ns off-cpu-no-stack)'"
	((n > 0 && n < waits)) || fail "off-cpu-no-stack is $n of $waits waits, expected some, not all, of 20000 distinct stacks"
	grep -q "^tally: warning: $n off-CPU waits kept one frame: the kernel's stack map had no room" "$TMP/err" ||
		fail "record does not warn of the $n waits that kept one frame: $(cat "$TMP/err")"
	((waits >= 19800)) || fail "$waits waits counted of the workload's 20000"
	# without call graphs no stack is asked: nothing to count
	tally_ok record --off-cpu --off-cpu-mechanism bpf -o ns1 -- "$WORKLOADS/waitpaths" 2000
	[[ -z $(session_key ns1 off-cpu-no-stack) ]] || fail "off-cpu-no-stack without -g: '$(session_key ns1 off-cpu-no-stack)'"
	note "$n of $waits waits kept one frame, counted and said"
}

case_auto() {
	tally_ok record --off-cpu -o au -- "$WORKLOADS/offcpu_split" 1
	mech au bpf
	tally_ok record --off-cpu -g -o aug -- "$WORKLOADS/offcpu_split" 1
	mech aug tracepoint
	tally_ok record -v --off-cpu -o auv -- "$WORKLOADS/offcpu_split" 0.3
	grep -q 'off-CPU time from the BPF program' "$TMP/err" || fail "record -v does not say the BPF program was used: $(cat "$TMP/err")"
	tally_ok record --off-cpu --off-cpu-mechanism tracepoint -o tp -- "$WORKLOADS/offcpu_split" 2
	mech tp tracepoint
	within "$(session_field tp off-cpu-ns 1)" "$(info_val blocked_ns)" 5 "the tracepoint when asked: blocked time (ns)"
}

subtest "blocked total within 5% of the workload's" case_total
subtest "split by time within 3 points, --wall total within 5%" case_split
subtest "--off-cpu-min drops and counts short waits in the kernel" case_min
subtest "preempted apart from blocked" case_preempt
subtest "-p on a running process" case_pid
subtest "-e off-cpu alone" case_alone
subtest "-g walks the callers" case_callers
subtest "-g: waits whose stack the kernel's map had no room for are counted" case_nostack
subtest "auto: bpf without call graphs, the tracepoint with them" case_auto
