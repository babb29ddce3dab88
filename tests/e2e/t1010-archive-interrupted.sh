#!/bin/bash
# An interrupted archive leaves nothing behind. 'tally archive' ended by
# SIGINT, SIGTERM, SIGHUP or SIGPIPE while it writes (the signal sent by
# strace as it reaches its last syncfs or fsync: every member written, no
# timing) leaves no staging copy (.OUT.tmp-*) nor stripped copies
# (.OUT.strip-*); killed with SIGKILL it leaves them, and the next 'tally
# archive -o OUT' removes them. 'report -i X.tar.gz' ended by a signal while
# it unpacks, or by SIGPIPE on a closed pipe, leaves nothing in TMPDIR;
# killed with SIGKILL it leaves its tally-archive.* directory, which the next
# report removes. Only what provably is ours and abandoned goes: a local
# user's (uid 65534) directory or link named like ours, one of ours that a
# live process holds locked or that names a live process, and ours in a
# directory other users may rename things into, all stay, and nothing is
# removed through a link.
. "$SRCDIR/tests/e2e/lib.sh"

need_tool strace strace
tally_ok record -g -F 1000 -o db -- "$WORKLOADS/split_funcs" 200
tally_ok archive -i db -x -o good.tar.gz

# signalled SIG SYSCALL CMD...: CMD ends by SIG, sent when it enters SYSCALL
# (the N-th time, SYSCALL:when=N); its exit status must say so
signalled() {
	local sig=$1 sc=$2 rc=0
	shift 2
	# every signal at its default first: a suite started under nohup (or by a
	# CI runner that ignores SIGHUP) would pass SIGHUP on ignored, and tally
	# keeps a signal ignored that it was started with, as nohup asks
	env --default-signal strace -f -o /dev/null -e trace="${sc%%:*}" -e inject="$sc:signal=SIG$sig" "$@" >sig.out 2>sig.err || rc=$?
	((rc == 128 + $(kill -l "$sig"))) || fail "$* was not ended by SIG$sig (exit $rc): $(tail -3 sig.err)"
}

# a pid no process has now
dead_pid() {
	true &
	local p=$!
	wait "$p"
	echo "$p"
}

archive_signal() { # archive_signal SIG FORM
	local out=o-$1$2 sc=syncfs args=()
	[[ $2 == .tar* ]] && sc=fsync && args=(--strip-debug-to-sampled)
	mkdir "w$1$2"
	signalled "$1" "$sc" "$TALLY" archive -i db "${args[@]}" -o "w$1$2/$out"
	[[ -z $(ls -A "w$1$2") ]] || fail "SIG$1 left $(ls -A "w$1$2")"
	note "SIG$1 while '$out' was written: nothing left"
}
for s in INT TERM HUP PIPE; do
	subtest "tally archive -o DIR ended by SIG$s" archive_signal "$s" ""
done
subtest "tally archive -o X.tar.zst --strip-debug-to-sampled ended by SIGTERM" archive_signal TERM .tar.zst

archive_kill9() {
	mkdir w9
	signalled KILL fsync "$TALLY" archive -i db --strip-debug-to-sampled -o w9/k.tar.zst
	local left
	left=$(ls -A w9 | tr '\n' ' ')
	[[ $left == *.k.tar.zst.tmp-* && $left == *.k.tar.zst.strip-* ]] || fail "test setup: SIGKILL left '$left'"
	tally_ok archive -i db -x -o w9/k.tar.zst
	[[ $(ls -A w9) == k.tar.zst ]] || fail "the next archive did not remove what the killed one left: $(ls -A w9)"
	note "killed with SIGKILL it left $left; the next 'archive -o' removed it"
}
subtest "tally archive killed with SIGKILL: the next one tidies up" archive_kill9

report_signal() { # report_signal SIG
	mkdir "t$1"
	TMPDIR=$TMP/t$1 signalled "$1" ftruncate:when=3 "$TALLY" report -i good.tar.gz
	[[ -z $(ls -A "t$1") ]] || fail "SIG$1 left $(ls -A "t$1") in TMPDIR"
	note "SIG$1 while the tarball was unpacked: nothing left in TMPDIR"
}
for s in INT TERM HUP; do
	subtest "report -i X.tar.gz ended by SIG$s while it unpacks" report_signal "$s"
done

