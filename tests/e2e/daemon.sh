# Helpers for the daemon's end-to-end tests (t05xx), sourced after lib.sh.
#
# The daemon samples the whole machine, and other tests run at the same time:
# a test's workloads run as uniquely named copies (uniq_copy), and its checks
# look at those images only.

# uniq_copy NAME: copies the workload NAME to ./NAME_<test pid> and prints that path.
uniq_copy() {
	local dst="$TMP/${1}_$$"
	cp "$WORKLOADS/$1" "$dst"
	echo "$dst"
}

# start_daemon DB ARGS...: starts `tally daemon --db DB ARGS...` (detached),
# waits until it answers, and sets DAEMON_PID.  Its stderr goes to $TMP/daemon.err.
DAEMON_PID=
start_daemon() {
	local db=$1 rc=0
	shift
	sanitizer_logs
	# a detached daemon's stderr is /dev/null: under the sanitizers (make
	# check-asan) their reports go to files that sanitizer_logs checks
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$TMP/sanitizer" \
		UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$TMP/sanitizer" \
		"$TALLY" daemon --db "$db" "$@" >"$TMP/daemon.out" 2>"$TMP/daemon.err" || rc=$?
	((rc == 0)) || fail "'tally daemon --db $db $*' exited $rc: $(head -c 2000 "$TMP/daemon.err")"
	[[ -s $db/daemon.pid ]] || fail "the daemon wrote no pid file '$db/daemon.pid'"
	DAEMON_PID=$(cat "$db/daemon.pid")
	track_pid "$DAEMON_PID"
	alive "$DAEMON_PID" || fail "the daemon (pid $DAEMON_PID) is not running after it said it started; log: $(tail -5 "$db/daemon.log" 2>/dev/null)"
}

# ctl ARGS...: `tally ctl ARGS...`, which must succeed; stdout to $TMP/ctl.out.
ctl() {
	local rc=0
	"$TALLY" ctl "$@" >"$TMP/ctl.out" 2>"$TMP/ctl.err" || rc=$?
	((rc == 0)) || fail "'tally ctl $*' exited $rc: $(head -c 2000 "$TMP/ctl.err")"
	return 0
}

# status_val KEY: the value of `KEY: value` in the last `ctl ... status` output.
status_val() {
	awk -v k="$1:" '$1 == k { sub(/^[^:]*:[ \t]*/, ""); print; exit }' "$TMP/ctl.out"
}

# stop_daemon PID: SIGTERM, then wait (up to 60 s) for it to exit.
stop_daemon() {
	local i
	kill -TERM "$1" 2>/dev/null || true
	# its last flush, then the removal of the epoch's spare copy: with
	# --per-pid hundreds of files, each costing milliseconds on a busy ext4
	# (5.2 s at a load of 8; over 20 s under ASan at 10)
	for ((i = 0; i < 1200; i++)); do
		if ! alive "$1"; then
			sanitizer_logs
			return 0
		fi
		sleep 0.05
	done
	fail "the daemon (pid $1) did not exit within 60 s of SIGTERM (load: $(cut -d' ' -f1-3 /proc/loadavg))"
}

# sanitizer_logs: fails when a detached daemon wrote a sanitizer report.
sanitizer_logs() {
	local f
	for f in "$TMP"/sanitizer.*; do
		[[ -e $f ]] || continue
		fail "the daemon's sanitizer report ($f): $(head -c 3000 "$f")"
	done
}

# db_total DB [ARGS...]: total samples of `tally report -i DB ARGS...` (must succeed).
db_total() {
	local db=$1
	shift
	report_json "$TMP/total.json" -i "$db" "$@"
	tjson "$TMP/total.json" total
}

# start_load: keeps both CPUs busy until the test ends: one burning process per
# CPU and a loop that starts short-lived processes (new mappings, forks, exits),
# all at the lowest priority so that the test itself and the daemon still run.
start_load() {
	local burn i
	burn=$(uniq_copy sleeper)
	for ((i = 0; i < $(nproc); i++)); do
		nice -n 19 "$burn" 0 burn >/dev/null 2>&1 &
		track_pid $!
	done
	local churn
	churn=$(uniq_copy split_funcs)
	(while :; do nice -n 19 "$churn" 20 >/dev/null; done) &
	track_pid $!
}
