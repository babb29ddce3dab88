#!/bin/bash
# tally top without a terminal: a text snapshot every interval whose split of
# split_funcs' three functions is the one the workload measured; --once prints
# one and stops the command (exit 0), -n N prints N; a command that ends by
# itself gives its exit status; -p attaches; -g gives inclusive shares (the
# callers of callsplit's leaf, 3:1); the command column names the command.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/top.sh"

case_command() {
	local rc=0
	"$TALLY" top -F 999 -d 0.5 --rows 0 -- sh -c "'$WORKLOADS/split_funcs' 2500 >wl.out" >top.out 2>top.err || rc=$?
	((rc == 0)) || fail "tally top exited $rc: $(head -c 500 top.err)"
	local n
	n=$(snapshots top.out)
	((n >= 4)) || fail "$n snapshots in a run of 2.5 s at -d 0.5: $(head -c 600 top.out)"
	note "$n snapshots"
	top_check top.out wl.out 5 work_a work_b work_c
	# every row of the last snapshot: share, samples, image, command, function
	awk '/^# tally top:/ { n++ } END { exit !(n) }' top.out
	grep -Eq '^ +[0-9.]+% +[0-9.]+ +split_funcs +split_funcs +work_a$' top.out ||
		fail "no row 'SHARE SAMPLES split_funcs split_funcs work_a': $(grep work_a top.out | tail -2)"
	grep -q "^# tally top: functions by share, command 'sh', cpu-clock," top.out ||
		fail "the header does not say the view, target and event: $(grep -m1 '^#' top.out)"
}

case_once() {
	local rc=0 t0 t1
	t0=$(date +%s.%N)
	"$TALLY" top --once -d 1 -- "$WORKLOADS/split_funcs" 20000 >once.out 2>once.err || rc=$?
	t1=$(date +%s.%N)
	((rc == 0)) || fail "tally top --once exited $rc: $(head -c 500 once.err)"
	[[ $(snapshots once.out) == 1 ]] || fail "--once printed $(snapshots once.out) snapshots"
	fcmp "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "<" 6 || fail "--once took more than 6 s (the command was not stopped?)"
	grep -q work_a once.out || fail "--once shows no work_a: $(cat once.out)"
	# -n 3
	"$TALLY" top -n 3 -d 0.3 -- "$WORKLOADS/split_funcs" 20000 >n3.out 2>n3.err || fail "tally top -n 3 failed: $(cat n3.err)"
	[[ $(snapshots n3.out) == 3 ]] || fail "-n 3 printed $(snapshots n3.out) snapshots"
}

case_exit_status() {
	local rc=0
	"$TALLY" top -d 0.2 -- "$WORKLOADS/exitcode" 7 >/dev/null 2>ex.err || rc=$?
	((rc == 7)) || fail "tally top -- exitcode 7 exited $rc (the command's status is 7): $(cat ex.err)"
	rc=0
	"$TALLY" top -d 0.2 -- /nonexistent/prog >/dev/null 2>ex.err || rc=$?
	((rc == 127)) || fail "a command that cannot run: exit $rc, expected 127"
	grep -q "nonexistent/prog" ex.err || fail "no error naming the command: $(cat ex.err)"
}

case_attach() {
	"$WORKLOADS/split_funcs" 3500 >wl.out &
	local pid=$!
	track_pid $pid
	wait_for_line wl.out '^pid '
	local rc=0
	"$TALLY" top -p "$pid" -d 0.5 --rows 0 >p.out 2>p.err || rc=$?
	((rc == 0)) || fail "tally top -p exited $rc: $(head -c 500 p.err)"
	wait $pid
	top_check p.out wl.out 5 work_a work_b work_c
	grep -q "pids $pid" p.out || fail "the header does not name the pid: $(grep -m1 '^#' p.out)"
}

case_callgraph() {
	local rc=0
	"$TALLY" top -g -d 0.5 --rows 0 -- "$WORKLOADS/callsplit_fp" 2500 >cg.out 2>cg.err || rc=$?
	((rc == 0)) || fail "tally top -g exited $rc: $(head -c 500 cg.err)"
	grep -Eq '^ *share +self +msec' cg.out || fail "-g: no self column: $(grep -m2 -A1 '^#' cg.out)"
	top_check cg.out cg.out 5 caller_a caller_b
	# inclusive: leaf and main are in (nearly) every sample
	local leaf main
	leaf=$(top_shares --total cg.out leaf | awk '{ print $2 }')
	main=$(top_shares --total cg.out main | awk '{ print $2 }')
	fcmp "$leaf" ">" 90 || fail "-g: leaf's inclusive share is $leaf%, expected > 90%"
	fcmp "$main" ">" 90 || fail "-g: main's inclusive share is $main%, expected > 90% (inclusive counted?)"
	note "inclusive: leaf $leaf%, main $main%"
}

subtest "a command, text snapshots, the split" case_command
subtest "--once, -n" case_once
subtest "the command's exit status" case_exit_status
subtest "-p attaches" case_attach
subtest "-g inclusive shares" case_callgraph
