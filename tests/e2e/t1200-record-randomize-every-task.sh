#!/bin/bash
# the randomized period reaches every task of a command: every sample of a
# program started by a shell-script wrapper (as pyenv's python3 shim is) and of
# its threads is taken by an event whose period tally redraws (session
# randomized-samples REACHED/TOTAL, randomized-scope says how), and the timer's
# real intervals spread over the draw; where tally cannot reach later tasks (-p
# on a process that starts a child later) the report header says for what share
# of the samples the period was randomized instead of just "randomized"; so
# does a command recorded by a user who cannot make a cgroup (the fallback).
. "$SRCDIR/tests/e2e/lib.sh"

cat >wrap.sh <<'SH'
#!/bin/sh
# runs the program as a child, as a wrapper script does
"$@"
exit $?
SH
chmod +x wrap.sh

wrapper_and_threads() {
	awk '{ for (i = 1; i < NF; i++) if ($i == "-" && $(i + 1) == "cgroup2") f = 1 } END { exit !f }' /proc/self/mountinfo ||
		skip "no cgroup v2 file system is mounted: tally falls back to inherited events (the unprivileged-fallback case)"
	((EUID == 0)) || skip "making the command's cgroup needs root here"
	tally_ok record -o w.db -- ./wrap.sh "$WORKLOADS/threads" 2 1500
	scope=$(session_key w.db randomized-scope)
	rs=$(session_key w.db randomized-samples)
	[[ $scope == "every task of the command"* ]] || fail "randomized-scope is '$scope', expected 'every task of the command ...'"
	[[ $rs =~ ^([0-9]+)/([0-9]+)$ ]] || fail "randomized-samples is '$rs', expected REACHED/TOTAL"
	reached=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
	((total > 1000 && reached == total)) ||
		fail "randomized-samples $rs: expected every sample of the wrapper's child's threads taken with a redrawn period"
	# what the timer really did: the intervals between back-to-back samples spread
	# over the draw (a fixed period per thread keeps them within a few percent)
	iv=$(session_key w.db interval-p10-p50-p90)
	[[ $iv =~ ^([0-9]+)/([0-9]+)/([0-9]+)$ ]] || fail "interval-p10-p50-p90 is '$iv'"
	spread=$(awk -v a=${BASH_REMATCH[1]} -v b=${BASH_REMATCH[3]} -v m=${BASH_REMATCH[2]} 'BEGIN { printf "%.1f", 100 * (b - a) / m }')
	fcmp "$spread" ">" 10 || fail "intervals $iv spread only ${spread}% of the median, expected over 10% (+-12.5% draws)"
	report_text w.txt -i w.db
	grep -q '^# event: cpu-clock, frequency 999 (randomized)$' w.txt || fail "report header: $(sed -n 2p w.txt)"
	# and the numbers stay right
	report_json w.json -i w.db --symbols
	check_split func w.json "$TMP/out" thread_fn_0 thread_fn_1
	note "scope '$scope', samples $rs, intervals $iv (spread ${spread}%)"
}

attached_child_said() {
	# -p cannot move a running process into a cgroup: a child started later keeps
	# one period, and the header says how many samples the randomization reached
	# (the child starts once tally says it records)
	sh -c 'until [ -e go ]; do sleep 0.02; done; "$1" 2 1200; :' sh "$WORKLOADS/threads" >child.out &
	pid=$!
	track_pid $pid
	"$TALLY" record -v -p $pid -o p.db >rec.out 2>rec.err &
	rp=$!
	track_pid $rp
	wait_for_line rec.err "^tally: recording into 'p.db'" 30
	touch go
	wait $rp || fail "record -p $pid exited $?: $(cat rec.err)"
	wait $pid || true
	scope=$(session_key p.db randomized-scope)
	rs=$(session_key p.db randomized-samples)
	[[ $scope == "the original tasks only"* ]] || fail "randomized-scope is '$scope', expected 'the original tasks only ...'"
	[[ $rs =~ ^([0-9]+)/([0-9]+)$ ]] || fail "randomized-samples is '$rs', expected REACHED/TOTAL"
	reached=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
	((total > 1000 && reached * 10 < total)) || fail "randomized-samples $rs: expected the child's threads (nearly all samples) not reached"
	report_text p.txt -i p.db
	pct=$(awk -v r=$reached -v t=$total 'BEGIN { printf "%.2f", 100 * r / t }')
	grep -q "(randomized for $pct% of the samples; the threads and children started later kept one period each)" p.txt ||
		fail "report header does not say what was randomized: $(sed -n 2p p.txt)"
	note "scope '$scope', samples $rs: $(sed -n 2p p.txt)"
}

