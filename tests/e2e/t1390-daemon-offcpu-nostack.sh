#!/bin/bash
# tally daemon --off-cpu --off-cpu-mechanism bpf -g: waits whose stack the
# kernel's stack map had no room for keep one frame; a flush says how many in
# the daemon's log, with the count the epoch's session holds
# (off-cpu-no-stack), as record warns of them (t1330).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-offcpu.sh"

need_offcpu_bpf

wl=$(uniq_copy waitpaths)
start_daemon db --off-cpu --off-cpu-mechanism bpf -g --flush-interval 10m
# 20000 waits from distinct call paths: more stacks than the map takes
"$wl" 20000 >wl.out
ctl --db db flush
ctl --db db status
epoch=$(status_val epoch | cut -d' ' -f1)
[[ -n $epoch && -d db/$epoch ]] || fail "status names no epoch directory: '$(status_val epoch)'"
[[ $(session_key "db/$epoch" off-cpu-mechanism) == bpf ]] ||
	fail "off-cpu-mechanism is '$(session_key "db/$epoch" off-cpu-mechanism)', expected bpf"
n=$(session_key "db/$epoch" off-cpu-no-stack | awk '{ print $1 }')
[[ $n =~ ^[0-9]+$ ]] || fail "the epoch's session has no off-cpu-no-stack count: '$(session_key "db/$epoch" off-cpu-no-stack)'"
((n > 0)) || fail "off-cpu-no-stack is 0 after 20000 distinct call paths"
grep -Eq "tally daemon\[[0-9]+\]: $n off-CPU waits kept one frame since the last flush: the kernel's stack map had no room" db/daemon.log ||
	fail "the daemon's log does not say the $n waits that kept one frame: $(tail -5 db/daemon.log)"
note "$n waits kept one frame, counted in the session and said in the log"
stop_daemon "$DAEMON_PID"
# said once: the exit's flush repeats no count already said
c=$(grep -c " $n off-CPU waits kept one frame" db/daemon.log || true)
((c == 1)) || fail "the count of $n waits is said $c times in the log"
