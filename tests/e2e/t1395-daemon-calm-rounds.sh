#!/bin/bash
# samples counted in the kernel (the daemon's default where it can): while
# short processes of programs the daemon has already seen come and go, it
# reads the counts every 4 seconds, as when nothing starts, and looks at their
# side-band records between (the status counts both: "rounds: N (A asked
# for: ...), and M looks that left the records for a later one"). The exec watch tells it of each
# program new to it at its exec, so its looks back off to a second when they
# find nothing; without the watch they are 200 ms apart. Whichever way, a
# program it has not seen is read within a round of its start (one that runs
# half a second and whose file is deleted as it ends keeps its build-id), a
# new library of a program it knows within a second, and a program whose
# processes made JIT code is told of at each start (a short run's perf map is
# read while it lives), and a burst of known programs after a quiet spell is
# told of too (no record lost). Runs alone (meson: is_parallel false): other tests'
# new programs would make the rounds 200 ms apart, as they should.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

need_tool readelf binutils
want=$(readelf -n "$WORKLOADS/split_funcs" | awk '/Build ID:/ { print $3; exit }')
[[ -n $want ]] || skip "the workload split_funcs has no build-id"
libwant=$(readelf -n "$WORKLOADS/libtallywork.so" | awk '/Build ID:/ { print $3; exit }')
[[ -n $libwant ]] || skip "the workload library libtallywork.so has no build-id"
rc=0
"$TALLY" record -a --sample-mechanism bpf --duration 0.2 -o probe.db >probe.out 2>&1 || rc=$?
if ((rc != 0)); then
	grep -qi 'bpf' probe.out && skip "samples cannot be counted in the kernel here: $(head -1 probe.out)"
	fail "record -a --sample-mechanism bpf exited $rc: $(head -3 probe.out)"
fi

# rounds_looks DB: ROUNDS, ASKED (rounds a new program, file or JIT code asked
# for) and LOOKS from its status, WATCH its exec-watch line
ROUNDS= ASKED= LOOKS= WATCH=
rounds_looks() {
	ctl --db "$1" status
	local line
	line=$(status_val rounds)
	[[ $line =~ ^([0-9]+)\ \(([0-9]+)\ asked\ for:\ [^\)]*\),\ and\ ([0-9]+)\ looks?\ that\ left ]] ||
		fail "status: no 'rounds: N (A asked for: ...), and M looks ...' line ('$line')"
	ROUNDS=${BASH_REMATCH[1]} ASKED=${BASH_REMATCH[2]} LOOKS=${BASH_REMATCH[3]}
	WATCH=$(status_val exec-watch)
	[[ -n $WATCH ]] || fail "status: no 'exec-watch:' line"
}
# churn SECONDS: a short process of a program already seen every 20 ms (on
# a busy machine fewer: how many started is in churn.starts)
churn() {
	local end=$((SECONDS + $1)) n=0
	while ((SECONDS < end)); do
		/bin/true
		n=$((n + 1))
		sleep 0.02
	done
	echo "$n" >"$TMP/churn.starts"
}
# told DB: how many starts the exec watch told of so far
told() {
	rounds_looks "$1"
	[[ $WATCH =~ ^on\ \(([0-9]+)\ start ]] || fail "status: exec-watch is not on: '$WATCH'"
	echo "${BASH_REMATCH[1]}"
}
# bursts DB: how many bursts of starts the exec watch told of so far
bursts() {
	rounds_looks "$1"
	[[ $WATCH =~ \;\ ([0-9]+)\ bursts?\ of\ starts ]] || fail "status: exec-watch does not count bursts: '$WATCH'"
	echo "${BASH_REMATCH[1]}"
}

# read_while_running JSON KEY VALUE WANT WHAT: every image of the report whose
# KEY (name or path) is VALUE is named by the build-id WANT: its file (WHAT),
# deleted as its program ended, was read while the program ran
read_while_running() {
	python3 - "$@" <<-'PY' >kept.out || fail "$(cat kept.out)"
	import json, sys
	rep, key, value, want, what = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
	mine = [i for e in rep["events"] for i in e["images"] if i.get(key) == value]
	if not mine:
	    print("no image %s in the report" % value)
	    sys.exit(1)
	for i in mine:
	    if i["id_kind"] != "build-id" or i["id"] != want:
	        print("image %s (%s) is %s %s: its file, deleted as its program ended, was not read while it ran (build-id %s)" % (value, what, i["id_kind"], i["id"], want))
	        sys.exit(1)
	print("%s: %d samples, build-id %s" % (value, sum(i["samples"] for i in mine), want))
	PY
	note "$(cat kept.out)"
}

# churn_known DB MIN MAX: 8 s of known programs make at most 4 rounds that
# nothing asked for, at most MAX looks, and at least MIN looks or rounds
# asked for (both read the side-band records: on a machine where other
# programs start, their rounds stand in for looks).  MIN is for the 400
# starts of an idle machine: a look is of the records that came, and a busy
# machine that started fewer programs gives fewer to look at, so MIN shrinks
# with the starts; under 100 starts there is nothing to judge, and the whole
# is made again, then skipped, naming the figure.
churn_known() {
	local db=$1 min=$2 max=$3 starts
	# true and sleep are seen once, and what the status runs (tally, awk):
	# their files are known from then on (a file not seen asks for 200 ms
	# rounds for a second)
	churn 1
	rounds_looks "$db"
	sleep 1.2
	rounds_looks "$db"
	local r0=$ROUNDS a0=$ASKED l0=$LOOKS
	churn 8
	rounds_looks "$db"
	local rounds=$((ROUNDS - r0)) asked=$((ASKED - a0)) looks=$((LOOKS - l0))
	starts=$(cat "$TMP/churn.starts")
	note "8 s of known programs starting every 20 ms: $starts started; $rounds rounds (one of them the status's, $asked asked for by a program or file new to the daemon: this machine's own), $looks looks; exec-watch: $WATCH"
	((starts >= 100)) || busy "the machine let the churn start $starts programs in 8 s (400 on an idle one): $(load_since start)"
	min=$((min * (starts < 400 ? starts : 400) / 400))
	# every 4 s, the status's own (it reads the counts; its connection
	# waking the daemon is a look), and one when a ring is a quarter full;
	# once a second: 9 or more; 200 ms apart: 40
	((rounds - asked <= 4)) || fail "$((rounds - asked)) rounds that nothing asked for in 8 s of known programs: the counts are read more often than every 4 s"
	# (a round reads the records too: on a machine where other programs
	# start, rounds asked for by them stand in for looks)
	((looks + asked >= min)) || fail "only $looks looks and $asked rounds asked for in 8 s of side-band records (at least $min expected)"
	((looks <= max)) || fail "$looks looks in 8 s of known programs (at most $max expected)"
}

start_daemon calm.db --sample-mechanism bpf -F 999 --flush-interval 1h
rounds_looks calm.db
case $WATCH in
on*) watch=1 ;;
*) watch=0 ;;
esac
known_watched() {
	((watch)) || skip "the exec watch does not run here ($WATCH)"
	# a second between looks that find nothing: 8 or so (200 ms apart: 40)
	retry_busy "8 s of known programs, the exec watch on" churn_known calm.db 4 16
}
subtest "known programs, exec watch: rounds every 4 s, looks back off to a second" known_watched

