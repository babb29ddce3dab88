#!/bin/bash
# --off-cpu --off-cpu-mechanism bpf -g: the kernel's stack maps turn over, so
# that a long run keeps finding room for new stacks. waitpaths waits from
# 12000 distinct call paths, 500 at a time with a pause between (more than a
# map takes; a stack map that was never emptied left 29% of them with one
# frame): the session counts turnovers, at most 12% keep one frame, and every
# wait that kept its stack has the whole path it waited from (15 path_
# frames), in record and in the daemon, whose epoch goes on past a flush (and
# whose status counts them); the pauses, waits that span turnovers, keep
# their time (none is dropped).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-offcpu.sh"

need_offcpu_bpf

N=12000

# whole_paths FOLDED: how many distinct paths (of 15 path_ frames) the folded
# stacks hold. Not their lines: one path can be on two lines that differ
# above main or below the last path_ frame (a frame tally could not name, on
# a loaded machine), and the first half of the daemon's paths is waited from
# twice.
whole_paths() {
	awk '{ n = gsub(/path_[01]/, "&") } n == 15 {
		k = ""; s = $0
		while (match(s, /path_[01]/)) { k = k substr(s, RSTART + 5, 1); s = substr(s, RSTART + RLENGTH) }
		print k }' "$1" | sort -u | wc -l
}

# named_lines FOLDED: the lines through all 15 path_ frames with every frame
# named (no [nomap]): one a path, as many as the distinct paths, or a stack
# is on two lines for another reason than a frame tally could not name
named_lines() {
	awk '!/\[nomap\]/ { n = gsub(/path_[01]/, "&") } !/\[nomap\]/ && n == 15' "$1" | wc -l
}

# stacks_right FOLDED NOSTACK WHAT: the waits from waitpaths in the folded
# off-CPU stacks: each line through path_ frames has all 15 of them (none
# resolved from a stack map emptied under it), and the distinct paths with
# the waits that kept one frame make the N (to 1%: a sleep of 1 us can end
# before its task is switched out, as t1330 allows)
stacks_right() {
	local folded=$1 nostack=$2 what=$3 bad full
	bad=$(awk '{ n = gsub(/path_[01]/, "&") } n && n != 15' "$folded" | head -c 600)
	[[ -z $bad ]] || fail "$what: a stack with a part of the path: $bad"
	full=$(whole_paths "$folded")
	local named
	named=$(named_lines "$folded")
	((named <= full)) || fail "$what: $named named lines through the paths, for $full distinct paths"
	((full <= N && full + nostack >= N - N / 100)) ||
		fail "$what: $full waits kept their whole path and $nostack kept one frame, of the workload's $N"
	((nostack * 100 <= N * 12)) || fail "$what: $nostack of $N waits kept one frame (more than 12%)"
	note "$what: $full of $N waits kept their whole path, $nostack one frame"
}

case_record() {
	tally_ok record --off-cpu --off-cpu-mechanism bpf -g -o db -- "$WORKLOADS/waitpaths" $N 15 500 250
	cp "$TMP/out" wl.out
	local n t
	n=$(session_key db off-cpu-no-stack | awk '{ print $1 }')
	t=$(session_key db off-cpu-stack-turnovers)
	[[ $n =~ ^[0-9]+$ && $t =~ ^[0-9]+$ ]] ||
		fail "the session lacks off-cpu-no-stack ('$n') or off-cpu-stack-turnovers ('$t')"
	((t >= 2)) || fail "the stack maps turned over $t times for $N distinct stacks"
	tally_ok export -i db --event off-cpu --format folded -o db.folded
	stacks_right db.folded "$n" "record ($t turnovers)"
	# the pauses between the batches (main's, a quarter of a second each)
	# span turnovers: a wait whose stack is of a map emptied meanwhile is
	# read from the copy kept, never dropped for want of its stack
	local dropped pause whole want
	dropped=$(session_key db off-cpu-dropped)
	[[ $dropped == "0 waits, 0 ns" ]] || fail "off-cpu-dropped is '$dropped': waits lost their stack"
	# the time off the CPU outside the paths (the pauses, and the waits that
	# kept one frame, clock_nanosleep alone, a few of them pauses) holds the
	# pauses' time; the pauses with their stack (main's callers) no more
	pause=$(awk '!/path_/ && /clock_nanosleep / { s += $NF } END { printf "%.0f", s }' db.folded)
	whole=$(awk '!/path_/ && /;clock_nanosleep / { s += $NF } END { printf "%.0f", s }' db.folded)
	want=$(info_val paused_ns wl.out)
	((pause * 100 >= want * 80 && whole * 100 <= want * 102)) ||
		fail "the pauses' waits add up to $pause ns ($whole with their stack), the workload measured $want"
	note "the pauses between batches: $pause ns ($whole with their stack) of $want"
	# without call graphs there are no stack maps to turn over
	tally_ok record --off-cpu --off-cpu-mechanism bpf -o db1 -- "$WORKLOADS/waitpaths" 1000
	[[ -z $(session_key db1 off-cpu-stack-turnovers) ]] ||
		fail "off-cpu-stack-turnovers without -g: '$(session_key db1 off-cpu-stack-turnovers)'"
}

