#!/bin/bash
# The daemon's pushes name functions, not their inlined frames: the DWARF
# that inlined frames need was read again at every push (nine tenths of a
# push's CPU on a whole machine's epoch; docs/push.md). inline_chain spins
# in hot_loop and in two functions always inlined into it: the daemon's push
# counts all of it for hot_loop and names neither inlined function, while
# 'tally push' of the same database has them (so the debug information was
# there to be used).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

((EUID == 0)) || skip "the daemon samples the whole system: needs root"
need_tool go golang-go
start_receiver "$TMP/rx"
DB=$TMP/d.db
start_daemon "$DB" --flush-interval 1h --push "$RX_URL" --push-format pyroscope --push-retry-max 1s

wl=$(uniq_copy inline_chain)
"$wl" 1500 >wl.out || fail "inline_chain failed: $(cat wl.out)"
n=$(rx_count)
ctl --db "$DB" flush
rx_wait $((n + 1)) 120
wait_pushed

# top FILE: the functions of inline_chain's samples in a pushed profile, flat
top() {
	gopprof_ok "$1.top" -top -nodecount=200 -show="$(basename "$wl")|hot_loop|mix" "$1"
	awk '{ for (i = 6; i <= NF; i++) if ($i ~ /^(hot_loop|mid_mix|leaf_mix)$/) print $i, $1 }' "$1.top"
}
daemon_push=$(ls "$RX"/req-*.profile | tail -1)
d=$(top "$daemon_push")
[[ $d == *hot_loop* ]] || fail "the daemon's push has no hot_loop: $(head -c 1500 "$daemon_push.top")"
[[ $d != *mid_mix* && $d != *leaf_mix* ]] || fail "the daemon's push names inlined frames: $d"

n=$(rx_count)
"$TALLY" push -i "$DB" --to "$RX_URL" --format pyroscope >push.out 2>&1 || fail "tally push failed: $(cat push.out)"
rx_wait $((n + 1)) 60
cli_push=$(ls "$RX"/req-*.profile | tail -1)
c=$(top "$cli_push")
[[ $c == *leaf_mix* && $c == *mid_mix* ]] || fail "'tally push' of the same epochs names no inlined frame: $c"
note "daemon's push: $(echo $d); tally push: $(echo $c)"
stop_daemon "$DAEMON_PID"
