#!/bin/bash
# tally top in a terminal (tmux: send-keys, capture-pane): the screen shows
# split_funcs' measured split; v, 1 2 3 switch functions, images and commands;
# s sorts by name; i and c filter by image and command, = clears; Space
# freezes and thaws; h shows the keys; a resize redraws to the new size with
# no line past its width; q quits with status 0 and gives the shell its
# screen back; ^Z stops it with the shell's screen restored, fg brings the
# view back; the command's output does not reach the screen.
. "$SRCDIR/tests/e2e/lib.sh"
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
# the screen as it is when a wait gives up
wait_state() { echo "the screen:"; cat screen; }
# has REGEX, lacks REGEX: the screen (captured now) has, has no line matching REGEX
has() { cap && grep -Eq -- "$1" screen; }
lacks() { cap && ! grep -Eq -- "$1" screen; }
# wait_screen REGEX [SECONDS]: until the screen has a line matching REGEX.
wait_screen() {
	wait_for "${2:-10}" "a line matching /$1/ on the screen" has "$1"
}
# wait_gone REGEX [SECONDS]: until the screen has no line matching REGEX.
wait_gone() {
	wait_for "${2:-10}" "no line matching /$1/ on the screen" lacks "$1"
}
# wait_rc: until tally top has exited (10 s at most)
wait_rc() {
	wait_for 10 "tally top's exit (its status in rc)" test -s rc
}
# key KEYS...: type them; the caller waits for what they do
key() { T send-keys "$@"; }
# keep_last: the screen to 'last' when it shows work_c; true once tally top
# has exited
keep_last() {
	[[ ! -s rc ]] || return 0
	cap
	! grep -q 'work_c$' screen || cp screen last
	return 1
}
# rows_moved FILE: the screen's rows are not FILE's (a tick redrew them)
rows_moved() {
	cap
	[[ $(rows screen) != "$(rows "$1")" ]]
}
# fits COLUMNS LINES: the screen is within the size, redrawn by tally top to
# it (tmux cuts the old lines at the new width at once: the names at the end
# of the rows show whole only once tally top has fitted them), the keys
# line shows
fits() {
	cap
	(($(wc -l <screen) <= $2)) && awk -v w="$1" 'length($0) > w { exit 1 }' screen &&
		grep -q 'q quit' screen && grep -q 'work_a$' screen
}
# state_is PID STATE: the process's state letter (/proc/PID/stat)
state_is() {
	[[ $(sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null) == "$2" ]]
}
# rows: the row lines of the screen (they start with a share)
rows() { grep -E '^ *[0-9]+\.[0-9]+%' "${1:-screen}" || true; }

