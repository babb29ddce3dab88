#!/bin/bash
# tally top in a terminal (tmux) while many new programs start (issue 31,
# item 8), as t1304 does as text: 40 distinct programs, one started every
# 50 ms and never before the screen has shown the one before, each running
# functions not named yet while the next ones start; at the default refresh
# and, with -g, at 0.2 s. The view shows each program and ends with status
# 0 when the command does, and no sanitizer report (under the ASan build
# the older generations of symbols were read after their array was
# realloc'ed, and the view died).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/top.sh"
need_tool tmux tmux

N=40
churn_build $N
SOCK="tally-top-churn-$$"
T() { tmux -L "$SOCK" -f /dev/null "$@"; }
at_exit 'tmux -L "$SOCK" kill-server 2>/dev/null || true'

# run_screen [TOP OPTIONS...]: the images view of the churn in a 120x50
# terminal until the starter ends (it watches the screen)
run_screen() {
	rm -f rc churn.log top.err
	T new-session -d -x 120 -y 50 \
		"'$TALLY' top $* --view images --image ch_ -- '$TMP/churn-start.sh' $N tmux '$SOCK' 2>$TMP/top.err; echo \$? >$TMP/rc; sleep 600"
	local i
	# (the starter gives up on a program not shown within 60 s)
	for ((i = 0; i < 3000; i++)); do
		[[ -s rc ]] && break
		sleep 0.1
	done
	T capture-pane -p >screen 2>/dev/null || true
	T kill-server 2>/dev/null || true
	[[ -s rc ]] || fail "tally top $* did not end; the starter: $(tail -3 churn.log 2>/dev/null)"
	grep -E -m3 'ERROR: AddressSanitizer|runtime error' top.err &&
		fail "tally top $*: a sanitizer report: $(grep -m1 -A5 -E 'ERROR: AddressSanitizer|runtime error' top.err | head -c 800)"
	[[ $(cat rc) == 0 ]] || fail "tally top $* exited $(cat rc): $(head -c 1500 top.err); the starter: $(tail -3 churn.log 2>/dev/null)"
	grep -q 'end: 0' churn.log || fail "the starter did not finish: $(tail -3 churn.log)"
	local shown
	shown=$(grep -c ' shown$' churn.log)
	((shown == N)) || fail "$shown of the $N programs were shown"
	note "$N programs started and each shown on the screen; $(grep -m1 'samples counted' churn.log | cut -d' ' -f2-)"
}

case_default() {
	run_screen
}

case_g() {
	run_screen -g -d 0.2
}

subtest "the screen at the default refresh while 40 new programs start" case_default
subtest "the same with -g at 0.2 s" case_g