unprivileged_fallback() {
	# without the right to make a cgroup (user nobody), a command is sampled by
	# inherited events as before, and the session and header say what that reached
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
	as_nobody=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
	chmod 711 "$TMP"
	mkdir -m 1777 pub
	cp wrap.sh pub/
	chmod 755 pub/wrap.sh
	rc=0
	(cd pub && "${as_nobody[@]}" "$TALLY" record -o n.db -- ./wrap.sh "$WORKLOADS/threads" 2 800 >n.out 2>n.err) || rc=$?
	((rc != 126 && rc != 127)) || skip "user nobody cannot run $TALLY (exit $rc)"
	((rc == 0)) || skip "user nobody cannot record here (exit $rc: $(head -c 300 pub/n.err))"
	scope=$(session_key pub/n.db randomized-scope)
	rs=$(session_key pub/n.db randomized-samples)
	[[ $scope == "the original tasks only"* ]] || fail "as nobody: randomized-scope is '$scope', expected 'the original tasks only ...'"
	[[ $rs =~ ^([0-9]+)/([0-9]+)$ ]] || fail "randomized-samples is '$rs'"
	reached=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
	((total > 500 && reached * 10 < total)) || fail "as nobody: randomized-samples $rs, expected the child's threads not reached"
	report_text n.txt -i pub/n.db
	grep -q "(randomized for [0-9.]*% of the samples; the threads and children started later kept one period each)" n.txt ||
		fail "as nobody: the header does not say what was randomized: $(sed -n 2p n.txt)"
	note "as nobody: scope '$scope', samples $rs"
}

killed_leaves_no_cgroup() {
	# a tally killed with SIGKILL cannot remove the command's cgroup: the next
	# recording does, once that tally is gone
	mnt=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-" && $(i + 1) == "cgroup2" && $4 == "/") print $5 }' /proc/self/mountinfo | head -1)
	[[ -n $mnt ]] || skip "no cgroup v2 file system is mounted"
	((EUID == 0)) || skip "making the command's cgroup needs root here"
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	dir=$mnt${own%/}
	"$TALLY" record -o k.db -- sleep 30 >/dev/null 2>&1 &
	tp=$!
	track_pid $tp
	for ((i = 0; i < 100; i++)); do
		compgen -G "$dir/tally-$tp-*" >/dev/null && break
		sleep 0.05
	done
	cg=$(compgen -G "$dir/tally-$tp-*" | head -1)
	[[ -n $cg ]] || fail "no cgroup $dir/tally-$tp-* while tally $tp records"
	kill -KILL $tp
	wait $tp 2>/dev/null || true
	for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
	for ((i = 0; i < 100; i++)); do
		[[ -s $cg/cgroup.procs ]] || break
		sleep 0.05
	done
	[[ -d $cg ]] || fail "$cg is gone already (expected it left behind by the killed tally)"
	tally_ok record -o k2.db -- true
	[[ ! -d $cg ]] || fail "the next recording did not remove the killed tally's empty cgroup $cg"
	note "the killed tally's $cg was removed by the next recording"
}

subtest wrapper-and-threads wrapper_and_threads
subtest attached-child-said attached_child_said
subtest unprivileged-fallback unprivileged_fallback
subtest killed-leaves-no-cgroup killed_leaves_no_cgroup