case_split() {
	# the last screen before the command ends against what it measured
	start "'$TALLY' top -d 0.3 -- sh -c \"'$WORKLOADS/split_funcs' 3000 > $TMP/wl.out\""
	wait_screen 'work_c$'
	# the screens until the command ends, the last with the three functions kept
	rm -f last
	wait_for 120 "the end of split_funcs 3000 under tally top" keep_last
	[[ -f last ]] || fail "no screen with the three functions"
	[[ $(cat rc) == 0 ]] || fail "tally top exited $(cat rc): $(head -c 500 top.err)"
	grep -q '^truth work_a' wl.out || fail "the workload did not finish: $(cat wl.out)"
	# the shares of the window: decayed by 7/8 a tick (docs/top.md), so its
	# samples count as fewer: N samples a tick over T ticks weigh as
	# N (sum of w)^2 / (sum of w^2), w = (7/8)^k; N from the top line's rate
	# (the last tick's: a partial one counts fewer, the safe side), T from its
	# samples since the start
	local rate total n
	read -r rate total < <(sed -nE '1s/.*, ([0-9]+) samples\/s, ([0-9]+) samples, .*/\1 \2/p' last)
	[[ -n $rate && -n $total ]] || fail "the top line has no 'N samples/s, N samples': $(head -1 last)"
	n=$(awk -v r="$rate" -v s="$total" 'BEGIN { n = r * 0.3; if (n < 1) n = 1; t = s / n; a = b = 0
		for (k = 0; k < t; k++) { w = 0.875 ^ k; a += w; b += w * w }
		printf "%d", n * a * a / b }')
	rows last | awk '$NF ~ /^work_[abc]$/ { sub("%", "", $1); s[$NF] = $1; t += $1 }
		END { for (f in s) printf "%s %.2f\n", f, 100 * s[f] / t }' >last.shares
	for f in work_a work_b work_c; do
		grep -q "^$f " last.shares || fail "the last screen has no $f: $(cat last)"
		share_near "$(awk -v f=$f '$1 == f { print $2 }' last.shares)" "$n" "$(truth $f wl.out)" \
			"tally top's last screen: $f's share of the three (the window's $rate samples a tick, $total in all, weigh as $n)"
	done
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
	wait_screen '^tally top: images by share'
	rows | awk 'NR == 1 && $NF != "split_funcs" { exit 1 }' || fail "images: the first row is not split_funcs: $(rows | head -3)"
	key 3
	wait_screen '^tally top: commands by share'
	[[ $(rows | awk 'NR == 1 { print $NF }') == split_funcs ]] || fail "commands: $(rows | head -3)"
	key 1
	wait_screen '^tally top: functions by share'

	key s
	wait_screen '^tally top: functions by self'
	key s
	wait_screen '^tally top: functions by name'
	rows | awk '{ print $NF }' >names
	LC_ALL=C sort -c names 2>/dev/null || fail "by name, the rows are not in order: $(head -8 names | tr '\n' ' ')"
	key S
	wait_screen '^tally top: functions by share'

	key i l i b c Enter
	wait_screen "image 'libc'"
	rows | awk '$2 !~ /libc/ { bad = 1 } END { exit bad }' || fail "i libc: rows of other images: $(rows | head -5)"
	key =
	wait_gone "image 'libc'"
	key c n o m a t c h Enter
	wait_screen "command 'nomatch'"
	[[ -z $(rows) ]] || fail "c nomatch: rows remain: $(rows | head -3)"
	key =
	wait_screen 'work_a$'

	key Space
	wait_screen '\[frozen\]'
	cp screen frozen1
	# frozen: nothing may change over three ticks and more (a time to see
	# nothing happen, not a wait for something); after the thaw the ticks must
	# show, so that the frozen second was not one of a stalled tally top
	sleep 1
	cap frozen2
	cmp -s frozen1 frozen2 || fail "frozen, yet the screen changed: $(head -1 frozen1) / $(head -1 frozen2)"
	key Space
	wait_gone '\[frozen\]'
	wait_for 10 "a tick after the thaw (the rows redrawn)" rows_moved frozen1

	key h
	wait_screen '^keys:'
	key x
	wait_screen 'work_a$'

	T resize-window -x 50 -y 12
	wait_for 10 "the screen redrawn in 50 columns and 12 lines, work_a whole, the keys line at the bottom" fits 50 12
	T resize-window -x 120 -y 40
	wait_screen 'q quit  v view  s sort  c command  i image  = no filter  space freeze  h help'

	key q
	wait_rc
	[[ $(cat rc 2>/dev/null) == 0 ]] || fail "q: tally top exited '$(cat rc 2>/dev/null)': $(head -c 300 top.err)"
	wait_gone 'tally top:'
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
	T new-session -d -x 100 -y 30 "PS1='ready\$ ' bash --norc --noprofile -i"
	wait_screen '^ready\$'
	T send-keys "'$TALLY' top -d 0.3 -- '$WORKLOADS/split_funcs' 30000 2>top.err" Enter
	wait_screen 'work_a$'
	local pid
	pid=$(pgrep -f "^$TALLY top -d 0.3 -- $WORKLOADS/split_funcs 30000" | head -1)
	[[ -n $pid ]] || fail "cannot find tally top's pid"
	T send-keys C-z
	wait_for 10 "tally top stopped by ^Z (state T)" state_is "$pid" T
	wait_gone 'work_a$'
	grep -q 'Stopped' screen || note "(the shell's screen: $(grep -v '^$' screen | tail -2 | tr '\n' ' '))"
	T send-keys "fg" Enter
	wait_screen 'work_a$'
	grep -q '^tally top: functions by share' screen || fail "after fg: $(head -1 screen)"
	T send-keys q
	# (the shell ran the echo when the job stopped: the exit status of q is
	# checked above; here, that it ends)
	wait_for 10 "tally top's end after q (^Z and fg before)" test ! -e /proc/$pid
	T kill-server
}

subtest "the screen shows the measured split" case_split
subtest "keys: views, order, filters, freeze, help, resize, quit" case_keys
subtest "^C quits" case_ctrl_c
subtest "^Z gives the shell its screen back, fg brings the view back" case_suspend
