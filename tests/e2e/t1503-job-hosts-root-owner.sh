#!/bin/bash
# The root tally lives in on a host, against a local user of that host
# (docs/remote.md): another user ('nobody', through setpriv) who makes the
# root first, or a directory above it, and plants a 'tally' there that says
# the right version never gets it run by the ssh user (root), neither by
# `tally job hosts` nor by `tally job run --host`; every component of the
# root is checked (not a link, the user's or root's above it, writable by no
# one else unless sticky) before anything under it runs; and the default
# root is under the ssh user's home, which no other user can make first.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"
. "$SRCDIR/tests/e2e/hosts.sh"

make_hosts 1
ver=$("$TALLY" --version)
v=${ver#tally }

# plant ROOT: as the other user, ROOT/VERSION/tally says this version and
# leaves a mark of whoever ran it in the host's /tmp
plant() {
	host_as_other h1 "mkdir -p $1/$v && printf '%s\n' '#!/bin/sh' 'touch /tmp/planted-ran-by-\$(id -u)' 'echo \"$ver\"' >$1/$v/tally && chmod 755 $1 $1/$v $1/$v/tally"
	host_sh h1 "test -x $1/$v/tally && stat -c %U $1" | grep -qx nobody || fail "the other user could not plant '$1'"
}

not_ran() {
	local marks
	marks=$(host_sh h1 "ls /tmp/planted-ran-by-* 2>/dev/null || true")
	[[ -z $marks ]] || fail "$1: the planted program ran: $marks"
}

planted_root() {
	plant /tmp/tally-profilers
	expect_fail_with "^tally: host 'h1': '/tmp/tally-profilers' belongs to another user \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h1 --remote-root /tmp/tally-profilers
	not_ran "job hosts"
	printf '%s\n' "profilers add tally -a -F 99" "run --tag t -- true" >p.ctl
	job_rc p.ctl --host h1 --remote-root /tmp/tally-profilers
	((JOB_RC == 1)) || fail "job run over a planted root: exit $JOB_RC, expected 1; $(cat job.err)"
	grep -q "'/tmp/tally-profilers' belongs to another user" job.err || fail "job run does not name the planted root: $(cat job.err)"
	not_ran "job run"
	note "a root another user made first is refused, its program never run"
}

default_root() {
	# the old default root planted: the default is elsewhere now, the user's own
	tally_ok job hosts --host h1
	grep -Eq "^h1 +$(uname -m) +installed now" out || fail "not installed under the default root: $(cat out)"
	not_ran "job hosts with the default root"
	local home got
	home=$(host_sh h1 'echo $HOME')
	got=$(host_sh h1 "stat -c '%a %U %n' ~/.cache/tally-profilers ~/.cache/tally-profilers/$v")
	[[ $got == "700 root $home/.cache/tally-profilers"$'\n'"700 root $home/.cache/tally-profilers/$v" ]] ||
		fail "the default root is not the user's own under its home: $got"
	note "default root: $home/.cache/tally-profilers, made private; the planted /tmp/tally-profilers untouched"
}

ancestor_of_other() {
	# the root itself is root's, but the directory above it is another
	# user's: she may rename it away and put her own in its place
	host_as_other h1 "mkdir -m 755 /tmp/nb"
	host_sh h1 "mkdir -m 700 /tmp/nb/r"
	expect_fail_with "^tally: host 'h1': '/tmp/nb' belongs to another user \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h1 --remote-root /tmp/nb/r
	host_sh h1 "test ! -e /tmp/nb/r/$v" || fail "tally was installed under another user's directory"
	note "a directory of another user above the root is refused"
}

writable_above() {
	host_sh h1 "mkdir -m 777 /tmp/ww && chmod 777 /tmp/ww"
	expect_fail_with "^tally: host 'h1': '/tmp/ww' is writable by other users \(group or others may write there\) \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h1 --remote-root /tmp/ww/r
	host_sh h1 "test ! -e /tmp/ww/r" || fail "a root was made in a directory every user may write"
	# /tmp is writable by all but sticky: a root of the user's own there is fine
	tally_ok job hosts --host h1 --remote-root /tmp/mine
	grep -Eq "^h1 +$(uname -m) +installed now" out || fail "a private root under the sticky /tmp is refused: $(cat out err)"
	note "a directory others may write above the root is refused; a sticky one is not"
}

link_above() {
	host_as_other h1 "mkdir -m 755 /tmp/real && ln -s /tmp/real /tmp/lnk"
	expect_fail_with "^tally: host 'h1': '/tmp/lnk' is a symbolic link \(tally needs a private directory there: choose another root\)$" \
		"$TALLY" job hosts --host h1 --remote-root /tmp/lnk/r
	host_sh h1 "test ! -e /tmp/real/r" || fail "a root was made through another user's link"
	note "a link above the root is refused"
}

group_writable_root() {
	# the root is the user's, yet others may write in it: refused before its tally runs
	host_sh h1 "mkdir -p /tmp/gw/$v && chmod 775 /tmp/gw && printf '%s\n' '#!/bin/sh' 'touch /tmp/planted-ran-by-\$(id -u)' 'echo \"$ver\"' >/tmp/gw/$v/tally && chmod 755 /tmp/gw/$v/tally"
	expect_fail_with "^tally: host 'h1': '/tmp/gw' is writable by other users" "$TALLY" job hosts --host h1 --remote-root /tmp/gw
	not_ran "a root others may write"
	note "a root writable by its group is refused before anything in it runs"
}

subtest "a root another user made first is never run" planted_root
subtest "the default root is the user's, under its home" default_root
subtest "a directory of another user above the root" ancestor_of_other
subtest "a directory others may write above the root" writable_above
subtest "a symbolic link above the root" link_above
subtest "a root writable by its group" group_writable_root