new_program() {
	local prog="$TMP/calm_fresh_$$" t0
	cp "$WORKLOADS/split_funcs" "$prog"
	churn 100 &
	local churner=$!
	BG_PIDS+=("$churner")
	sleep 1.5
	((watch)) && t0=$(told calm.db)
	"$prog" 400 >/dev/null
	rm "$prog"
	kill "$churner"
	wait "$churner" 2>/dev/null || true
	if ((watch)); then
		local t1
		t1=$(told calm.db)
		((t1 > t0)) || fail "the exec watch told of no start while a program new to the daemon ran ($t0 before, $t1 after)"
	fi
	ctl --db calm.db flush
	report_json fresh.json -i calm.db
	read_while_running fresh.json name "$(basename "$prog")" "$want" "a program new to the daemon"
}
subtest "a new program among known ones is read while it runs" new_program

# A flush empties the aggregate, and the images of programs no process maps
# any more go with it: the watch forgets what it told of, and tells of such a
# program again at its next start (its files are identified again while they
# exist)
told_again() {
	((watch)) || skip "the exec watch does not run here ($WATCH)"
	local prog t0 t1 t2
	prog=$(uniq_copy split_funcs)
	"$prog" 50 >/dev/null
	t0=$(told calm.db)
	"$prog" 50 >/dev/null
	t1=$(told calm.db)
	ctl --db calm.db flush
	"$prog" 50 >/dev/null
	t2=$(told calm.db)
	((t2 > t1)) || fail "a program told of before a flush was not told of at its start after it ($t1 before, $t2 after)"
	note "starts told of: $t0 after a first run, $t1 after a second, $t2 after a flush and a third"
}
subtest "a program is told of again after a flush forgot its images" told_again

