#!/bin/bash
# control of collection: `cpus 0 off` stops samples of a process pinned to
# CPU 0, `cpus 0 on freq HZ` brings them back at that rate; `stop` stops all
# sampling and `start` resumes it; `clear` drops what is not yet flushed,
# `startclr` clears and starts; -C chooses the daemon's CPUs.  Counts are
# measured with drains (each holds the samples since the previous one), after
# the pinned process has used a given CPU time (burn), not a given wall time:
# on a busy machine a fraction of a second may give it none.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

(($(nproc) >= 2)) || skip "needs two CPUs to pin a process to one of them (this machine has $(nproc))"
pin=$(uniq_copy sleeper)
name=$(basename "$pin")
taskset -c 0 "$pin" 0 burn >pin.out 2>&1 &
pp=$!
track_pid $pp
wait_for_line pin.out '^pid '

start_daemon db --flush-interval 1h
n=0 total=0
# burn MS: wait until the pinned process has used MS more milliseconds of CPU
burn() {
	local until=$(($(proc_cpu_ms $pp) + $1))
	wait_state() { echo "the pinned process (pid $pp) used $(proc_cpu_ms $pp) ms of CPU, waiting for $until"; }
	wait_for 60 "the pinned process burning $1 ms of CPU" eval '(($(proc_cpu_ms $pp) >= until))'
}
# drain_count: samples of the pinned process since the previous drain in $n,
# of everything in $total (from the text report: quicker than JSON here)
drain_count() {
	ctl --db db drain -o d.bundle
	"$TALLY" report -i d.bundle --samples >d.txt 2>d.err || fail "report -i d.bundle: $(cat d.err)"
	n=$(awk -v n="$name" '$NF == n { print $1; f = 1 } END { if (!f) print 0 }' d.txt)
	total=$(ttext d.txt total)
}
drain_count
burn 300
drain_count
((n > 0)) || fail "the process burning CPU 0 had no samples with every CPU on"
note "cpu 0 on: $n samples in 300 ms of its CPU time"

ctl --db db cpus 0 off
[[ $(cat "$TMP/ctl.out") == "cpu 0: off, 999 Hz" ]] || fail "cpus 0 off said: $(cat "$TMP/ctl.out")"
ctl --db db status
grep -q '^cpu 0: off' "$TMP/ctl.out" || fail "status after cpus 0 off: $(grep '^cpu' "$TMP/ctl.out")"
grep -q '^cpu 1: on' "$TMP/ctl.out" || fail "status after cpus 0 off: $(grep '^cpu' "$TMP/ctl.out")"
drain_count
burn 500
drain_count
((n == 0)) || fail "cpu 0 off: the process pinned to CPU 0 still got $n samples"
note "cpu 0 off: no samples"

ctl --db db cpus 0 on freq 100
t0=$(date +%s.%N)
drain_count
burn 500
drain_count
t1=$(date +%s.%N)
max=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 100 * 1.25 + 5 }')
((n > 0 && n <= max)) || fail "cpu 0 on at 100 Hz: $n samples in $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s, expected 1 to $max"
note "cpu 0 at 100 Hz: $n samples (at most $max)"
ctl --db db cpus all on freq 999

# stop: nothing at all is sampled; start: sampling again
ctl --db db stop
drain_count
burn 500
ctl --db db status
[[ $(status_val state) == stopped ]] || fail "status after stop: state '$(status_val state)'"
drain_count
((total == 0)) || fail "collection stopped, yet $total samples were taken"
ctl --db db start
burn 300
drain_count
((n > 0)) || fail "after start the pinned process gets no samples"
note "stop: 0 samples; start: $n"

# clear drops what is not flushed yet; startclr clears and starts
drain_count
ctl --db db clear
grep -Eq '^cleared [0-9]+ samples? from memory' "$TMP/ctl.out" || fail "clear said: $(cat "$TMP/ctl.out")"
before=$(db_total db)
ctl --db db stop
ctl --db db clear
drain_count
((total == 0)) || fail "after stop and clear, a drain still has $total samples"
((n == 0)) || fail "clear kept $n samples of the pinned process"
ctl --db db startclr
grep -q 'collection on' "$TMP/ctl.out" || fail "startclr said: $(cat "$TMP/ctl.out")"
burn 300
drain_count
((n > 0)) || fail "after startclr the pinned process gets no samples"
after=$(db_total db)
((after >= before)) || fail "clear removed flushed samples from the database: $after < $before"
stop_daemon "$DAEMON_PID"

# -C 1: the daemon never samples CPU 0
start_daemon c1 -C 1 --flush-interval 1h
ctl --db c1 status
grep -q '^cpu 0: not sampled' "$TMP/ctl.out" || fail "-C 1: status says $(grep '^cpu 0' "$TMP/ctl.out")"
burn 500
ctl --db c1 drain -o c1.bundle
report_json c1.json -i c1.bundle
(($(tjson c1.json image "$name") == 0)) || fail "-C 1: the process pinned to CPU 0 has samples"
(($(tjson c1.json total) > 0)) || fail "-C 1: no samples at all"
note "-C 1: nothing from CPU 0"
