#!/bin/bash
# A perf map swapped after tally checked it. The owner of a JIT process (here
# uid 65534) lets tally (root) see a good /tmp/perf-PID.map, then points that
# name at a root-only file, or puts a FIFO there, and exits. tally copies the
# map it checked, read from the descriptor it opened then: the root-only file
# is in no database and no report, nothing blocks (record ends, the daemon
# keeps answering), and the record, the daemon's log and every report say the
# map was replaced. The same in `tally record` and in the daemon.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

((EUID == 0)) || skip "needs root, with the JIT process another user's (uid 65534)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to run as another user"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
rc=0
as_nobody "$WORKLOADS/jitwork" 1 /tmp badmode >/dev/null 2>&1 || rc=$?
((rc == 2)) || skip "uid 65534 cannot run '$WORKLOADS/jitwork' (a parent directory is private)"
# the symbolic link case leaks on a kernel that lets root follow another
# user's link in /tmp (fs.protected_symlinks=0); with 1 it could not leak anyway
note "fs.protected_symlinks=$(cat /proc/sys/fs/protected_symlinks 2>/dev/null || echo '?')"

token="tally_secret_$$_$RANDOM"
maps=()
cleanup_maps() { rm -f "${maps[@]}"; }
trap 'cleanup_maps; cleanup' EXIT

# secret_for OUT: a root-only file that would name jit_alpha's code $token
secret_for() {
	local alpha
	alpha=$(awk '$1 == "info" { print $3; exit }' "$1")
	[[ -n $alpha ]] || fail "the workload printed no 'info alpha ADDR': $(cat "$1")"
	printf '%x 9 %s\n' "$alpha" "$token" >secret
	chmod 600 secret
}

# no_secret DB: neither the database nor its reports hold the secret
no_secret() {
	local db=$1
	grep -rqa "$token" "$db" && fail "$db: the database holds the root-only file: $(grep -rla "$token" "$db")"
	report_text "$db.txt" -i "$db" --symbols
	grep -q "$token" "$db.txt" "$db.txt.err" && fail "$db: the report prints the root-only file: $(grep "$token" "$db.txt")"
	report_json "$db.json" -i "$db" --symbols
	(($(tjson "$db.json" func jit_alpha) > 0)) || fail "$db: jit_alpha, named by the map that was checked, has no samples: $(tjson "$db.json" funcs | tr '\n' ' ')"
	return 0
}

# --- tally record
for mode in swaplink swapfifo; do
	rm -f secret
	args=(400 /tmp "$mode")
	[[ $mode == swaplink ]] && args+=("$TMP/secret")
	"$TALLY" record -F 2000 -o "$mode.db" -- setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$WORKLOADS/jitwork" "${args[@]}" >"$mode.out" 2>"$mode.err" &
	rec=$!
	track_pid "$rec"
	wait_for_line "$mode.out" '^(ready|skip:)' 30
	grep -q '^skip:' "$mode.out" && skip "$(grep '^skip:' "$mode.out")"
	pid=$(workload_pid "$mode.out")
	map=/tmp/perf-$pid.map
	maps+=("$map")
	secret_for "$mode.out"
	# tally has checked the map when it holds it open; an older tally, which
	# checks by name and keeps nothing open, surely has after a few seconds
	for ((i = 0; i < 100; i++)); do
		ls -l "/proc/$rec/fd" 2>/dev/null | grep -F -- "-> $map" >/dev/null && break
		sleep 0.05
	done
	((i < 100)) && note "$mode: tally holds $map open" || note "$mode: tally holds no descriptor of $map"
	kill -USR1 "$pid"
	for ((i = 0; i < 600; i++)); do
		alive "$rec" || break
		sleep 0.05
	done
	if alive "$rec"; then
		kill -KILL "$rec"
		fail "$mode: tally record has not ended 30 s after the workload put ${mode#swap} in place of its perf map"
	fi
	rc=0
	wait "$rec" || rc=$?
	((rc == 0)) || fail "$mode: tally record exited $rc: $(head -c 1000 "$mode.err")"
	grep -q '^swapped$' "$mode.out" || fail "$mode: the workload did not swap its map: $(cat "$mode.out")"
	no_secret "$mode.db"
	kind=$([[ $mode == swaplink ]] && echo "a symbolic link" || echo "a FIFO")
	re="^tally: warning: perf map '$map' of pid $pid was replaced by $kind after tally opened it: the copy is of the file tally opened"
	grep -Eq "$re" "$mode.err" || fail "$mode: record does not say the map was replaced: $(cat "$mode.err")"
	grep -Eq "$re" "$mode.db.txt.err" || fail "$mode: the report does not say the map was replaced: $(cat "$mode.db.txt.err")"
	note "record, $mode: the map that was checked is copied, the replacement said"
done

# flushed_log TEXT: a flush of d.db's daemon (which must answer), and its log
# has TEXT
flushed_log() {
	"$TALLY" ctl --db d.db --timeout 20 flush >ctl.out 2>ctl.err || fail "the daemon stopped answering: $(cat ctl.err)"
	grep -qF -- "$1" d.db/daemon.log
}

# --- the daemon: the map is checked and copied by a flush, then swapped
start_daemon d.db --flush-interval 1h
for mode in swaplink swapfifo; do
	rm -f secret
	args=(400 /tmp "$mode")
	[[ $mode == swaplink ]] && args+=("$TMP/secret")
	as_nobody "$WORKLOADS/jitwork" "${args[@]}" >"d$mode.out" 2>&1 &
	wl=$!
	track_pid "$wl"
	wait_for_line "d$mode.out" '^ready$' 30
	pid=$(workload_pid "d$mode.out")
	map=/tmp/perf-$pid.map
	maps+=("$map")
	secret_for "d$mode.out"
	# flushed until the database has the copy: the daemon checked the map
	for ((i = 0; i < 60; i++)); do
		ctl --db d.db flush
		[[ -n $(find d.db -name "perf-$pid-*.map" 2>/dev/null) ]] && break
		sleep 0.25
	done
	((i < 60)) || fail "$mode: the daemon copied no map of pid $pid in 15 s of flushes"
	kill -USR1 "$pid"
	wait "$wl" || fail "$mode: the workload failed: $(cat "d$mode.out")"
	# the daemon sees the exit (and copies the map again), then flushes:
	# flushed until its log says so
	rc=0
	"$TALLY" ctl --db d.db --timeout 20 flush >ctl.out 2>ctl.err || rc=$?
	((rc == 0)) || fail "$mode: the daemon does not answer after pid $pid put ${mode#swap} in place of its map (ctl exited $rc: $(cat ctl.err))"
	kind=$([[ $mode == swaplink ]] && echo "a symbolic link" || echo "a FIFO")
	wait_state() { echo "the daemon's log: $(tail -5 d.db/daemon.log)"; }
	wait_for 30 "$mode: the daemon's log saying the map of pid $pid was replaced" \
		flushed_log "perf map '$map' of pid $pid was replaced by $kind after tally opened it"
	note "daemon, $mode: answers, the replacement logged"
done
stop_daemon "$DAEMON_PID"
no_secret d.db
note "daemon: the root-only file is in no epoch and no report"
