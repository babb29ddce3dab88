#!/bin/bash
# tally top in a terminal (tmux: send-keys, capture-pane): the screen shows
# split_funcs' measured split; v, 1 2 3 switch functions, images and commands;
# s sorts by name; i and c filter by image and command, = clears; Space
# freezes and thaws; h shows the keys; a resize redraws to the new size with
# no line past its width; q quits with status 0 and gives the shell its
# screen back; ^Z stops it with the shell's screen restored, fg brings the
# view back; the command's output does not reach the screen.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/top.sh"
need_tool tmux tmux

SOCK="tally-top-$$"
T() { tmux -L "$SOCK" -f /dev/null "$@"; }
at_exit 'tmux -L "$SOCK" kill-server 2>/dev/null || true'

# start CMD...: a 100x30 terminal running CMD (through sh; its status goes to rc)
start() {
	rm -f rc
	T new-session -d -x 100 -y 30 "$* 2>top.err; echo \$? > $TMP/rc; sleep 600"
}
cap() { T capture-pane -p >"${1:-screen}"; }
# wait_screen REGEX [SECONDS]: until the screen has a line matching REGEX.
wait_screen() {
	local i
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		cap
		grep -Eq -- "$1" screen && return 0
		sleep 0.1
	done
	fail "timed out waiting for /$1/ on the screen: $(head -c 1500 screen)"
}
# wait_rc: until tally top has exited (5 s at most)
wait_rc() {
	local i
	for ((i = 0; i < 50; i++)); do
		[[ -s rc ]] && return 0
		sleep 0.1
	done
}
key() { T send-keys "$@"; sleep 0.4; cap; }
# rows: the row lines of the screen (they start with a share)
rows() { grep -E '^ *[0-9]+\.[0-9]+%' "${1:-screen}" || true; }

case_split() {
	# the last screen before the command ends against what it measured
	start "'$TALLY' top -d 0.3 -- sh -c \"'$WORKLOADS/split_funcs' 3000 > $TMP/wl.out\""
	wait_screen 'work_c$'
	local last=
	while [[ ! -s rc ]]; do
		cap
		grep -q 'work_c$' screen && cp screen last && last=1
		sleep 0.2
	done
	[[ -n $last ]] || fail "no screen with the three functions"
	[[ $(cat rc) == 0 ]] || fail "tally top exited $(cat rc): $(head -c 500 top.err)"
	grep -q '^truth work_a' wl.out || fail "the workload did not finish: $(cat wl.out)"
	# as a snapshot for top_check: header, rows
	{ echo "# tally top: screen"; rows last | awk '{ print $1, 1, $2, $3, $4 }'; } >last.txt
	top_check last.txt wl.out 5 work_a work_b work_c
	# the command's output went to its file, not to the screen
	! grep -q '^truth' last || fail "the command's output reached the screen"
}

