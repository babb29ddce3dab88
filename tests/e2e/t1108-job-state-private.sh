#!/bin/bash
# a local user cannot make root's job run her files or write where she
# chooses: with HOME unset the profilers' state is the passwd home's, never a
# shared /tmp/.local she made first; a state directory (XDG_STATE_HOME,
# TALLY_STATE_DIR, --state-dir) that she made, that others may write, or
# that is reached through her link is refused with one line naming it and
# the fix, before any step of the plugin runs; a user with no home at all
# is told to give one; results are not made inside her directory in a shared
# one; a plugin she put in a shared directory is not run. The attacker is
# 'nobody' (setpriv), the victim root.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

((EUID == 0)) || skip "the victim is root: run as root"
command -v setpriv >/dev/null || skip "setpriv is not installed (util-linux)"
id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
NOBODY_GID=$(id -g nobody)
# as_nobody CMD...: CMD run as the local user 'nobody'
as_nobody() {
	setpriv --reuid=nobody --regid="$NOBODY_GID" --clear-groups "$@"
}

chmod 711 "$TMP"
mkdir -m 1777 pub # a shared directory, as /tmp is
example_plugin "$TMP/plugins"
printf 'profilers add loadavg 0.02\nrun sleeptest 0.2\n' >ex.ctl
# plant DIR: what 'nobody' leaves in a state directory DIR she made: the
# example plugin's setup marked as done and a sampler of hers, which says
# who ran it
plant() {
	as_nobody mkdir -p "$1/loadavg"
	as_nobody sh -c 'echo 1 >"$1/loadavg/.setup-version"; printf "#!/bin/sh\nid -u >>%s/pwned\nexec sleep 1000\n" "$2" >"$1/loadavg/sampler"; chmod 755 "$1/loadavg/sampler"' \
		sh "$1" "$TMP/pub"
}
not_pwned() {
	[[ ! -e $TMP/pub/pwned ]] || fail "root ran the planted sampler (as uid $(head -n 1 "$TMP/pub/pwned"))"
}

# tally_inside DIR: a copy of tally at DIR/bin/tally (root's, 755), run as
# /tmp/bin/tally once DIR is bound on /tmp (the tree it was built in may
# itself be under the /tmp the namespace hides)
tally_inside() {
	mkdir -m 755 "$1/bin"
	cp "$TALLY" "$1/bin/tally"
}

home_unset() {
	command -v unshare >/dev/null || skip "unshare is not installed (util-linux)"
	# a /tmp and a /root of the test's own, in a mount namespace: the
	# machine's are left alone
	mkdir -m 1777 ft
	mkdir -m 700 fr
	mkdir -m 755 ft/plugins
	cp -r plugins/loadavg ft/plugins/
	cp ex.ctl ft/
	tally_inside ft
	cat >inner.sh <<EOF
set -e
mount --make-rprivate /
mount --bind "$TMP/fr" /root
mount --bind "$TMP/ft" /tmp
# the attacker makes /tmp/.local first, where HOME unset once put root's state
setpriv --reuid=nobody --regid=$NOBODY_GID --clear-groups sh -c '
	mkdir -p /tmp/.local/state/tally/profilers/loadavg
	echo 1 >/tmp/.local/state/tally/profilers/loadavg/.setup-version
	printf "#!/bin/sh\nid -u >>/tmp/pwned\nexec sleep 1000\n" >/tmp/.local/state/tally/profilers/loadavg/sampler
	chmod 755 /tmp/.local/state/tally/profilers/loadavg/sampler
	: >/tmp/.local/state/tally/profilers/loadavg/.setup-lock'
mkdir -m 700 /tmp/work
cd /tmp/work
rc=0
env -i PATH="$PATH" /tmp/bin/tally job run --profilers-path /tmp/plugins /tmp/ex.ctl >/tmp/job.out 2>&1 || rc=\$?
echo "rc \$rc" >>/tmp/job.out
EOF
	unshare -m bash inner.sh 2>unshare.err || skip "cannot make a mount namespace: $(cat unshare.err)"
	[[ ! -e ft/pwned ]] || fail "with HOME unset root ran the sampler planted in /tmp/.local (as uid $(head -n 1 ft/pwned)): $(cat ft/job.out)"
	grep -qx 'rc 0' ft/job.out || fail "the job with HOME unset: $(cat ft/job.out)"
	grep -q '^SETUP loadavg 1 ' ft/job.out || fail "setup did not run in root's own state: $(cat ft/job.out)"
	[[ -s fr/.local/state/tally/profilers/loadavg/setup.log && $(stat -c %u:%a fr/.local/state/tally/profilers/loadavg) == 0:700 ]] ||
		fail "root's state is not in its home: $(find fr -ls)"
	note "HOME unset: root's state is under its passwd home; the /tmp/.local made first by another user is not looked at"
}