report_pipe() {
	mkdir tp
	# stdout a pipe whose reader is gone: the first line written raises SIGPIPE
	TMPDIR=$TMP/tp python3 - "$TALLY" <<'PY' || fail "the report did not end by SIGPIPE"
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run([sys.argv[1], "report", "-i", "good.tar.gz"], stdout=w, stderr=subprocess.DEVNULL)
sys.exit(0 if p.returncode == -13 else 1)
PY
	[[ -z $(ls -A tp) ]] || fail "SIGPIPE left $(ls -A tp) in TMPDIR"
}
subtest "report -i X.tar.gz | a reader that is gone (SIGPIPE)" report_pipe

report_kill9() {
	mkdir t9
	TMPDIR=$TMP/t9 signalled KILL ftruncate:when=3 "$TALLY" report -i good.tar.gz
	local left
	left=$(ls -A t9)
	[[ $left == tally-archive.* ]] || fail "test setup: SIGKILL left '$left'"
	TMPDIR=$TMP/t9 tally_ok report -i good.tar.gz
	[[ -z $(ls -A t9) ]] || fail "the next report did not remove what the killed one left: $(ls -A t9)"
	note "killed with SIGKILL it left $left; the next report removed it"
}
subtest "report -i killed with SIGKILL: the next one tidies up" report_kill9

# what is named like ours but not provably ours and abandoned stays
not_ours() {
	((EUID == 0)) || skip "another user's files need root (to run as uid 65534)"
	command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to run as another user"
	local dp
	dp=$(dead_pid)
	chmod 711 "$TMP"
	mkdir -m 1777 pub   # a /tmp of our own: sticky, everyone's
	mkdir -m 700 vault  # root's, with a file a link will point at
	echo keep >vault/file
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	as_nobody mkdir "pub/tally-archive.$dp-hersAA"
	as_nobody sh -c "echo hers >pub/tally-archive.$dp-hersAA/f"
	as_nobody ln -s "$TMP/vault" "pub/tally-archive.$dp-linkAA"
	# root's own: one held by a live process (flock), one naming a live
	# process, and the one that is abandoned
	mkdir -m 700 "pub/tally-archive.$dp-lockAA" "pub/tally-archive.$$-liveAA" "pub/tally-archive.$dp-deadAA"
	touch "pub/tally-archive.$dp-deadAA/f"
	# one process holds the lock (and no pipe of the test's)
	python3 -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(600)' "pub/tally-archive.$dp-lockAA" "$TMP/locked" </dev/null >/dev/null 2>&1 &
	track_pid $!
	local i
	for i in $(seq 200); do [[ -e locked ]] && break; sleep 0.05; done
	[[ -e locked ]] || fail "test setup: flock never took the lock"
	TMPDIR=$TMP/pub tally_ok report -i good.tar.gz
	local left
	left=$(ls -A pub | sort | tr '\n' ' ')
	local want
	want=$(printf '%s\n' "tally-archive.$$-liveAA" "tally-archive.$dp-hersAA" "tally-archive.$dp-linkAA" \
		"tally-archive.$dp-lockAA" | sort | tr '\n' ' ')
	[[ $left == "$want" ]] || fail "in TMPDIR after the report: '$left', not '$want'"
	[[ -f pub/tally-archive.$dp-hersAA/f && -L pub/tally-archive.$dp-linkAA && $(cat vault/file) == keep ]] ||
		fail "something not ours was touched"
	note "kept: hers, a link, one locked by a live process, one naming a live process; removed: the abandoned one"
	# a directory others may rename things into (no sticky bit): nothing there is provably ours
	mkdir -m 777 open
	mkdir -m 700 "open/tally-archive.$dp-deadBB" "open/.k.tar.tmp-$dp-deadBB"
	TMPDIR=$TMP/open tally_ok report -i good.tar.gz
	tally_ok archive -i db -x -o open/k.tar
	[[ -d open/tally-archive.$dp-deadBB && -d open/.k.tar.tmp-$dp-deadBB ]] ||
		fail "what lay in a directory without the sticky bit that others may write was removed: $(ls -A open)"
	# the writer's staging names: hers stays, our abandoned one goes
	mkdir w
	chmod 1777 w
	as_nobody mkdir "w/.o.tmp-$dp-hersCC"
	mkdir -m 700 "w/.o.tmp-$dp-deadCC"
	tally_ok archive -i db -x -o w/o
	left=$(ls -A w | sort | tr '\n' ' ')
	[[ $left == ".o.tmp-$dp-hersCC o " ]] || fail "beside the archive: '$left'"
	note "the writer too: hers kept, ours abandoned removed"
}
subtest "what is not provably ours and abandoned is left alone" not_ours
