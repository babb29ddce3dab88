#!/bin/bash
# --max-memory: near the bound the daemon flushes early instead of growing
# (call graphs, 20 kHz and many short processes make the aggregate grow
# fast): early flushes happen, the memory in use stays under the bound
# (unless what the processes it follows need reaches it alone), and what was
# flushed early is in the database.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
((max >= 20000)) || skip "kernel.perf_event_max_sample_rate is $max, below the 20 kHz this test needs"
expect_fail_with "^tally: invalid --max-memory '1M': must be at least 16.0 MiB" "$TALLY" daemon --db bad --max-memory 1M
start_load
# frame-pointer call graphs without the stack copy (fp,0): the copy and the
# CFI repair of -g's default (docs/callgraph.md) keep each image's CFI in
# the daemon, beside the aggregate, about 11 MiB of this machine's 16 here,
# and the test is of what flushes give back
start_daemon db --max-memory 16M --flush-interval 1h --call-graph fp,0 -F 20000
# the first flush reads the kernel's symbols: part of the memory from then on
ctl --db db flush
# early_flush: the status counts an early flush for memory
early_flush() {
	ctl --db db status
	early=$(status_val flush | sed -n 's/.*(\([0-9]*\) early for memory).*/\1/p')
	((early > 0))
}
wait_state() { echo "memory: $(status_val memory); flush: $(status_val flush)"; }
wait_for 60 "an early flush with --max-memory 16M" early_flush
grep -q "flushed early: memory reached" db/daemon.log || fail "the log does not say why it flushed early"
# under the bound from then on: forty looks, a tenth of a second apart (the
# daemon looked at its memory once a second only, and on a busy machine the
# aggregate grew by 9 MiB in between: 16.5 MiB in use at one look in four).
# What the bound governs is the aggregate, which flushes give back; the rest
# is what the processes the daemon follows need (their mappings and images:
# on a machine running much else, they alone can reach the bound; the daemon
# cannot bound them, and says so in its log when a look of its own finds it,
# docs/daemon.md)
mib() { awk '{ v = $1; u = $2; if (u == "KiB") v /= 1024; else if (u == "B") v /= 1048576; else if (u == "GiB") v *= 1024; print v }'; }
over=
for ((i = 0; i < 40; i++)); do
	ctl --db db status
	used=$(status_val memory | mib)
	agg=$(status_val memory | sed -n 's/.*(aggregate \([^)]*\)).*/\1/p' | mib)
	if fcmp "$used" ">=" 16; then
		# the processes' part alone near the bound: it is theirs
		fcmp "$(awk -v u="$used" -v a="$agg" 'BEGIN { print u - a }')" ">=" 12 ||
			fail "memory in use is $(status_val memory) at look $((i + 1)) of 40 ($(load_since start))"
		over="$(status_val memory) at look $((i + 1))"
	fi
	sleep 0.1
done
[[ -z $over ]] || note "over the bound only by what the processes followed need: $over ($(grep -c 'above --max-memory' db/daemon.log || true) line of the log saying so)"
note "with --max-memory 16M: $(status_val memory); $(status_val flush)"
stop_daemon "$DAEMON_PID"
t=$(db_total db)
((t > 0)) || fail "the database is empty"
note "database: $t samples"
