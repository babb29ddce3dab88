#!/bin/bash
# record --off-cpu on offcpu_split, which measures its own waits: the blocked
# total within 5% of what it measured; with -g and report --wall the split of
# block_a and block_b by time within 3 points (by number of waits it would be
# 25/75, the other way round) and the wall total within 5% of the run's; --off-cpu-min drops the short waits and counts
# them; preempted time goes to off-cpu-preempted, not off-cpu; -p on a running
# process; a wait still going at the end counted up to it (-a); the job
# harness's tally profiler; the mistakes refused with one line.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-offcpu.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

"$TALLY" events >events.txt 2>/dev/null || true
grep -Eq '^off-cpu +tracepoint +available' events.txt ||
	skip "off-CPU recording is unavailable here (needs root and tracefs): $("$TALLY" record --off-cpu -o x -- true 2>&1 | head -1)"

case_total() {
	tally_ok record --off-cpu -o db -- "$WORKLOADS/offcpu_split" 3
	[[ $(session_key db events) == cpu-clock,off-cpu,off-cpu-preempted ]] ||
		fail "--off-cpu records events '$(session_key db events)', expected cpu-clock,off-cpu,off-cpu-preempted"
	within "$(session_field db off-cpu-ns 1)" "$(info_val blocked_ns)" 5 "blocked off-CPU time (ns)"
	# four waits a round, the rounds the workload counted (9.3 ms each on an
	# idle machine; a busy one wakes it late, and fewer fit in the seconds)
	waits=$(session_field db off-cpu-waits 1)
	rounds=$(info_val rounds)
	between "$waits" $((rounds * 3)) $((rounds * 5)) ||
		fail "$waits waits recorded, expected about $((rounds * 4)) (4 in each of its $rounds rounds)"
	note "$waits waits"
}

# case_split [CALL-GRAPH OPTION]: -g by default
case_split() {
	local ta tb rc=0 cg
	cg=cg$(tr -dc a-z <<<"${1:--g}")
	tally_ok record --off-cpu "${1:--g}" -o "$cg" -- "$WORKLOADS/offcpu_split" 3
	ta=$(truth block_a)
	tb=$(truth block_b)
	"$TALLY" report -i "$cg" --wall --children --json >wall.json 2>wall.err || rc=$?
	if ((rc != 0)) && grep -q 'keeps no sample weights' wall.err; then
		skip "the database keeps no sample weights yet (format 3): $(cat wall.err)"
	fi
	((rc == 0)) || fail "report --wall --children exited $rc: $(cat wall.err)"
	read -r ga gb total < <(python3 - wall.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["events"] if e.get("event", e.get("name")) == "wall"] or d["events"]
ev = ev[0]
# the weights (ns) where the report gives them beside the sample counts
inc = {f["name"]: f.get("inclusive_value", f.get("inclusive", 0)) for f in ev.get("functions", []) if f.get("image") == "offcpu_split"}
a, b = inc.get("block_a", 0), inc.get("block_b", 0)
print("%.2f %.2f %d" % (100.0 * a / (a + b) if a + b else -1, 100.0 * b / (a + b) if a + b else -1, ev.get("value", ev.get("samples", 0))))
EOF
)
	near "$ga" "$ta" 3 "${1:--g}: block_a's share of the waits under --wall"
	near "$gb" "$tb" 3 "${1:--g}: block_b's share of the waits under --wall"
	# one thread: on-CPU and off-CPU time add up to its wall time
	within "$total" "$(info_val loop_ns)" 5 "wall time of the single-threaded run (ns)"
	# the off-cpu event alone: the waits by their time too
	report_json off.json -i "$cg" --event off-cpu --children
	read -r oa ob < <(python3 - off.json <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))["events"][0]
inc = {f["name"]: f.get("inclusive_value", f.get("inclusive", 0)) for f in ev.get("functions", []) if f.get("image") == "offcpu_split"}
a, b = inc.get("block_a", 0), inc.get("block_b", 0)
print("%.2f %.2f" % (100.0 * a / (a + b) if a + b else -1, 100.0 * b / (a + b) if a + b else -1))
EOF
)
	near "$oa" "$ta" 3 "${1:--g}: block_a's share of the off-cpu event"
	near "$ob" "$tb" 3 "${1:--g}: block_b's share of the off-cpu event"
	# export --wall: the same time, stack by stack
	"$TALLY" export -i "$cg" --wall --format folded -o wall.folded 2>exp.err || fail "export --wall exited $?: $(cat exp.err)"
	folded=$(awk '{ s += $NF } END { printf "%.0f", s }' wall.folded)
	within "$folded" "$total" 0.01 "export --wall --format folded: the stacks' sum (ns)"
}

case_min() {
	tally_ok record --off-cpu --off-cpu-min 1ms -o min -- "$WORKLOADS/offcpu_split" 2 short
	local short dropped
	short=$(info_val short_waits)
	[[ $(session_key min off-cpu-min-ns) == 1000000 ]] ||
		fail "off-cpu-min-ns is '$(session_key min off-cpu-min-ns)', expected 1000000"
	dropped=$(session_key min off-cpu-dropped | awk '{ print $1 }')
	# block_b's waits of 50 us (less those a loaded machine stretched past
	# 1 ms: the workload counts them), and nothing of block_a's 6 ms
	long=$(info_val short_long_waits)
	want=$((short - long))
	between "$dropped" $((want * 9 / 10)) $((want * 11 / 10 + 20)) ||
		fail "--off-cpu-min 1ms dropped $dropped waits, expected block_b's $want shorter than 1 ms"
	note "dropped $dropped waits, block_b made $want shorter than 1 ms"
	kept=$(awk -v a="$(info_val block_a_ns)" -v l="$(info_val short_long_ns)" 'BEGIN { printf "%.0f", a + l }')
	within "$(session_field min off-cpu-ns 1)" "$kept" 5 "blocked time kept (block_a's waits and block_b's over 1 ms)"
	# without the minimum the short waits are there
	tally_ok record --off-cpu -o all -- "$WORKLOADS/offcpu_split" 1 short
	waits=$(session_field all off-cpu-waits 1)
	short=$(info_val short_waits)
	((waits >= short)) || fail "without --off-cpu-min only $waits waits were kept, block_b alone made $short"
	note "without --off-cpu-min: $waits waits kept"
}

