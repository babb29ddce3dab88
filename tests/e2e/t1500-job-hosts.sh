#!/bin/bash
# tally job hosts, on two test hosts (tests/e2e/hosts.sh: network namespaces
# with their own sshd and /tmp): each is reached through TALLY_SSH, gets this
# tally installed in its private directory (0700, the user's), where it runs;
# a second check finds it there and copies nothing; a host that cannot be
# reached is named with ssh's reason and makes the exit non-zero while the
# others are still checked; a root that belongs to another user, or is a
# symbolic link, is refused.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 2
ver=$("$TALLY" --version)
# the default root: under the ssh user's home on the host
root="~/.cache/tally-profilers"
dir=$root/${ver#tally }

first() {
	tally_ok job hosts --host h1 --host h2
	for h in h1 h2; do
		grep -Eq "^$h +$(uname -m) +installed now" out || fail "$h: not installed by the first check: $(cat out)"
		# it runs there, with what it brought (the host's own /tmp)
		got=$(host_sh "$h" "$dir/tally --version") || fail "$h: the installed tally does not run"
		[[ $got == "$ver" ]] || fail "$h: the installed tally says '$got', this one '$ver'"
		mode=$(host_sh "$h" "stat -c '%a %U' $root $dir")
		[[ $mode == $'700 root\n700 root' ]] || fail "$h: the private directories are '$mode', not 700 and the user's"
	done
	# each host has its own /tmp: nothing of this leaked here
	[[ ! -e $dir/tally.bin || -n ${TALLY_KEEP_LOCAL_PROFILERS:-} ]] || true
	note "both hosts: installed, runs, private"
}

again() {
	tally_ok job hosts --host h2 --host h1
	grep -Eq "^h1 +$(uname -m) +already there" out || fail "h1: the second check copied again: $(cat out)"
	grep -Eq "^h2 +$(uname -m) +already there" out || fail "h2: the second check copied again: $(cat out)"
	# boot id and clock: the host's fake boot id, a clock offset near 0
	want=$(cat "$HOSTS/h1/boot_id")
	grep -Eq "^h1 .* $want\$" out || fail "h1: its boot id ($want) is not shown: $(cat out)"
	off=$(awk '$1 == "h1" { sub(/s$/, "", $5); print $5 }' out)
	between "${off#+}" -1 1 || fail "h1: clock offset '$off' (same machine: near 0)"
	note "second check: nothing copied; boot id and clock offset shown"
}

unreachable() {
	local rc=0
	"$TALLY" job hosts --host h1 --host nosuchhost >o.txt 2>e.txt || rc=$?
	((rc == 1)) || fail "an unreachable host: exit $rc, expected 1"
	grep -q "^tally: host 'nosuchhost': cannot connect (" e.txt || fail "the unreachable host is not named with a reason: $(cat e.txt)"
	(($(wc -l <e.txt) == 1)) || fail "more than one line for one unreachable host: $(cat e.txt)"
	grep -Eq "^h1 +$(uname -m) +already there" o.txt || fail "h1 was not checked beside the unreachable host: $(cat o.txt)"
	note "unreachable: $(cat e.txt)"
}

foreign_root() {
	host_sh h2 "mkdir -p /tmp/other && chown 65534 /tmp/other && ln -s /tmp/other /tmp/link"
	expect_fail_with "^tally: host 'h2': '/tmp/other' belongs to another user \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h2 --remote-root /tmp/other
	expect_fail_with "^tally: host 'h2': '/tmp/link' is a symbolic link \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h2 --remote-root /tmp/link
	host_sh h2 "test ! -e /tmp/other/${ver#tally }" || fail "something was installed under the other user's directory"
	note "a root of another user, and a link, refused"
}

from_control() {
	printf '%s\n' "# the job's hosts" "hosts h1 h2" "profilers add tally -a -F 99" "run sleeptest 0" >c.ctl
	tally_ok job hosts c.ctl
	grep -Eq "^h1 +$(uname -m) +.*\(profilers initialized\)$" out && grep -Eq "^h2 +$(uname -m) +.*\(profilers initialized\)$" out ||
		fail "the control file's hosts are not checked with its profilers: $(cat out)"
	# a profiler that cannot initialize on a host is named with it
	printf '%s\n' "hosts h1" "profilers add cmd no-such-command-here" "run sleeptest 0" >bad.ctl
	expect_fail_with "^tally: host 'h1': profiler 'cmd' failed at initialize: command 'no-such-command-here' not found in PATH$" "$TALLY" job hosts bad.ctl
	# a 'hosts' line after a run is refused with its line
	printf '%s\n' "run sleeptest 0" "hosts h1" >late.ctl
	expect_fail_with "^tally: 'late.ctl' line 2: 'hosts' must come before the first 'run' \(the hosts are the whole job's\)$" \
		"$TALLY" job run late.ctl
	printf '%s\n' "hosts" "run sleeptest 0" >empty.ctl
	expect_fail_with "^tally: 'empty.ctl' line 1: 'hosts' needs at least one host \(as ssh takes it\)$" "$TALLY" job run empty.ctl
	note "hosts from a control file: checked; misplaced or empty 'hosts' lines refused with their line"
}

clock_offset() {
	# the hosts share this machine's clock: the true offset is 0. A new ssh
	# connection's handshake (measured here) is no part of the estimate:
	# the offset is within a quarter of it (half of it before, +0.08 to
	# +0.26 s), and the round trip shown is shorter than it
	local t0 t1 hs off rtt
	t0=$(date +%s.%N)
	ssh -F "$HOSTS/ssh_config" h1 true
	t1=$(date +%s.%N)
	hs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
	tally_ok job hosts --host h1
	off=$(awk '$1 == "h1" { sub(/s$/, "", $5); print $5 }' out)
	rtt=$(awk '$1 == "h1" { sub(/s$/, "", $6); print $6 }' out)
	awk -v o="$off" -v h="$hs" 'BEGIN { if (o < 0) o = -o; exit !(o < h / 4) }' ||
		fail "clock offset $off s for a host on this machine's clock, with a handshake of $hs s"
	fcmp "$rtt" "<" "$hs" || fail "the round trip shown ($rtt s) holds a handshake ($hs s)"
	note "offset $off s, round trip $rtt s; a handshake takes $hs s"
}

subtest "first check installs on both hosts" first
subtest "the clock offset is timed on the open connection" clock_offset
subtest "a second check finds it there" again
subtest "an unreachable host is named, the others checked" unreachable
subtest "a root that is not the user's is refused" foreign_root
subtest "the hosts of a control file" from_control