no_home() {
	command -v unshare >/dev/null || skip "unshare is not installed (util-linux)"
	local uid=54321
	! getent passwd $uid >/dev/null || skip "uid $uid has a passwd entry here"
	mkdir -m 1777 nt
	mkdir -m 755 nt/plugins
	cp -r plugins/loadavg nt/plugins/
	cp ex.ctl nt/
	tally_inside nt
	cat >inner2.sh <<EOF
set -e
mount --make-rprivate /
mount --bind "$TMP/nt" /tmp
cd /tmp
rc=0
env -i PATH="$PATH" setpriv --reuid=$uid --regid=$uid --clear-groups /tmp/bin/tally job run -r /tmp/res --profilers-path /tmp/plugins /tmp/ex.ctl >/tmp/job.out 2>/tmp/job.err || rc=\$?
echo "\$rc" >/tmp/rc
EOF
	unshare -m bash inner2.sh 2>unshare.err || skip "cannot make a mount namespace: $(cat unshare.err)"
	[[ $(cat nt/rc) != 0 ]] || fail "a user without a home and without HOME ran: $(cat nt/job.out)"
	[[ $(wc -l <nt/job.err) == 1 ]] || fail "not one line: $(cat nt/job.err)"
	grep -q "^tally: '/tmp/ex.ctl' line 1: profiler 'loadavg' failed at setup: no state directory (HOME is not set and uid $uid has no home directory): give --state-dir DIR or TALLY_STATE_DIR$" nt/job.err ||
		fail "error: $(cat nt/job.err)"
	[[ ! -e nt/.local ]] || fail "a user without a home got a state directory in /tmp: $(find nt/.local)"
}

xdg_planted() {
	plant "$TMP/pub/xdg/tally/profilers"
	expect_fail_with "^tally: 'ex.ctl' line 1: profiler 'loadavg' failed at setup: cannot use the state directory '$TMP/pub/xdg/tally/profilers': '$TMP/pub/xdg' belongs to uid $(id -u nobody), not to you, in the shared directory '$TMP/pub' \(give --state-dir DIR or TALLY_STATE_DIR: a directory of your own\)$" \
		env -u TALLY_STATE_DIR XDG_STATE_HOME="$TMP/pub/xdg" "$TALLY" job run -r res-xdg --profilers-path "$TMP/plugins" ex.ctl
	((LAST_RC == 1)) || fail "exit $LAST_RC"
	not_pwned
}

