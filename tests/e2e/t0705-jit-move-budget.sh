#!/bin/bash
# A jitdump that amplifies memory: one function of 1 MiB of code and 3000
# JIT_CODE_MOVE records of it (64 bytes each; each would copy the 1 MiB, 3 GB
# in all). What tally record and the daemon take for it stays in proportion
# to the dump (peak RSS against the same workload with a plain dump, under
# an address-space limit of 2 GiB that copying everything would pass), the
# dropped records are counted in a warning (record's stderr, the session,
# every report, the daemon's log), and the daemon goes on.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

size=$((1 << 20))
moves=3000
# sanitizers reserve terabytes of address space: no limit then, RSS only;
# and no quarantine, whose freed blocks held or not made the same run's RSS
# 27 or 43 MB at random, more than the slack below
limit=$((2 << 30))
if ldd "$TALLY" 2>/dev/null | grep -E 'lib(asan|ubsan|tsan)' >/dev/null; then
	limit=0
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
	note "sanitized build: no address-space limit, no quarantine"
fi

# rss_run NAME ARGS...: runs tally ARGS under the limit; stdout/stderr to
# NAME.out/NAME.err; prints "EXIT PEAK_RSS_KB" (the peak of tally and the
# workload it runs, the biggest of them)
rss_run() {
	local name=$1
	shift
	python3 - "$limit" "$name" "$TALLY" "$@" <<'EOF'
import resource, subprocess, sys
limit, name, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
def lim():
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
with open(name + ".out", "w") as o, open(name + ".err", "w") as e:
    rc = subprocess.run(cmd, stdout=o, stderr=e, preexec_fn=lim).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
EOF
}

mkdir dumps
read -r rc0 rss0 < <(rss_run plain record -F 1000 -o plain.db -- "$WORKLOADS/jitwork" 400 "$TMP/dumps" ok)
grep -q '^skip:' plain.out && skip "$(grep '^skip:' plain.out)"
((rc0 == 0)) || fail "record of jitwork (plain dump) exited $rc0: $(head -c 1000 plain.err)"
read -r rc1 rss1 < <(rss_run big record -F 1000 -o big.db -- "$WORKLOADS/jitwork" 400 "$TMP/dumps" bigmove $size $moves)
rm -f "/tmp/perf-$(workload_pid plain.out).map" "/tmp/perf-$(workload_pid big.out).map"
((rc1 == 0)) || fail "record of jitwork (a dump of $moves moves of a $size-byte function) exited $rc1: $(head -c 1000 big.err)"
pid=$(workload_pid big.out)
dump=$TMP/dumps/jit-$pid.dump
dsize=$(stat -c %s "$dump")
grow=$(((rss1 - rss0) * 1024))
note "peak RSS: $rss0 KiB with a plain dump, $rss1 KiB with $dsize bytes of moves ($((grow / dsize))x the dump)"
bound=$((8 * dsize + (8 << 20)))
((grow <= bound)) || fail "the dump of $dsize bytes made tally record grow by $grow bytes (more than 8 times its size plus 8 MiB)"

# what was dropped is said: record, session, report
re="^tally: warning: jitdump '$dump' of pid $pid: ([0-9]+) records dropped \(([0-9]+) JIT_CODE_MOVE\): they would have taken the dump past its memory budget of [0-9.]+ MiB \(docs/symbols.md\)$"
n=$(sed -nE "s|$re|\1|p" big.err)
[[ -n $n ]] || fail "record does not say how many records were dropped: $(cat big.err)"
((n >= moves - 10 && n <= moves)) || fail "record dropped $n records, expected nearly all $moves moves"
grep -q "^jit-warning-[0-9]*: jitdump '$dump' of pid $pid: $n records dropped" big.db/session ||
	fail "the session does not keep the dropped count: $(grep jit- big.db/session)"
report_json big.json -i big.db --symbols
grep -Eq "$re" big.json.err || fail "the report does not repeat the dropped count: $(cat big.json.err)"
# the rest of the dump still names the code that ran
check_split func big.json big.out jit_alpha jit_beta
note "record: $n of $moves moves dropped, said in the session and the report"

# --- the daemon: one process's dump does not end it
start_daemon d.db --flush-interval 1h
if ((limit)) && command -v prlimit >/dev/null; then
	prlimit --pid "$DAEMON_PID" --as=$((limit + (1 << 30))) || fail "prlimit on the daemon failed"
fi
hwm() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$DAEMON_PID/status"; }
ctl --db d.db flush
h0=$(hwm)
"$WORKLOADS/jitwork" 300 "$TMP/dumps" bigmove $size $moves >dw.out 2>&1 || fail "jitwork failed: $(cat dw.out)"
dpid=$(workload_pid dw.out)
rm -f "/tmp/perf-$dpid.map"
# the daemon reads the dump when it sees the process end: flushed until its
# log says what it dropped
logged() { alive "$DAEMON_PID" && ctl --db d.db flush && grep -Eq "$1" d.db/daemon.log; }
wait_state() { echo "daemon $(alive "$DAEMON_PID" && echo alive || echo dead); its log: $(tail -5 d.db/daemon.log)"; }
wait_for 30 "the daemon's log of what it dropped of pid $dpid's dump" logged "jitdump '$TMP/dumps/jit-$dpid.dump' of pid $dpid: [0-9]+ records dropped"
alive "$DAEMON_PID" || fail "the daemon died on the dump of pid $dpid: $(tail -5 d.db/daemon.log)"
ctl --db d.db status
h1=$(hwm)
dgrow=$(((h1 - h0) * 1024))
dsize=$(stat -c %s "$TMP/dumps/jit-$dpid.dump")
note "daemon peak RSS: $h0 KiB before, $h1 KiB after a $dsize-byte dump of moves"
((dgrow <= 8 * dsize + (16 << 20))) || fail "the dump of $dsize bytes made the daemon grow by $dgrow bytes"
grep -Eq "jitdump '$TMP/dumps/jit-$dpid.dump' of pid $dpid: [0-9]+ records dropped" d.db/daemon.log ||
	fail "the daemon's log does not say what was dropped: $(tail -5 d.db/daemon.log)"
stop_daemon "$DAEMON_PID"
note "daemon: alive, bounded, the drop logged"