# A burst of known programs after a quiet spell (the looks backed off to a
# second): the watch tells of it, once as many execs as could fill half a ring
# came since the last look (a round empties the rings), and no record is lost
burst() {
	((watch)) || skip "the exec watch does not run here ($WATCH)"
	churn 2
	local b0 l0 b1 l1
	b0=$(bursts calm.db)
	l0=$(status_val lost)
	local k
	for k in 1 2 3; do
		(for i in {1..1000}; do /bin/true; done) &
		BG_PIDS+=($!)
	done
	wait "${BG_PIDS[@]: -3}"
	b1=$(bursts calm.db)
	l1=$(status_val lost)
	((b1 > b0)) || fail "3000 starts of /bin/true: the exec watch told of no burst ($b0 before, $b1 after)"
	[[ $l1 == "$l0" ]] || fail "3000 starts of /bin/true: records lost (lost: $l0 before, $l1 after)"
	note "3000 starts of /bin/true: $((b1 - b0)) bursts told of, lost: $l1"
}
subtest "a burst of known programs is told of, nothing lost" burst

# A program the daemon knows maps a library new to it (a copy of
# libtallywork.so, through LD_LIBRARY_PATH): no exec to tell of, the looks
# find it within a second (backed off) or 200 ms (without the watch), while
# the program runs 1.5 s; the copy is deleted as it ends.
new_library() {
	local db=$1 lib="$TMP/newlib_$$_$2"
	"$WORKLOADS/split_images" 50 >/dev/null # known from now on, with its own library
	churn 2
	mkdir -p "$lib"
	cp "$WORKLOADS/libtallywork.so" "$lib/"
	LD_LIBRARY_PATH=$lib "$WORKLOADS/split_images" 1500 >/dev/null
	rm -r "$lib"
	ctl --db "$db" flush
	report_json lib.json -i "$db"
	read_while_running lib.json path "$lib/libtallywork.so" "$libwant" "a library new to the daemon of a program it knows"
}
library_watched() { new_library calm.db watched; }
subtest "a new library of a known program is read while it runs" library_watched

# A JIT program the daemon has seen make JIT code is told of at its next
# start: a run of 0.3 s, among known programs (the looks backed off), has its
# perf map read while it lives, and the map is deleted as it ends.
jit_again() {
	((watch)) || skip "the exec watch does not run here ($WATCH)"
	local jw out pid t0 t1
	jw=$(uniq_copy jitwork)
	"$jw" 300 "$TMP" ok >jit1.out
	grep -q '^skip:' jit1.out && skip "$(grep '^skip:' jit1.out)"
	rm -f "/tmp/perf-$(workload_pid jit1.out).map" "$TMP/jit-$(workload_pid jit1.out).dump"
	churn 3
	t0=$(told jit.db)
	"$jw" 300 "$TMP" ok >jit2.out
	pid=$(workload_pid jit2.out)
	rm -f "/tmp/perf-$pid.map" "$TMP/jit-$pid.dump"
	t1=$(told jit.db)
	((t1 > t0)) || fail "the exec watch did not tell of the second start of a program that made JIT code ($t0 before, $t1 after)"
	ctl --db jit.db flush
	report_json jit.json -i jit.db --pid "$pid" --symbols
	local n
	n=$(tjson jit.json func jit_alpha)
	((n > 0)) || fail "the second run (pid $pid) of a JIT program has no samples in jit_alpha: its perf map was not read while it lived: $(tjson jit.json funcs | tr '\n' ' ')"
	note "second run of a JIT program (pid $pid): jit_alpha has $n samples; starts told of: $t0 before, $t1 after"
}
stop_daemon "$DAEMON_PID"
start_daemon jit.db --sample-mechanism bpf -F 999 --flush-interval 1h --per-pid
subtest "a program that made JIT code is told of at each start" jit_again
stop_daemon "$DAEMON_PID"

# without the watch (TALLY_EXEC_WATCH=off) the looks stay 200 ms apart
TALLY_EXEC_WATCH=off start_daemon plain.db --sample-mechanism bpf -F 999 --flush-interval 1h
known_plain() {
	rounds_looks plain.db
	[[ $WATCH == off* ]] || fail "TALLY_EXEC_WATCH=off: the status says exec-watch: $WATCH"
	# 200 ms apart: 40 or so
	retry_busy "8 s of known programs, no exec watch" churn_known plain.db 24 48
}
subtest "known programs, no exec watch: rounds every 4 s, looks every 200 ms" known_plain
library_plain() { new_library plain.db plain; }
subtest "no exec watch: a new library of a known program is read while it runs" library_plain
stop_daemon "$DAEMON_PID"

bad_env() {
	local rc=0
	TALLY_EXEC_WATCH=maybe "$TALLY" record -a --sample-mechanism bpf --duration 0.1 -o bad.db >bad.out 2>&1 || rc=$?
	((rc != 0)) || fail "TALLY_EXEC_WATCH=maybe was taken"
	grep -q "TALLY_EXEC_WATCH is 'maybe': it takes on or off" bad.out || fail "TALLY_EXEC_WATCH=maybe: $(cat bad.out)"
	[[ ! -e bad.db ]] || fail "TALLY_EXEC_WATCH=maybe: a database was written"
}
subtest "a TALLY_EXEC_WATCH other than on or off is refused" bad_env