state_dir_checked() {
	# made by her in a shared directory: TALLY_STATE_DIR and --state-dir
	plant "$TMP/pub/st"
	expect_fail_with "cannot use the state directory '$TMP/pub/st': '$TMP/pub/st' belongs to uid $(id -u nobody), not to you, in the shared directory" \
		env TALLY_STATE_DIR="$TMP/pub/st" "$TALLY" job run -r res-st1 --profilers-path "$TMP/plugins" ex.ctl
	expect_fail_with "cannot use the state directory '$TMP/pub/st': '$TMP/pub/st' belongs to uid" \
		"$TALLY" job run -r res-st2 --state-dir "$TMP/pub/st" --profilers-path "$TMP/plugins" ex.ctl
	not_pwned
	# root's own state directory, reached through her link
	mkdir -m 700 rootstate
	as_nobody ln -s "$TMP/rootstate" pub/link
	expect_fail_with "cannot use the state directory '$TMP/pub/link': '$TMP/pub/link' belongs to uid $(id -u nobody), not to you, in the shared directory" \
		"$TALLY" job run -r res-st3 --state-dir "$TMP/pub/link" --profilers-path "$TMP/plugins" ex.ctl
	# root's, but writable by others; a plugin's directory of hers in root's
	mkdir -m 777 open
	expect_fail_with "cannot use the state directory '$TMP/open': '$TMP/open' is writable by others \(chmod go-w '$TMP/open'\)" \
		"$TALLY" job run -r res-st4 --state-dir "$TMP/open" --profilers-path "$TMP/plugins" ex.ctl
	mkdir -m 700 mine
	mkdir -m 755 mine/loadavg
	chown nobody mine/loadavg # hers, in root's own state
	expect_fail_with "cannot use the state directory '$TMP/mine/loadavg': '$TMP/mine/loadavg' belongs to uid $(id -u nobody), not to you" \
		"$TALLY" job run -r res-st5 --state-dir "$TMP/mine" --profilers-path "$TMP/plugins" ex.ctl
	not_pwned
	[[ ! -e $TMP/rootstate/loadavg ]] || fail "root's state was made through her link"
	# a link of root's own to a directory of root's is fine: the steps get the directory itself
	mkdir -m 700 realstate
	ln -s "$TMP/realstate" mylink
	job_ok ex.ctl -r res-st6 --state-dir "$TMP/mylink" --profilers-path "$TMP/plugins"
	[[ -s realstate/loadavg/setup.log ]] || fail "the state behind root's own link was not used"
}

results_shared() {
	as_nobody mkdir pub/results
	cd pub
	printf 'run sleeptest 0\n' >../r.ctl
	expect_fail_with "^tally: cannot make the results 'results/r': '$TMP/pub/results' belongs to uid $(id -u nobody), not to you, in the shared directory '$TMP/pub' \(give -r DIR in a directory of your own\)$" \
		"$TALLY" job run ../r.ctl
	[[ -z $(ls -A results) ]] || fail "root wrote into her directory: $(ls -A results)"
	# a directory of root's own in the shared one is fine
	job_ok ../r.ctl -r "$TMP/pub/mine-r"
	[[ $(stat -c %u "$TMP/pub/mine-r") == 0 && -s $TMP/pub/mine-r/status.json ]] || fail "no results of root's in the shared directory"
}

plugin_shared() {
	as_nobody mkdir -p pub/plugs/evil
	as_nobody sh -c 'printf "#!/bin/sh\nid -u >>%s/pwned\necho 1\n" "$1" >pub/plugs/evil/profiler; chmod 755 pub/plugs/evil/profiler' sh "$TMP/pub"
	printf 'profilers add evil\nrun sleeptest 0\n' >evil.ctl
	expect_fail_with "^tally: 'evil.ctl' line 1: profiler 'evil' at '$TMP/pub/plugs/evil/profiler' is not run: '$TMP/pub/plugs' belongs to uid $(id -u nobody), not to you, in the shared directory '$TMP/pub' \(a profiler must be out of other users' reach\)$" \
		"$TALLY" job run --profilers-path "$TMP/pub/plugs" evil.ctl
	((LAST_RC == 1)) || fail "exit $LAST_RC"
	"$TALLY" job profilers --profilers-path "$TMP/pub/plugs" >list.txt 2>&1 || fail "job profilers: $(cat list.txt)"
	grep -Eq '^evil +\? +unsafe ' list.txt || fail "job profilers lists her plugin as: $(cat list.txt)"
	not_pwned
	# a plugin anyone may rewrite
	mkdir -p wp/w
	printf '#!/bin/sh\necho 1\n' >wp/w/profiler
	chmod 777 wp/w/profiler
	printf 'profilers add w\nrun sleeptest 0\n' >w.ctl
	expect_fail_with "profiler 'w' at '$TMP/wp/w/profiler' is not run: '$TMP/wp/w/profiler' is writable by others" \
		"$TALLY" job run --profilers-path "$TMP/wp" w.ctl
}

subtest "HOME unset: root's state is its own, not a /tmp/.local made first" home_unset
subtest "no HOME and no home: one line, nothing in /tmp" no_home
subtest "XDG_STATE_HOME made first by another user in a shared directory" xdg_planted
subtest "TALLY_STATE_DIR and --state-dir checked: hers, her link, writable by others" state_dir_checked
subtest "results not made in another user's directory in a shared one" results_shared
subtest "a plugin another user put in a shared directory is not run" plugin_shared
