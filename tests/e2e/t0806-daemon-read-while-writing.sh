#!/bin/bash
# report reads a database while the daemon writes it (a flush every 50 ms,
# call graphs, heavy activity): every read succeeds, whole epochs and the
# merge of all of them, and what it sees never shrinks.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

start_load
start_daemon db --flush-interval 50ms -g
ctl --db db status
epoch=$(status_val epoch | cut -d' ' -f1)
prev=0 preve=0
for ((i = 1; i <= 15; i++)); do
	rc=0
	"$TALLY" report -i db --json >r.json 2>r.err || rc=$?
	((rc == 0)) || fail "read $i of the database while the daemon writes failed: $(cat r.err)"
	t=$(tjson r.json total)
	((t >= prev)) || fail "read $i saw $t samples after $prev"
	prev=$t
	"$TALLY" report -i db --epoch "$epoch" --children >c.txt 2>c.err || fail "read $i of epoch $epoch failed: $(cat c.err)"
	if ((i % 5 == 0)); then
		ctl --db db epoch
		epoch=$(sed -n 's/^epoch \([0-9-]*\) begins.*/\1/p' "$TMP/ctl.out")
	fi
done
((prev > 0)) || fail "15 reads saw no samples at all"
grep -q "writing stopped" db/daemon.log && fail "the daemon stopped writing: $(grep 'writing stopped' db/daemon.log | tail -1)"
note "15 reads while writing: all whole, up to $prev samples"