case_preempt() {
	(($(nproc) >= 1)) || skip "no CPU"
	tally_ok record --off-cpu -o pre -- "$WORKLOADS/offcpu_split" 2 preempt
	within "$(session_field pre off-cpu-ns 2)" "$(info_val preempted_ns)" 10 "preempted time of two threads sharing CPU 0 (ns)"
	# blocked: the main thread's wait in pthread_join only, none of the spinners' time
	within "$(session_field pre off-cpu-ns 1)" "$(info_val join_ns)" 10 "blocked time (the main thread's join, ns)"
}

case_pid() {
	"$WORKLOADS/offcpu_split" 0 pid >pid.out 2>&1 &
	local w=$! dur
	track_pid $w
	wait_for_line pid.out '^pid '
	tally_ok record -p "$w" --off-cpu --duration 2 -o p
	alive $w || fail "the attached process died"
	blocked_whole_run p
}

case_end() {
	# a task that goes to sleep during the recording and sleeps past its end
	local ts t0 t1 slp rc=0 rec
	ts=$(date +%s.%N)
	"$TALLY" record -v -a --off-cpu --per-pid --duration 2 -o end >end.out 2>end.err &
	rec=$!
	track_pid $rec
	# started once tally records (it says so with -v)
	wait_for_line end.err "^tally: recording into 'end'" 30
	sleep 30 &
	slp=$!
	track_pid $slp
	t0=$(date +%s.%N)
	wait $rec || fail "record -a --duration 2 exited $?: $(cat end.err)"
	t1=$(date +%s.%N)
	report_json end.json -i end --event off-cpu --pid "$slp" --flat
	n=$(tjson end.json total)
	((n >= 1)) || fail "the sleep started during the recording (pid $slp) has no off-CPU sample: its wait was not counted at the end"
	"$TALLY" report -i end --wall --pid "$slp" --json >endw.json 2>endw.err || rc=$?
	if ((rc != 0)) && grep -q 'keeps no sample weights' endw.err; then
		note "the wait is there ($n samples); its time not checked: the database keeps no sample weights yet"
		return 0
	fi
	((rc == 0)) || fail "report --wall --pid $slp exited $rc: $(cat endw.err)"
	w=$(python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["events"][0]; print(e.get("value", e["samples"]))' endw.json)
	# from its start to the end of the recording, which came 2 s after tally
	# started (after ts) and before tally exited (t1)
	hi=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) * 1e9 + 5e7 }')
	lo=$(awk -v s="$ts" -v a="$t0" 'BEGIN { printf "%.0f", (s + 2 - a) * 0.9e9 }')
	between "$w" "$lo" "$hi" || fail "the sleep's time up to the end is $w ns, expected $lo-$hi"
	note "a wait past the end: $w ns counted (between $lo and $hi)"
}

case_job() {
	cat >oc.ctl <<EOF
profilers add tally --off-cpu
run -- $WORKLOADS/offcpu_split 2
EOF
	job_ok oc.ctl
	local d=results/oc/offcpu_split
	[[ -f $d/profiling/tally.db/session ]] || fail "no database in $d/profiling: $(ls -R $d | head -20)"
	# the profiled iteration is the second run
	awk '$1 == "info" && $2 == "blocked_ns"' $d/output | tail -n 1 >job-truth.txt
	within "$(session_field $d/profiling/tally.db off-cpu-ns 1)" "$(info_val blocked_ns job-truth.txt)" 5 \
		"the job harness's tally --off-cpu: blocked time (ns)"
}

case_bad() {
	expect_fail_with "off-cpu-min.*--off-cpu" "$TALLY" record --off-cpu-min 1ms -o b1 -- true
	expect_fail_with "off-cpu-min" "$TALLY" record --off-cpu --off-cpu-min soon -o b2 -- true
	expect_fail_with "'off-cpu-preempted'.*--off-cpu" "$TALLY" record -e off-cpu-preempted -o b3 -- true
	expect_fail_with "--off-cpu needs every CPU.*-C" "$TALLY" record --off-cpu -C 0 -o b4 -- true
	tally_ok record -o plain -- "$WORKLOADS/offcpu_split" 0.2
	expect_fail_with "'plain'.*--off-cpu" "$TALLY" report -i plain --wall
	expect_fail_with "'plain'.*--off-cpu" "$TALLY" export -i plain --wall --format folded -o -
}

subtest "blocked total within 5% of the workload's" case_total
subtest "split by time under --wall within 3 points" case_split
subtest "the same with --call-graph dwarf" case_split --call-graph=dwarf
subtest "--off-cpu-min drops and counts short waits" case_min
subtest "preempted apart from blocked" case_preempt
subtest "-p on a running process" case_pid
subtest "a wait past the end counted up to it" case_end
subtest "the job harness's tally profiler" case_job
subtest "bad input refused" case_bad
