#!/bin/bash
# kill -9 of a pushing daemon in the middle of a push: the server has taken
# the request (stored, its answer held back) when the daemon dies, so the
# cursor never says it was sent. The daemon started again sends that
# epoch's unsent part again: the server then holds the one push twice and
# nothing lost; the samples it took exceed those the daemon wrote by exactly
# the held push's, and the push sent again holds the same samples.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

((EUID == 0)) || skip "the daemon samples the whole system: needs root"
need_tool go golang-go
start_receiver "$TMP/rx"
start_burner
DB=$TMP/d.db
args=(--flush-interval 1h --push "$RX_URL" --push-format parca --push-retry-max 1s)
start_daemon "$DB" "${args[@]}"
ctl --db "$DB" flush
rx_wait 1 120
wait_pushed

# the next push is stored and held: the daemon dies waiting for the answer
touch "$RX/hold"
n=$(rx_count)
ctl --db "$DB" flush
rx_wait $((n + 1)) 120
held=$RX/req-$(printf %04d $((n + 1)))
kill -KILL "$DAEMON_PID"
for ((i = 0; i < 200; i++)); do alive "$DAEMON_PID" || break; sleep 0.05; done
alive "$DAEMON_PID" && fail "the daemon survived kill -9"
rm -f "$RX/hold"
held_n=$(rx_count_one "$held")
((held_n > 0)) || fail "the held push holds no samples"
note "killed in the middle of a push of $held_n samples"

# started again: the held push goes again, then the new epoch's flushes
start_daemon "$DB" "${args[@]}"
wait_pushed
ctl --db "$DB" flush
wait_pushed
again=$RX/req-$(printf %04d $((n + 2)))
[[ -s $again.json ]] || fail "nothing was sent after the restart"
again_n=$(rx_count_one "$again")
((again_n == held_n)) || fail "the push sent again holds $again_n samples, the held one $held_n"
sent=$(rx_samples)
written=$(flushed_samples)
((sent - written == held_n)) || fail "the server took $sent samples, the daemon wrote $written: not the $held_n of one push twice"
note "the server took $sent samples, $written written and the one held push ($held_n) twice; nothing lost"
stop_daemon "$DAEMON_PID"