case_daemon() {
	local wl epoch t whole bad
	wl=$(uniq_copy waitpaths)
	start_daemon dd --off-cpu --off-cpu-mechanism bpf -g --flush-interval 10m
	# the first half of the paths before a flush, the second after it: the
	# maps go on turning over in the next epoch
	"$wl" $((N / 2)) 15 500 250 >wl.out
	ctl --db dd flush
	"$wl" $N 15 500 250 >wl2.out
	ctl --db dd flush
	ctl --db dd status
	epoch=$(status_val epoch | cut -d' ' -f1)
	[[ -n $epoch && -d dd/$epoch ]] || fail "status names no epoch directory: '$(status_val epoch)'"
	t=$(session_key "dd/$epoch" off-cpu-stack-turnovers)
	[[ $t =~ ^[0-9]+$ ]] && ((t >= 2)) || fail "the daemon's epoch says off-cpu-stack-turnovers '$t', expected 2 or more"
	# status says it too, with the rest of the off-CPU figures
	local st
	st=$(status_val off-cpu)
	[[ $st =~ ^bpf,\ [0-9]+\ waits\ blocked,\ [0-9]+\ preempted,\ [0-9]+\ dropped,\ [0-9]+\ lost,\ [0-9]+\ without\ their\ stack,\ ([0-9]+)\ stack\ map\ turnovers$ ]] ||
		fail "status's off-cpu line is '$st'"
	((BASH_REMATCH[1] >= t)) || fail "status counts ${BASH_REMATCH[1]} turnovers, the epoch's session $t"
	stop_daemon "$DAEMON_PID"
	# the workload's distinct paths over both flushes (the second run waits
	# from the first one's paths again, then new ones)
	tally_ok export -i dd --event off-cpu --comm "$(basename "$wl" | cut -c1-15)" --format folded -o dd.folded
	bad=$(awk '{ n = gsub(/path_[01]/, "&") } n && n != 15' dd.folded | head -c 600)
	[[ -z $bad ]] || fail "daemon: a stack with a part of the path: $bad"
	whole=$(whole_paths dd.folded)
	local named
	named=$(named_lines dd.folded)
	((named <= whole)) || fail "daemon: $named named lines through the paths, for $whole distinct paths"
	((whole <= N && whole * 100 >= N * 88)) ||
		fail "daemon: $whole of the $N distinct paths kept their whole stack (expected 88% or more)"
	local lines
	lines=$(awk '{ n = gsub(/path_[01]/, "&") } n == 15' dd.folded | wc -l)
	note "daemon: $whole of $N distinct paths with their whole stack, on $lines lines ($(grep -c '\[nomap\]' dd.folded) with a [nomap] frame), $t turnovers in the last epoch"
}

subtest "record: the stack maps turn over, every stack kept is whole" case_record
subtest "daemon: the stack maps turn over across flushes" case_daemon
