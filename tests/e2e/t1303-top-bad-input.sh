#!/bin/bash
# tally top refuses bad input with one line naming the thing and the fix, and
# never hangs: options that do not fit together, bad values, a pid that is
# gone, an unknown event, off-CPU events (top shows on-CPU time only), --db
# without a daemon, a socket that answers
# garbage, and a reader that goes away; docs/offcpu.md says top refuses the
# off-CPU options.
. "$SRCDIR/tests/e2e/lib.sh"

case_usage() {
	expect_fail_with "give a COMMAND, or -a, or -p, or --db, not several" "$TALLY" top -a -- true
	((LAST_RC == 2)) || fail "-a with a COMMAND: exit $LAST_RC, expected 2"
	expect_fail_with "not several" "$TALLY" top -p 1 --db db
	expect_fail_with "--db shows what the daemon samples" "$TALLY" top --db db -F 99
	((LAST_RC == 2)) || fail "--db with -F: exit $LAST_RC, expected 2"
	# its shares are of on-CPU samples: off-CPU events are refused, not recorded unseen
	if "$TALLY" events 2>/dev/null | grep -E '^off-cpu +tracepoint +available' >/dev/null; then
		expect_fail_with "top shows time on the CPU only, not event 'off-cpu' .*tally record --off-cpu" "$TALLY" top -e cpu-clock,off-cpu --once -- true
		((LAST_RC == 2)) || fail "top -e cpu-clock,off-cpu: exit $LAST_RC, expected 2"
		# the off-CPU options are record's, the daemon's and the job profiler's, not top's
		expect_fail_with "option '--off-cpu' is unknown \(see 'tally top --help'\)" "$TALLY" top --off-cpu --once -- true
		((LAST_RC == 2)) || fail "top --off-cpu: exit $LAST_RC, expected 2"
		"$TALLY" top --help >top-help.txt 2>&1
		grep -q -- '--off-cpu' top-help.txt && fail "tally top --help offers --off-cpu, which it refuses"
		# and the off-CPU guide says so where it names top
		awk 'BEGIN { RS = "" } /`tally top`/' "$SRCDIR/docs/offcpu.md" >offcpu-top.txt
		[[ -s offcpu-top.txt ]] || fail "docs/offcpu.md no longer names 'tally top'"
		grep -q 'refuses' offcpu-top.txt || fail "docs/offcpu.md does not say that top refuses the off-CPU options: $(tr '\n' ' ' <offcpu-top.txt)"
	else
		echo "SKIPPED PART: off-CPU recording is unavailable here: top --off-cpu's refusal not checked"
	fi
	expect_fail_with "--delay takes 50ms to 1h" "$TALLY" top -d 10ms
	expect_fail_with "--delay" "$TALLY" top -d 0
	expect_fail_with "--view takes functions, images, commands, not 'flames'" "$TALLY" top --view flames
	expect_fail_with "--sort takes share, self, name, image, command" "$TALLY" top --sort x
	expect_fail_with "--rows" "$TALLY" top --rows -1
	expect_fail_with "--iterations" "$TALLY" top -n 0
	expect_fail_with "unknown event 'bogus'" "$TALLY" top -e bogus
	((LAST_RC == 2)) || fail "-e bogus: exit $LAST_RC, expected 2"
}

case_targets() {
	expect_fail_with "cannot attach to pid 2147483647: no such process" "$TALLY" top -p 2147483647
	((LAST_RC == 1)) || fail "a pid that is gone: exit $LAST_RC, expected 1"
	expect_fail_with "no daemon socket at 'nodb/ctl.sock' \(start one with 'tally daemon" "$TALLY" top --db nodb
	mkdir fake
	touch fake/ctl.sock
	expect_fail_with "'fake/ctl.sock' is not a socket" "$TALLY" top --db fake
}

# a socket that answers every request with LEN bytes of BODY (python)
FAKE_PY='
import os, socket, sys
path, body = sys.argv[1], sys.argv[2].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(4)
open(path + ".ready", "w").close()
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"ok %d\n" % len(body) + body)
    c.close()
'

case_garbage_reply() {
	mkdir -p g1 g2
	python3 -c "$FAKE_PY" g1/ctl.sock "this is not a bundle" &
	track_pid $!
	python3 -c "$FAKE_PY" g2/ctl.sock "" &
	track_pid $!
	for ((i = 0; i < 100; i++)); do [[ -e g1/ctl.sock.ready && -e g2/ctl.sock.ready ]] && break; sleep 0.05; done
	expect_fail_with "the answer of 'g1/ctl.sock' to peek is not a profile \\(is the socket a tally daemon's\\?\\)" timeout 10 "$TALLY" top --db g1 --once
	((LAST_RC == 1)) || fail "a garbage reply: exit $LAST_RC, expected 1"
	expect_fail_with "the answer of 'g2/ctl.sock' to peek is not a profile" timeout 10 "$TALLY" top --socket g2/ctl.sock --once
}

case_reader_gone() {
	# the snapshots' reader goes away: tally top stops (and stops the command)
	local t0 t1 rc=0
	t0=$(date +%s)
	set +o pipefail
	"$TALLY" top -d 0.1 -- sh -c "exec '$WORKLOADS/split_funcs' 20000 >/dev/null" 2>gone.err | head -c 1 >/dev/null
	t1=$(date +%s)
	set -o pipefail
	(((t1 - t0) < 10)) || fail "tally top went on for $((t1 - t0)) s after its reader left"
	! pgrep -f "split_funcs 20000" >/dev/null || fail "the command still runs after tally top ended"
}

subtest "usage errors" case_usage
subtest "targets that are not there" case_targets
subtest "a socket answering garbage" case_garbage_reply
subtest "the reader goes away" case_reader_gone