case_keys() {
	start "'$TALLY' top -d 0.3 -- '$WORKLOADS/split_funcs' 30000"
	wait_screen 'work_a$'
	grep -q '^tally top: functions by share' screen || fail "the top line: $(head -1 screen)"
	grep -Eq 'share +image +command +function' screen || fail "no column names: $(head -4 screen)"
	grep -q 'q quit' screen || fail "no keys line at the bottom: $(tail -1 screen)"

	key v
	grep -q '^tally top: images by share' screen || fail "v: $(head -1 screen)"
	rows | awk 'NR == 1 && $NF != "split_funcs" { exit 1 }' || fail "images: the first row is not split_funcs: $(rows | head -3)"
	key 3
	grep -q '^tally top: commands by share' screen || fail "3: $(head -1 screen)"
	[[ $(rows | awk 'NR == 1 { print $NF }') == split_funcs ]] || fail "commands: $(rows | head -3)"
	key 1
	grep -q '^tally top: functions by share' screen || fail "1: $(head -1 screen)"

	key s
	key s
	grep -q '^tally top: functions by name' screen || fail "s s: $(head -1 screen)"
	rows | awk '{ print $NF }' >names
	LC_ALL=C sort -c names 2>/dev/null || fail "by name, the rows are not in order: $(head -8 names | tr '\n' ' ')"
	key S

	key i
	key l i b c Enter
	grep -q "image 'libc'" screen || fail "i libc: the top line has no filter: $(head -1 screen)"
	rows | awk '$2 !~ /libc/ { bad = 1 } END { exit bad }' || fail "i libc: rows of other images: $(rows | head -5)"
	key =
	key c
	key n o m a t c h Enter
	grep -q "command 'nomatch'" screen || fail "c nomatch: $(head -1 screen)"
	[[ -z $(rows) ]] || fail "c nomatch: rows remain: $(rows | head -3)"
	key =
	sleep 0.4
	cap
	grep -q 'work_a$' screen || fail "=: the rows did not come back: $(head -8 screen)"

	key Space
	grep -q '\[frozen\]' screen || fail "Space: not frozen: $(head -1 screen)"
	cp screen frozen1
	sleep 1
	cap frozen2
	cmp -s frozen1 frozen2 || fail "frozen, yet the screen changed: $(head -1 frozen1) / $(head -1 frozen2)"
	key Space
	sleep 0.5
	cap
	! grep -q '\[frozen\]' screen || fail "Space again: still frozen"

	key h
	grep -q '^keys:' screen || fail "h: no help: $(head -5 screen)"
	key x
	grep -q 'work_a$' screen || fail "a key after h: the rows did not come back"

	T resize-window -x 50 -y 12
	sleep 0.6
	cap
	[[ $(wc -l <screen) -le 12 ]] || fail "resized to 12 lines, the screen has $(wc -l <screen)"
	awk 'length($0) > 50 { exit 1 }' screen || fail "resized to 50 columns, a line is longer: $(awk 'length($0) > 50' screen | head -2)"
	grep -q 'work_a$' screen || fail "resized: work_a is gone: $(cat screen)"
	grep -q 'q quit' screen || fail "resized: no keys line: $(cat screen)"
	T resize-window -x 120 -y 40
	sleep 0.6
	cap
	grep -q 'q quit  v view  s sort  c command  i image  = no filter  space freeze  h help' screen ||
		fail "resized to 120: the keys line is not whole: $(tail -2 screen)"

	key q
	wait_rc
	[[ $(cat rc 2>/dev/null) == 0 ]] || fail "q: tally top exited '$(cat rc 2>/dev/null)': $(head -c 300 top.err)"
	cap
	! grep -q 'tally top:' screen || fail "after q the screen is still tally's: $(head -3 screen)"
	pgrep -f "split_funcs 30000" >/dev/null && fail "after q the command still runs"
	T kill-server
}

case_ctrl_c() {
	start "'$TALLY' top -d 0.3"
	wait_screen 'system'
	T send-keys C-c
	wait_rc
	[[ $(cat rc 2>/dev/null) == 0 ]] || fail "^C: tally top exited '$(cat rc 2>/dev/null)': $(head -c 300 top.err)"
	T kill-server
}

case_suspend() {
	# an interactive shell with job control, as a user has (a process group
	# without one, orphaned, is never stopped by ^Z)
	rm -f rc
	T new-session -d -x 100 -y 30 "bash --norc --noprofile -i"
	sleep 0.5
	T send-keys "'$TALLY' top -d 0.3 -- '$WORKLOADS/split_funcs' 30000 2>top.err" Enter
	wait_screen 'work_a$'
	local pid
	pid=$(pgrep -f "^$TALLY top -d 0.3 -- $WORKLOADS/split_funcs 30000" | head -1)
	[[ -n $pid ]] || fail "cannot find tally top's pid"
	T send-keys C-z
	local i state=
	for ((i = 0; i < 50; i++)); do
		state=$(awk '{ print $3 }' /proc/$pid/stat 2>/dev/null)
		[[ $state == T ]] && break
		sleep 0.1
	done
	[[ $state == T ]] || fail "^Z: tally top is not stopped (state '$state')"
	sleep 0.3
	cap
	! grep -q 'work_a$' screen || fail "^Z: the screen is still tally top's: $(grep -v '^$' screen | head -4)"
	grep -q 'Stopped' screen || note "(the shell's screen: $(grep -v '^$' screen | tail -2 | tr '\n' ' '))"
	T send-keys "fg" Enter
	wait_screen 'work_a$'
	grep -q '^tally top: functions by share' screen || fail "after fg: $(head -1 screen)"
	T send-keys q
	# (the shell ran the echo when the job stopped: the exit status of q is
	# checked above; here, that it ends)
	for ((i = 0; i < 50; i++)); do
		[[ -e /proc/$pid ]] || break
		sleep 0.1
	done
	[[ ! -e /proc/$pid ]] || fail "q after ^Z and fg: tally top still runs"
	T kill-server
}

subtest "the screen shows the measured split" case_split
subtest "keys: views, order, filters, freeze, help, resize, quit" case_keys
subtest "^C quits" case_ctrl_c
subtest "^Z gives the shell its screen back, fg brings the view back" case_suspend
