#!/bin/bash
# root writing its output into a directory where someone planted symbolic
# links at every name a temporary could have had (OUT.tmp.PID for the
# writer's pid and the next 200): export -o, report --html, scan -o,
# ctl drain -o and daemon --pid-file each write OUT and nothing else, the
# links' target is untouched; profiles are private (0600, databases 0700),
# a pid file 0644 under umask 022; an output of ours that was chmod'ed keeps
# its mode when it is written again. An export big enough to be written as
# it goes does the same past another user's files planted at those names.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

umask 022
echo "precious: not for tally to write" >victim
chmod 644 victim
vsum=$(md5sum <victim)

# mode PATH: its permission bits in octal
mode() { stat -c %a "$1"; }

# run_planted OUT CMD...: starts CMD as a process whose pid is known before it
# runs, plants links to the victim at OUT.tmp.P for that pid P and the next
# 200, then lets CMD run (it must exit 0); afterwards OUT is a regular file,
# the victim is as it was, and only the planted links are beside OUT.
run_planted() {
	local out=$1 pid p rc=0 n
	shift
	rm -f go && mkfifo go
	(
		read -r _ <go
		exec "$@" >cmd.out 2>cmd.err
	) &
	pid=$!
	for ((p = pid; p <= pid + 200; p++)); do
		if [[ ${PLANT:-link} == file ]]; then
			# another user's empty file: never opened, never renamed into place
			: >"$out.tmp.$p"
			chown 65534:65534 "$out.tmp.$p"
		else
			ln -s "$TMP/victim" "$out.tmp.$p"
		fi
	done
	echo go >go
	wait "$pid" || rc=$?
	((rc == 0)) || fail "'$*' exited $rc: $(head -c 2000 cmd.err)"
	[[ $(md5sum <victim) == "$vsum" && $(mode victim) == 644 ]] ||
		fail "'$*' wrote through a planted link: the victim now holds '$(head -c 200 victim)' (mode $(mode victim))"
	[[ -f $out && ! -L $out ]] || fail "'$*' did not write '$out' as a regular file"
	n=$(find "$(dirname "$out")" -maxdepth 1 -name "$(basename "$out").*" | wc -l)
	((n == 201)) || fail "'$*': $((n - 201)) files beside '$out' besides the planted links: $(find "$(dirname "$out")" -maxdepth 1 -name "$(basename "$out").*" ! -type l)"
	if [[ ${PLANT:-link} == file ]]; then
		local bad
		bad=$(find "$(dirname "$out")" -maxdepth 1 -name "$(basename "$out").tmp.*" \( ! -user 65534 -o -size +0 \))
		[[ -z $bad ]] || fail "'$*' wrote into another user's planted file: $(ls -l $bad | head -3)"
	fi
	rm -f "$out".tmp.*
}

tally_ok record -F 999 -g -o db -- "$WORKLOADS/split_funcs" 200
bad=$(find db \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 \))
[[ -z $bad ]] || fail "database files or directories not private (700/600): $(find db -printf '%m %p\n')"
note "the database: directories 700, files 600"

run_planted out.folded "$TALLY" export -i db --format folded -o out.folded
[[ $(mode out.folded) == 600 ]] || fail "export -o wrote mode $(mode out.folded), expected 600"
grep -q work_a out.folded || fail "out.folded has no work_a stack: $(head -c 300 out.folded)"
run_planted out.pb.gz "$TALLY" export -i db --format pprof -o out.pb.gz
[[ $(mode out.pb.gz) == 600 ]] || fail "export --format pprof wrote mode $(mode out.pb.gz), expected 600"
run_planted out.html "$TALLY" report -i db --html out.html
[[ $(mode out.html) == 600 ]] || fail "report --html wrote mode $(mode out.html), expected 600"
run_planted out.map "$TALLY" scan -o out.map "$WORKLOADS"
[[ $(mode out.map) == 600 ]] || fail "scan -o wrote mode $(mode out.map), expected 600"
grep -q split_funcs out.map || fail "the scan's map does not list split_funcs"
note "export, pprof, report --html and scan: written past 201 planted links each, mode 600"

# an export big enough to be written as it goes (over 1 MiB: a temporary of
# its own beside the output) past another user's files at the names it
# once took (OUT.tmp.PID): they stay theirs and empty, the output is root's
python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big.db 100000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
PLANT=file run_planted big.folded "$TALLY" export -i big.db --format folded -o big.folded
(($(stat -c %s big.folded) > 1048576)) || fail "big.folded is $(stat -c %s big.folded) bytes: not big enough to be written as it goes"
[[ $(stat -c '%u %a' big.folded) == "0 600" ]] || fail "big.folded is owner and mode '$(stat -c '%u %a' big.folded)', expected '0 600'"
note "a folded export of $(stat -c %s big.folded) bytes, written as it went, past 201 planted files of another user: root's own, mode 600"

# the user's own choice of mode stays
chmod 640 out.folded
run_planted out.folded "$TALLY" export -i db --format folded -o out.folded
[[ $(mode out.folded) == 640 ]] || fail "written again, out.folded has mode $(mode out.folded), expected the 640 it was given"
note "an output chmod'ed 640 keeps 640 when it is written again"

# the daemon: its pid file (written by the detached process, a later pid) and a drain
sanitizer_logs
run_planted out.pid "$TALLY" daemon --db ddb --pid-file "$TMP/out.pid" --flush-interval 100ms
DAEMON_PID=$(cat ddb/daemon.pid)
track_pid "$DAEMON_PID"
[[ $(cat out.pid) == "$DAEMON_PID" ]] || fail "--pid-file holds '$(cat out.pid)', the daemon is $DAEMON_PID"
[[ $(mode out.pid) == 644 ]] || fail "--pid-file was written with mode $(mode out.pid), expected 644 (umask 022)"
[[ $(mode ddb) == 700 ]] || fail "the daemon's directory has mode $(mode ddb), expected 700"
run_planted out.prof "$TALLY" ctl --db ddb drain -o out.prof
[[ $(mode out.prof) == 600 ]] || fail "ctl drain -o wrote mode $(mode out.prof), expected 600"
tally_ok report -i out.prof
stop_daemon "$DAEMON_PID"
bad=$(find ddb -mindepth 1 \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 \) ! -name 'daemon.log*')
[[ -z $bad ]] || fail "the daemon's database is not private: $(find ddb -printf '%m %p\n')"
note "daemon --pid-file (644) and ctl drain -o (600) past the planted links; the daemon's epochs 700/600"
