#!/bin/bash
# tally top's text snapshots (issue 31, item 20): `--db DIR --once` says the
# daemon's samples a second (its one tick adds the daemon's whole memory,
# over the time that memory covers), not 0; the images and commands views
# have each column once (images: command, then the image; commands: the
# command only), with no placeholder, as the screen has them.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/top.sh"

# header_field FILE FIELD: from the first header of FILE, the number before
# " samples/s" or " samples,"
header_field() {
	grep -m1 '^# tally top:' "$1" | sed -nE "s|.*, ([0-9.]+) $2.*|\\1|p"
}

case_daemon_once() {
	local t0 t1 i n rate samples ncpu
	t0=$(date +%s.%N)
	start_daemon db --flush-interval 1h -F 999
	"$WORKLOADS/split_funcs" 60000 >wl.out &
	track_pid $!
	# some samples in the daemon's memory
	for ((i = 0; i < 300; i++)); do
		ctl --db db status
		n=$(status_val in-memory | awk '{ print $1 }')
		[[ $n =~ ^[0-9]+$ ]] && ((n >= 300)) && break
		sleep 0.1
	done
	((n >= 300)) || fail "the daemon holds $n samples after 30 s: $(cat "$TMP/ctl.out")"
	local rc=0
	"$TALLY" top --db db --once --rows 5 >once.out 2>once.err || rc=$?
	t1=$(date +%s.%N)
	((rc == 0)) || fail "tally top --db --once exited $rc: $(head -c 500 once.err)"
	[[ $(snapshots once.out) == 1 ]] || fail "--once printed $(snapshots once.out) snapshots"
	rate=$(header_field once.out 'samples/s')
	samples=$(header_field once.out 'samples,')
	[[ -n $rate && -n $samples ]] || fail "cannot read the rate and the samples of: $(head -1 once.out)"
	note "--db --once: $rate samples/s, $samples samples: $(head -1 once.out)"
	fcmp "$samples" ">=" 300 || fail "--db --once counted $samples samples, the daemon held $n before"
	fcmp "$rate" ">" 0 || fail "--db --once says $rate samples/s with $samples samples: $(head -1 once.out)"
	# the memory covers at most the daemon's life, so the rate is at least
	# the samples over that; at most every CPU's -F 999 (and a margin)
	ncpu=$(nproc)
	fcmp "$rate" ">=" "$(awk -v s="$samples" -v a="$t0" -v b="$t1" 'BEGIN { print s / (b - a) }')" ||
		fail "--db --once: $rate samples/s is less than $samples samples over the $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s the daemon ran"
	fcmp "$rate" "<=" $((ncpu * 999 * 3 / 2)) || fail "--db --once: $rate samples/s, more than $ncpu CPUs at 999 Hz"
	stop_daemon "$DAEMON_PID"
}

# columns FILE: the line of column names of the snapshot in FILE (the
# workload's own lines are around it)
columns() {
	awk 'h { print; exit } /^# tally top:/ { h = 1 }' "$1"
}

# check_view FILE VIEW NAME...: the snapshot's column names are NAME...,
# each there once, VIEW's last; every row has as many fields
check_view() {
	local file=$1 last=$2 header
	shift 2
	header=$(columns "$file")
	[[ $(echo $header) == "$*" ]] || fail "the columns are '$(echo $header)', expected '$*': $(head -4 "$file")"
	[[ $(tr -s ' ' '\n' <<<"$header" | sed '/^$/d' | sort | uniq -d) == "" ]] || fail "a column twice: $header"
	[[ ${header##* } == "$last" ]] || fail "the last column is not '$last': $header"
	awk -v n=$# '$1 ~ /%$/ && NF != n { print "a row of " NF " fields under " n " columns: " $0; bad = 1 } END { exit bad }' "$file" >bad.txt ||
		fail "$(head -3 bad.txt)"
	! grep -Eq ' - ' "$file" || fail "a placeholder '-': $(grep -m2 ' - ' "$file")"
}

case_views() {
	local rc=0
	"$TALLY" top --once -d 1 --view images --rows 0 -- "$WORKLOADS/split_funcs" 20000 >images.out 2>images.err || rc=$?
	((rc == 0)) || fail "--view images exited $rc: $(head -c 500 images.err)"
	check_view images.out image share msec command image
	# the image row of split_funcs: the command, then the image
	grep -Eq '^ +[0-9.]+% +[0-9.]+ +split_funcs +split_funcs$' images.out || fail "images: $(head -5 images.out)"
	"$TALLY" top --once -d 1 --view commands --rows 0 -- "$WORKLOADS/split_funcs" 20000 >comms.out 2>comms.err || rc=$?
	((rc == 0)) || fail "--view commands exited $rc: $(head -c 500 comms.err)"
	check_view comms.out command share msec command
	grep -Eq '^ +[0-9.]+% +[0-9.]+ +split_funcs$' comms.out || fail "commands: $(head -5 comms.out)"
	"$TALLY" top -g --once -d 1 --view images --rows 0 -- "$WORKLOADS/callsplit_fp" 20000 >gimages.out 2>gimages.err || rc=$?
	((rc == 0)) || fail "-g --view images exited $rc: $(head -c 500 gimages.err)"
	[[ $(columns gimages.out | xargs) == "share self msec command image" ]] || fail "-g images: $(head -3 gimages.out)"
	awk '$1 ~ /%$/ && NF != 5 { bad = 1 } END { exit bad }' gimages.out || fail "-g images: a row not of 5 fields: $(head -6 gimages.out)"
	# the functions view keeps its five columns
	"$TALLY" top --once -d 1 --rows 0 -- "$WORKLOADS/split_funcs" 20000 >funcs.out 2>funcs.err || rc=$?
	((rc == 0)) || fail "the functions view exited $rc: $(head -c 500 funcs.err)"
	[[ $(columns funcs.out | xargs) == "share msec image command function" ]] || fail "functions: $(head -3 funcs.out)"
	grep -Eq '^ +[0-9.]+% +[0-9.]+ +split_funcs +split_funcs +work_a$' funcs.out || fail "functions: no work_a row: $(head -6 funcs.out)"
}

subtest "--db --once says the daemon's samples a second" case_daemon_once
subtest "the images and commands views have each column once" case_views
