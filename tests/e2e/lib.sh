# Shared helpers for tally's end-to-end tests (tests/e2e/tNNNN-<cmd>-<what>.sh).
#
# A test sources this file, which puts it in a fresh temporary directory
# ($TMP, removed on exit, background processes killed) under `set -euo
# pipefail`.  Exit codes follow meson: 0 pass, 1 fail, 77 skip; the reason is
# printed on stdout.  A file with several cases runs each as a subtest (see
# `subtest` below) with its own pass, fail or skip.  tests/README.md has the
# number families, the helpers and the prerequisites.
#
# The environment gives TALLY (the binary under test), WORKLOADS (the built
# tests/workloads) and SRCDIR (the source tree).  Workloads print their
# measured split as `truth NAME PERCENT`; tests compare tally's numbers with it.

set -euo pipefail

: "${TALLY:?TALLY must name the tally binary}"
: "${WORKLOADS:?WORKLOADS must name the built tests/workloads directory}"
: "${SRCDIR:?SRCDIR must name the source tree}"
# absolute, so that they still hold in $TMP (by hand: SRCDIR=. and so on),
# and exported, for the Python helpers (shares.py through SRCDIR)
SRCDIR=$(cd "$SRCDIR" && pwd)
WORKLOADS=$(cd "$WORKLOADS" && pwd)
[[ $TALLY != */* || $TALLY == /* ]] || TALLY=$PWD/$TALLY
export TALLY WORKLOADS SRCDIR

TEST_NAME=$(basename "$0" .sh)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tally-$TEST_NAME.XXXXXX")
# record's build-id cache (docs/symbols.md) is the test's own: a test never
# fills the user's ~/.cache, nor names a rebuilt program from what another
# test left there
export XDG_CACHE_HOME="$TMP/.cache"
BG_PIDS=()

EXIT_HOOKS=()

# at_exit CMD: run the shell command CMD when the test (inside a subtest:
# that subtest) exits, before its background processes are killed and $TMP
# is removed (e.g. an umount).
at_exit() {
	EXIT_HOOKS+=("$1")
}

cleanup() {
	local rc=$? pid hook
	# the figures of the load the test ran under (scripts/check.sh prints a
	# failed test's); on stderr, so that stdout still ends with a skip's reason
	echo "load: $TEST_NAME: $(load_since start 2>/dev/null)" >&2
	for hook in "${EXIT_HOOKS[@]}"; do
		eval "$hook" || true
	done
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	kill_strays
	cd /
	rm -rf "$TMP"
	if ((SUBTEST_N > 0)); then
		subtest_summary "$rc" || rc=$?
		exit "$rc"
	fi
}
# kill_strays: kills what the test started and did not stop, though it was
# never tracked (a daemon whose start was cut short, a process started in a
# subshell): each process whose environment has the test's XDG_CACHE_HOME (set
# above, so every program the test ran inherits it, detached or not). Each
# one is named on stderr: a test that leaves a process behind says so.
kill_strays() {
	local f pid kv mark="XDG_CACHE_HOME=$TMP/.cache" strays=()
	for f in /proc/[0-9]*/environ; do
		pid=${f#/proc/}
		pid=${pid%/environ}
		((pid != $$ && pid != BASHPID)) || continue
		# bash's read: no program started here carries the mark itself
		while IFS= read -r -d '' kv; do
			if [[ $kv == "$mark" ]]; then
				strays+=("$pid")
				break
			fi
		done 2>/dev/null <"$f" || true
	done
	((${#strays[@]})) || return 0
	for pid in "${strays[@]}"; do
		echo "cleanup: $TEST_NAME left pid $pid running ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | head -c 200)): killed" >&2
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT
# killed (a meson timeout, ^C): still clean up
trap 'exit 143' TERM
trap 'exit 130' INT
cd "$TMP"

# The load a test runs under, measured: a test whose claim a busy machine can
# break (a rate, a delay, a total within a bound) says what it got, and every
# test ends with a `load:` line (scripts/check.sh prints a failed test's).
NCPU=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)

# load_mark NAME: remember the machine's CPU counters (/proc/stat), the CPU
# time of this shell and of the processes it has waited for, and the clock,
# as NAME.
load_mark() {
	_load_now "$BASHPID" >"$TMP/.load.$1"
}
_load_now() {
	{
		echo "$1"
		awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9; exit }' /proc/stat
		# utime stime cutime cstime, in clock ticks
		sed -E 's/^.*\) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }'
		echo "${EPOCHREALTIME:-0}"
	} | paste -sd' '
}

# load_since NAME: one line of what the machine did since load_mark NAME: its
# CPUs' busy share and steal (the hypervisor's: time this machine's CPUs were
# runnable and not given), the CPUs used by the shell that made the mark and
# the processes it has waited for since, the load average.
load_since() {
	local then
	then=$(cat "$TMP/.load.$1" 2>/dev/null) || { echo "(no mark '$1')"; return 0; }
	awk -v a="$then" -v b="$(_load_now "${then%% *}")" -v n="$NCPU" -v hz="$(getconf CLK_TCK)" \
		-v la="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		busy = y[2] - x[2]; all = y[3] - x[3]; steal = y[4] - x[4]; wall = y[6] - x[6]
		printf "%.1f s: the machine'"'"'s %d CPUs %.0f%% busy, %.1f%% stolen; the test'"'"'s processes used %.2f CPUs; load average %s\n",
			wall, n, (all > 0 ? 100 * busy / all : 0), (all > 0 ? 100 * steal / all : 0),
			(wall > 0 ? (y[5] - x[5]) / hz / wall : 0), la }'
}

# cpu_share PID: the share (percent) of its runnable time that PID got a CPU
# (/proc/PID/schedstat: time on a CPU against time waiting on a run queue);
# 100 on an idle machine, what a busy one leaves it otherwise.
cpu_share() {
	awk '{ printf "%.0f\n", (($1 + $2) > 0 ? 100 * $1 / ($1 + $2) : 100) }' "/proc/$1/schedstat" 2>/dev/null || echo 100
}

# proc_cpu_ms PID: the CPU time (user and system) PID has used so far, in ms
# (to the clock tick).
proc_cpu_ms() {
	sed -E 's/^.*\) //' "/proc/$1/stat" 2>/dev/null |
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%d\n", ($12 + $13) * 1000 / hz }'
}

# retry_busy WHAT FUNC [ARGS...]: FUNC ARGS holds a claim that a busy machine
# can break; when it fails, the load it ran under (load_since) is printed and
# it runs once more, in the same directory; failing again fails with what
# each try said and the load of each.  A skip in FUNC skips.  FUNC runs in a
# subshell: what it sets does not outlive it.  Where FUNC finds that what it
# needs did not happen because the machine was too busy (a program that did
# not get the CPU to end inside a recording), it says so with `busy MSG`:
# twice busy, the test skips (the last resort) with both tries' figures.
retry_busy() {
	local what=$1 try rc why=
	shift
	local err
	err=$(trap -p ERR)
	for try in 1 2; do
		load_mark retry
		: >"$TMP/.retry.why"
		# (the subtest's ERR trap would take the subshell's failure for its own)
		trap - ERR
		set +e
		(
			set -e
			RETRY_TRY=$try
			WHY_FILE=$TMP/.retry.why
			SUBTEST_LEVEL=$BASH_SUBSHELL
			eval "$err"
			"$@"
		)
		rc=$?
		set -e
		eval "$err"
		((rc != 0)) || return 0
		((rc != 77)) || skip "$(head -c 400 "$TMP/.retry.why")"
		why+="${why:+; }try $try: $(head -c 500 "$TMP/.retry.why" | tr '\n' ' ' | sed 's/ *$//') [load: $(load_since retry)]"
		echo "ok: $what: try $try of 2 failed under load: $(load_since retry)"
	done
	((rc != 75)) || skip "$what: the machine was too busy, twice: $why"
	fail "$what, twice: $why"
}

# busy MSG...: inside retry_busy's FUNC, what FUNC needed did not happen
# because the machine was too busy (MSG says what, with the figure): FUNC
# ends (exit 75), and is tried again; twice busy, the test skips.
busy() {
	echo "busy (try ${RETRY_TRY:-?} of 2): $TEST_NAME${SUBTEST_NAME:+: $SUBTEST_NAME}: $*" >&2
	printf '%s\n' "$*" >>"$WHY_FILE"
	exit 75
}

# wait_for SECONDS WHAT CMD...: wait until CMD succeeds (tried every 50 ms),
# at most SECONDS; past the bound fail, naming WHAT and the state: the output
# of the test's function wait_state when it has one, else CMD's last output.
wait_for() {
	local secs=$1 what=$2 end st
	shift 2
	end=$((${EPOCHREALTIME/./} + $(awk -v s="$secs" 'BEGIN { printf "%d", s * 1e6 }')))
	while :; do
		"$@" >"$TMP/.wait.out" 2>&1 && return 0
		((${EPOCHREALTIME/./} < end)) || break
		sleep 0.05
	done
	if declare -F wait_state >/dev/null; then
		st=$(wait_state 2>&1 | head -c 1500)
	else
		st=$(head -c 1500 "$TMP/.wait.out")
	fi
	fail "$what: not within $secs s ($(load_since start)); state: ${st:-(nothing)}"
}

# fail MSG...: report a failure and exit 1 (inside a subtest: that subtest
# fails, and the next one runs).  On stderr, so a failure inside $(...) is
# still seen.
fail() {
	if [[ -n $RETRY_TRY ]]; then
		echo "failed (try $RETRY_TRY of 2): $TEST_NAME${SUBTEST_NAME:+: $SUBTEST_NAME}: $*" >&2
	else
		echo "FAIL: $TEST_NAME${SUBTEST_NAME:+: $SUBTEST_NAME}: $*" >&2
	fi
	[[ -z $SUBTEST_NAME && -z $RETRY_TRY ]] || printf '%s\n' "$*" >>"$WHY_FILE"
	exit 1
}
WHY_FILE=$TMP/.subtest.why
RETRY_TRY=

# skip REASON...: report why the test (inside a subtest: that subtest)
# cannot run here and exit 77.
skip() {
	echo "SKIP: ${SUBTEST_NAME:+$SUBTEST_NAME: }$*"
	[[ -z $SUBTEST_NAME && -z $RETRY_TRY ]] || printf '%s\n' "$*" >>"$WHY_FILE"
	exit 77
}

# pass [MSG...]: end the running subtest here, passed.
pass() {
	[[ -n $SUBTEST_NAME ]] || fail "'pass' outside a subtest"
	(($# == 0)) || note "$*"
	exit 0
}

# subtest NAME FUNC [ARGS...]: one case of the file with its own result, as
# perf's tests/shell do.  FUNC ARGS runs in a subshell under `set -e`: the
# case passes when it returns 0 (or calls `pass`), fails on `fail MSG` or on
# any command that fails, and is skipped on `skip REASON` (need_tool and the
# like skip only it); the next subtest runs whatever the result.  Files it
# writes stay in $TMP for later cases, shell variables it sets do not (set
# what the cases share before them, at the top level), and its background
# processes (track_pid) and at_exit hooks end with it.
# At exit the file prints a summary and exits 1 if any subtest (or the top
# level) failed, 77 only if every subtest skipped, else 0.  A skipped subtest
# is named on a `SKIP N - NAME: REASON` line and again in the summary
# (`SKIPPED subtest: NAME: REASON`), so a skip never hides what passed.
SUBTEST_NAME=
SUBTEST_N=0
SUBTEST_PASSED=0
SUBTEST_FAILED=()
SUBTEST_SKIPPED=()
SUBTEST_WHY=()
subtest() {
	local name=$1 rc why
	shift
	[[ -z $SUBTEST_NAME ]] || fail "subtest '$name' started inside subtest '$SUBTEST_NAME'"
	(($# > 0)) || fail "subtest '$name': no function to run"
	SUBTEST_N=$((SUBTEST_N + 1))
	echo "--- subtest $SUBTEST_N: $name"
	: >"$TMP/.subtest.why"
	load_mark subtest
	set +e
	(
		set -e
		SUBTEST_NAME=$name
		SUBTEST_LEVEL=$BASH_SUBSHELL
		BG_PIDS=()
		EXIT_HOOKS=()
		trap subtest_end EXIT
		trap 'exit 143' TERM
		trap 'exit 130' INT
		set -E
		trap 'subtest_err "$BASH_COMMAND" "$LINENO" "$?"' ERR
		"$@"
	)
	rc=$?
	set -e
	why=$(head -c 600 "$TMP/.subtest.why" | tr '\n' ' ' | sed 's/ *$//')
	case $rc in
	0)
		SUBTEST_PASSED=$((SUBTEST_PASSED + 1))
		echo "ok $SUBTEST_N - $name"
		;;
	77)
		SUBTEST_SKIPPED+=("$name: ${why:-no reason given}")
		SUBTEST_WHY+=("${why:-no reason given}")
		echo "SKIP $SUBTEST_N - $name: ${why:-no reason given}"
		;;
	*)
		SUBTEST_FAILED+=("$name: ${why:-exited $rc (see the output above)}")
		echo "not ok $SUBTEST_N - $name: ${why:-exited $rc (see the output above)}"
		echo "load: subtest $SUBTEST_N: $(load_since subtest)"
		;;
	esac
	return 0
}

# (the ERR trap of a subtest's subshell) what failed, unless fail said so;
# not for a command inside $(...), whose failure may not end the subtest
SUBTEST_LEVEL=0
subtest_err() {
	((BASH_SUBSHELL == SUBTEST_LEVEL)) || return 0
	[[ -s $WHY_FILE ]] ||
		printf "'%s' exited %s (line %s)\n" "$1" "$3" "$2" >>"$WHY_FILE"
	echo "FAIL: $TEST_NAME: $SUBTEST_NAME: '$1' exited $3 (line $2)" >&2
}

# (the EXIT trap of a subtest's subshell) its hooks and background processes
subtest_end() {
	local pid hook
	for hook in "${EXIT_HOOKS[@]}"; do
		eval "$hook" || true
	done
	for pid in "${BG_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}

# subtest_summary RC: the closing lines of a file with subtests, given the
# top level's exit status RC; returns the file's exit status.
subtest_summary() {
	local rc=$1 s
	if ((rc == 77)); then
		SUBTEST_SKIPPED+=("(the rest of the file): skipped at the top level")
		SUBTEST_WHY+=("skipped at the top level")
	elif ((rc != 0)); then
		SUBTEST_FAILED+=("(the top level): exited $rc")
	fi
	echo "=== $TEST_NAME: $SUBTEST_PASSED passed, ${#SUBTEST_FAILED[@]} failed, ${#SUBTEST_SKIPPED[@]} skipped"
	for s in "${SUBTEST_FAILED[@]}"; do
		echo "FAILED subtest: $s"
	done
	for s in "${SUBTEST_SKIPPED[@]}"; do
		echo "SKIPPED subtest: $s"
	done
	((${#SUBTEST_FAILED[@]} == 0)) || return 1
	if ((SUBTEST_PASSED == 0)); then
		echo "SKIP: all ${#SUBTEST_SKIPPED[@]} subtests skipped: $(printf '%s\n' "${SUBTEST_WHY[@]}" | awk '!seen[$0]++ { printf "%s%s", (n++ ? "; " : ""), $0 }')"
		return 77
	fi
	return 0
}

# note MSG...: progress for the test log.
note() {
	echo "ok: $*"
}

# track_pid PID: kill PID when the test exits.
track_pid() {
	BG_PIDS+=("$1")
}

# tally_ok ARGS...: run tally, which must exit 0.  Its stdout (with the
# profiled command's output, e.g. truth lines) goes to $TMP/out, its stderr
# to $TMP/err.
tally_ok() {
	local rc=0
	"$TALLY" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	if ((rc != 0)); then
		fail "'tally $*' exited $rc (expected 0); stderr: $(head -c 2000 "$TMP/err")"
	fi
	return 0
}

# expect_fail_with REGEX CMD...: CMD must exit non-zero with exactly one line
# on stderr, matching the extended REGEX.  Sets LAST_RC and LAST_ERR.
LAST_RC=0
LAST_ERR=
expect_fail_with() {
	local regex=$1 lines
	shift
	LAST_RC=0
	"$@" >"$TMP/fail.out" 2>"$TMP/fail.err" </dev/null || LAST_RC=$?
	LAST_ERR=$(cat "$TMP/fail.err")
	if ((LAST_RC == 0)); then
		fail "'$*' exited 0, expected an error matching /$regex/; stderr: $LAST_ERR"
	fi
	if ((LAST_RC > 128 && LAST_RC <= 128 + 64)); then
		fail "'$*' exited $LAST_RC (killed by signal $((LAST_RC - 128))?), expected a clean error exit; stderr: $LAST_ERR"
	fi
	lines=$(awk 'END { print NR }' "$TMP/fail.err")
	if [[ $lines != 1 ]]; then
		fail "'$*' wrote $lines lines on stderr, expected exactly 1 matching /$regex/: $(head -c 2000 "$TMP/fail.err")"
	fi
	if ! grep -Eq -- "$regex" "$TMP/fail.err"; then
		fail "'$*': stderr '$LAST_ERR' does not match /$regex/"
	fi
	note "'$*' -> exit $LAST_RC: $LAST_ERR"
}

# fcmp A OP B: floating-point comparison (OP is < <= > >= ==).
fcmp() {
	# both sides numbers, compared as numbers: awk compares anything else
	# (an expression such as "80 - 5", an empty string) as text, silently
	awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
		num = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"
		if (a !~ num || b !~ num) {
			printf "fcmp: not a number: %s %s %s\n", a, op, b > "/dev/stderr"
			exit 2
		}
		a += 0; b += 0
		if (op == "<") r = a < b; else if (op == "<=") r = a <= b
		else if (op == ">") r = a > b; else if (op == ">=") r = a >= b
		else if (op == "==") r = a == b; else r = 0
		exit !r }'
}

# between VALUE LOW HIGH: LOW <= VALUE <= HIGH (decimals allowed).
between() {
	awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v == v + 0 && lo <= v && v <= hi) }'
}

# near ACTUAL EXPECTED TOLERANCE [WHAT]: |ACTUAL - EXPECTED| <= TOLERANCE,
# for percentages (the tolerance is in percentage points).
near() {
	local what=${4:-value}
	if ! awk -v a="$1" -v e="$2" -v t="$3" \
		'BEGIN { d = a - e; if (d < 0) d = -d; exit !(a == a + 0 && d <= t) }'; then
		fail "$what: tally says $1, expected $2 +/- $3"
	fi
	note "$what: tally $1, expected $2 +/- $3"
}

# truth NAME [FILE]: the percentage a workload printed as `truth NAME P`
# (first such line of FILE, default $TMP/out).
truth() {
	local v
	v=$(awk -v n="$1" '$1 == "truth" && $2 == n { print $3; exit }' "${2:-$TMP/out}")
	[[ -n $v ]] || fail "the workload printed no 'truth $1' line in ${2:-$TMP/out}: $(head -c 1000 "${2:-$TMP/out}")"
	echo "$v"
}

# workload_pid [FILE]: the pid the workload printed first (`pid N`).
workload_pid() {
	local v
	v=$(awk '$1 == "pid" { print $2; exit }' "${1:-$TMP/out}")
	[[ -n $v ]] || fail "the workload printed no 'pid N' line in ${1:-$TMP/out}"
	echo "$v"
}

# wait_for_line FILE REGEX [SECONDS]: wait until FILE has a line matching
# REGEX (10 s at most; past it, fail with the file's last lines).
wait_for_line() {
	local end=$((${EPOCHREALTIME/./} + $(awk -v s="${3:-10}" 'BEGIN { printf "%d", s * 1e6 }')))
	while ! grep -Eq -- "$2" "$1" 2>/dev/null; do
		((${EPOCHREALTIME/./} < end)) ||
			fail "no line matching /$2/ in $1 within ${3:-10} s ($(load_since start)); its last lines: $(tail -5 "$1" 2>/dev/null | head -c 1000)"
		sleep 0.05
	done
}

# wait_port PORT [SECONDS]: until a server (one the test started) accepts
# connections on 127.0.0.1:PORT, 10 s at most.
wait_port() {
	wait_for "${2:-10}" "a server listening on 127.0.0.1:$1" \
		python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$1"
}

# db_size DIR: total size in bytes of the regular files under DIR.
db_size() {
	find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

# need_tool CMD PACKAGE: skip (inside a subtest: that subtest) when CMD is
# missing.  TALLY_HIDE_TOOLS=CMD,... makes a test see those as missing (to
# try its skips).
need_tool() {
	if [[ ,${TALLY_HIDE_TOOLS:-}, == *,"$1",* ]] || ! command -v "$1" >/dev/null 2>&1; then
		skip "$1 is not installed (Debian package $2; scripts/deps.sh --test installs it)"
	fi
}

# need_browser: skip (inside a subtest: that subtest) unless tests/e2e/browser.py
# can drive a headless Chromium (TALLY_HIDE_TOOLS=chromium: as if it could not).
need_browser() {
	local msg
	[[ ,${TALLY_HIDE_TOOLS:-}, != *,chromium,* ]] || skip "chromium is hidden by TALLY_HIDE_TOOLS (scripts/deps.sh --test installs Debian's chromium)"
	msg=$(python3 "$SRCDIR/tests/e2e/browser.py" check) || skip "$msg (scripts/deps.sh --test installs Debian's chromium)"
}

# have_hw_pmu: true when the machine can count hardware events (cycles).
have_hw_pmu() {
	local out
	if command -v perf >/dev/null 2>&1; then
		out=$(perf stat -x, -e cycles true 2>&1) || return 1
		if grep -Eq '<not (supported|counted)>' <<<"$out"; then
			return 1
		fi
		return 0
	fi
	[[ -d /sys/bus/event_source/devices/cpu || -d /sys/bus/event_source/devices/cpu_core ]]
}

# report_json OUT ARGS...: `tally report --json ARGS...` into the file OUT
# (stderr into OUT.err); fails unless tally exits 0 with valid JSON.
report_json() {
	local out=$1 rc=0
	shift
	"$TALLY" report --json "$@" >"$out" 2>"$out.err" || rc=$?
	((rc == 0)) || fail "'tally report --json $*' exited $rc; stderr: $(head -c 2000 "$out.err")"
	python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out" 2>"$TMP/json.err" ||
		fail "'tally report --json $*' printed invalid JSON: $(head -c 300 "$TMP/json.err"); output: $(head -c 1000 "$out")"
}

# report_text OUT ARGS...: `tally report ARGS...` into OUT (stderr OUT.err).
report_text() {
	local out=$1 rc=0
	shift
	"$TALLY" report "$@" >"$out" 2>"$out.err" || rc=$?
	((rc == 0)) || fail "'tally report $*' exited $rc; stderr: $(head -c 2000 "$out.err")"
}

# tjson FILE QUERY ARGS...: numbers and names from a `tally report --json`
# file.  EVENT is an event name or '-' (any); IMAGE is a file name, a full
# path or '-'.
#   total [EVENT]                  total samples
#   image NAME [EVENT]             samples of image NAME
#   func NAME [IMAGE [EVENT]]      samples of function NAME
#   images [EVENT]                 image names (file names) with samples, one a line
#   funcs [IMAGE [EVENT]]          function names with samples, one a line
#   events                         event names, one a line
#   shares image|func NAME...      each NAME's percent of the NAMEs together
#                                  (`NAME PERCENT SAMPLES` lines; fails if all are 0)
#
# The schema is docs/report-json.md's: events[] (name, samples) holding
# images[] (name, path, samples) holding functions[] (name, samples).  The
# reader walks the tree by meaning rather than by fixed paths: an image is an
# object in an "images" list (or one with a string "image"), a function one
# in a "functions"/"symbols" list (or with "function"/"symbol"), an event one
# in "events" (or with "event"); counts are "samples" (or "count"), an
# event's total its "samples" (or a "total"). With TJSON_VALUE=1 in the
# environment every count is the period-weighted `value` instead.
TALLY_JSON_PY='
import json, os, sys

IMG_KEYS = ("image", "image_name", "dso", "module")
FN_KEYS = ("function", "symbol", "func", "sym")
EV_KEYS = ("event", "event_name")
# TJSON_VALUE=1: the period-weighted values (`value`) instead of the samples
CNT_KEYS = ("value",) if os.environ.get("TJSON_VALUE") else ("samples", "count", "hits")
IMG_LISTS = ("images", "dsos", "modules")
FN_LISTS = ("functions", "symbols", "funcs")
EV_LISTS = ("events",)

def isnum(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)

def first(d, keys, test):
    for k in keys:
        if k in d and test(d[k]):
            return d[k]
    return None

def isstr(v):
    return isinstance(v, str)

rows = []      # dicts: kind, name, image, path, event, count
totals = {}    # event (None: whole report) -> total

def walk(node, pkey, ctx):
    if isinstance(node, list):
        for x in node:
            walk(x, pkey, ctx)
        return
    if not isinstance(node, dict):
        return
    ctx = dict(ctx)
    ev = first(node, EV_KEYS, isstr)
    if ev is None and pkey in EV_LISTS and isstr(node.get("name")):
        ev = node["name"]
    fn = first(node, FN_KEYS, isstr)
    if fn is None and pkey in FN_LISTS and isstr(node.get("name")):
        fn = node["name"]
    img = first(node, IMG_KEYS, isstr)
    if img is None and pkey in IMG_LISTS:
        img = first(node, ("name", "path", "file"), isstr)
    if ev is not None:
        ctx["event"] = ev
    if img is not None:
        ctx["image"] = img
        ctx["path"] = node.get("path") if isstr(node.get("path")) else None
    cnt = first(node, CNT_KEYS, isnum)
    if fn is not None:
        if cnt is not None:
            rows.append(dict(kind="func", name=fn, image=ctx.get("image"),
                             path=ctx.get("path"), event=ctx.get("event"), count=cnt))
    elif img is not None:
        if cnt is not None:
            rows.append(dict(kind="image", name=img, image=img, path=ctx.get("path"),
                             event=ctx.get("event"), count=cnt))
    else:
        t = first(node, ("total", "total_samples"), lambda v: isnum(v) or isinstance(v, dict))
        if isinstance(t, dict):
            t = first(t, CNT_KEYS, isnum)
        if t is None and ev is not None:
            t = cnt
        if t is not None and ctx.get("event") not in totals:
            totals[ctx.get("event")] = t
    for k, v in node.items():
        if isinstance(v, (dict, list)):
            walk(v, k, ctx)

def img_match(q, r):
    if q in (None, "-"):
        return True
    cands = [r.get("image"), r.get("path")]
    for c in cands:
        if c and (q == c or q == os.path.basename(c)):
            return True
    return False

def select(kind, event):
    rs = [r for r in rows if r["kind"] == kind]
    if event not in (None, "-"):
        return [r for r in rs if r["event"] == event]
    # without an event filter prefer the rows outside any per-event section,
    # so one set of numbers is not counted twice
    plain = [r for r in rs if r["event"] is None]
    return plain if plain else rs

def image_rows(event):
    rs = select("image", event)
    return rs if rs else select("func", event)

def die(msg):
    sys.stderr.write("tjson: " + msg + "\n")
    sys.exit(2)

def main():
    path, q, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(path) as f:
        walk(json.load(f), None, {})
    arg = lambda i: args[i] if len(args) > i else "-"
    if q == "total":
        ev = arg(0)
        if ev != "-" and ev in totals:
            print(totals[ev]); return
        if ev == "-" and None in totals:
            print(totals[None]); return
        if ev == "-" and totals:
            print(sum(totals.values())); return
        print(sum(r["count"] for r in image_rows(ev)))
    elif q == "image":
        print(sum(r["count"] for r in image_rows(arg(1)) if img_match(args[0], r)))
    elif q == "func":
        print(sum(r["count"] for r in select("func", arg(2))
                  if r["name"] == args[0] and img_match(arg(1), r)))
    elif q == "images":
        seen = {}
        for r in image_rows(arg(0)):
            n = os.path.basename(r["image"] or "?")
            seen[n] = seen.get(n, 0) + r["count"]
        for n in sorted(seen):
            if seen[n] > 0:
                print(n)
    elif q == "funcs":
        seen = {}
        for r in select("func", arg(1)):
            if img_match(arg(0), r):
                seen[r["name"]] = seen.get(r["name"], 0) + r["count"]
        for n in sorted(seen):
            if seen[n] > 0:
                print(n)
    elif q == "events":
        evs = set(r["event"] for r in rows if r["event"] is not None)
        evs |= set(e for e in totals if e is not None)
        for e in sorted(evs):
            print(e)
    elif q == "shares":
        kind, names = args[0], args[1:]
        if kind == "image":
            counts = [sum(r["count"] for r in image_rows("-") if img_match(n, r)) for n in names]
        else:
            counts = [sum(r["count"] for r in select("func", "-") if r["name"] == n) for n in names]
        tot = sum(counts)
        if tot <= 0:
            die("none of %s has samples in %s" % (" ".join(names), path))
        for n, c in zip(names, counts):
            print("%s %.2f %d" % (n, 100.0 * c / tot, c))
    else:
        die("unknown query " + q)

main()
'
tjson() {
	python3 -c "$TALLY_JSON_PY" "$@" || fail "cannot read '$1' as a tally JSON report (tjson $*)"
}

# Shares against what was measured.  A share p of N samples scatters around
# the truth by its binomial error, sigma = sqrt(p(1-p)/N): the workloads take
# their calls in a random order (workload.h, wl_pick), so their samples are
# independent draws (measured: 0.8 sigma on a busy machine, tests/README.md),
# and a check allows SHARE_Z sigmas (4: one check in 16000 off by chance, the
# suite makes a few hundred) and SHARE_SLACK points (the workload's clock
# reads, printing's rounding), and says the count it was allowed for.  A share
# is never checked against a fixed "+/- 5": a few hundred samples scatter by
# more than that, tens of thousands by far less.
SHARE_Z=4
SHARE_SLACK=0.5

# share_tol P N [N2]: the tolerance in points of a share P (percent) of N
# samples against the truth; with N2, against another share of N2 samples
# (another profiler's of the same run: both scatter).
share_tol() {
	awk -v p="$1" -v n="$2" -v m="${3:-0}" -v z="$SHARE_Z" -v s="$SHARE_SLACK" 'BEGIN {
		q = p / 100; if (q < 0) q = 0; if (q > 1) q = 1
		v = 0; if (n > 0) v += 1 / n; if (m > 0) v += 1 / m
		# a share of 0 or 100% still scatters by a sample
		pq = q * (1 - q); if (n > 0 && pq < 1 / n) pq = 1 / n
		printf "%.2f", z * 100 * sqrt(pq * v) + s }'
}

# share_near SHARE N EXPECTED WHAT [N2]: SHARE (percent) of N samples is
# EXPECTED (percent: the workload's truth, or another profiler's share of N2
# samples of the same run) within share_tol; the message gives the count and
# how many sigmas off it is.  SHARE_OF=calls (say) names what N counts.
share_near() {
	local got=$1 n=$2 want=$3 what=$4 n2=${5:-} tol off
	[[ $n =~ ^[0-9]+$ ]] || fail "$what: no sample count ('$n') for the share $got"
	tol=$(share_tol "$want" "$n" "$n2")
	off=$(awk -v a="$got" -v e="$want" -v t="$tol" -v s="$SHARE_SLACK" -v z="$SHARE_Z" 'BEGIN {
		d = a - e; if (d < 0) d = -d; sg = (t - s) / z
		printf "%.1f sigma", (sg > 0 ? d / sg : 0) }')
	if ! awk -v a="$got" -v e="$want" -v t="$tol" \
		'BEGIN { d = a - e; if (d < 0) d = -d; exit !(a == a + 0 && d <= t) }'; then
		fail "$what: $got% of $n ${SHARE_OF:-samples}, expected $want% +/- $tol ($off off; $SHARE_Z sigma of $n${n2:+ and $n2} + $SHARE_SLACK)"
	fi
	note "$what: $got% of $n ${SHARE_OF:-samples}, expected $want% +/- $tol ($off)"
}

# change_near CHANGE EXPECTED PB NB PN NN WHAT: a change in points between
# two shares of two recordings (tally diff's), PB% of NB samples and PN% of
# NN samples, is the EXPECTED change within the binomial error of both.
change_near() {
	local got=$1 want=$2 what=$7 tol
	tol=$(awk -v pb="$3" -v nb="$4" -v pn="$5" -v nn="$6" -v z="$SHARE_Z" -v s="$SHARE_SLACK" '
		function pq(p, n) { p /= 100; p = p < 0 ? 0 : p > 1 ? 1 : p; p *= 1 - p; return (n > 0 && p < 1 / n) ? 1 / n : p }
		BEGIN { v = (nb > 0 ? pq(pb, nb) / nb : 0) + (nn > 0 ? pq(pn, nn) / nn : 0); printf "%.2f", z * 100 * sqrt(v) + s }')
	awk -v a="$got" -v e="$want" -v t="$tol" 'BEGIN { d = a - e; if (d < 0) d = -d; exit !(a == a + 0 && d <= t) }' ||
		fail "$what: tally says $got points, expected $want +/- $tol ($SHARE_Z sigma of $3% of $4 samples and $5% of $6, + $SHARE_SLACK)"
	note "$what: $got points, expected $want +/- $tol ($3% of $4 samples, $5% of $6)"
}

# near_share SHARE EXPECTED TOL N WHAT: the older form of share_near, with a
# fixed floor TOL under the binomial tolerance (kept for the tests that pass
# one; new checks use share_near).
near_share() {
	local tl
	tl=$(awk -v a="$(share_tol "$2" "$4")" -v t="$3" 'BEGIN { printf "%.2f", (a > t) ? a : t }')
	near "$1" "$2" "$tl" "$5 ($4 samples)"
}

# check_split KIND JSON TRUTHFILE NAME...: each NAME's share of the NAMEs
# together (KIND image or func) in the report JSON is the workload's `truth
# NAME` in TRUTHFILE, within the binomial error of the NAMEs' samples
# (share_near).
check_split() {
	local kind=$1 json=$2 truthfile=$3 name share count total shares
	shift 3
	shares=$(tjson "$json" shares "$kind" "$@")
	total=$(awk '{ s += $3 } END { print s + 0 }' <<<"$shares")
	for name in "$@"; do
		read -r _ share count < <(awk -v n="$name" '$1 == n' <<<"$shares")
		share_near "$share" "$total" "$(truth "$name" "$truthfile")" "$kind $name share ($count samples)"
	done
}

# check_shares KIND JSON TRUTHFILE TOLERANCE NAME...: check_split with a fixed
# floor TOLERANCE under the binomial tolerance (the older form, kept for the
# tests that pass one).
check_shares() {
	local kind=$1 json=$2 truthfile=$3 tol=$4 name share count t
	shift 4
	local shares
	shares=$(tjson "$json" shares "$kind" "$@")
	for name in "$@"; do
		read -r _ share count < <(awk -v n="$name" '$1 == n' <<<"$shares")
		t=$(truth "$name" "$truthfile")
		near_share "$share" "$t" "$tol" "$(awk -v p="$share" -v c="$count" 'BEGIN { printf "%d", (p > 0) ? 100 * c / p : 0 }')" \
			"$kind $name share ($count samples)"
	done
}

# perf_around PERFDATA CMD...: CMD (`tally record ... -- WORKLOAD`) under
# `perf record $PERF_EVENT $PERF_OPTS` (PERF_EVENT: `-e cpu-clock -F 999`
# unless set), whose events follow it into
# its children: perf's samples are then of the run tally records (the same
# load, the same truth), not of a second run a load apart.  CMD's stdout goes
# to $TMP/out, its stderr to $TMP/err; skips (that subtest) when perf is
# missing or cannot record here.  perf's home (its build-id cache) is
# $TMP/perfhome: the machine's ~/.debug may hold another build of a binary
# under its build-id (perf_counts and perf_report read it too).
perf_around() {
	local data=$1 rc=0
	shift
	need_tool perf linux-perf
	mkdir -p "$TMP/perfhome"
	# shellcheck disable=SC2086 # PERF_OPTS: words
	HOME=$TMP/perfhome perf record -q ${PERF_EVENT:--e cpu-clock -F 999} ${PERF_OPTS:-} -o "$data" -- "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
	if ((rc != 0)); then
		[[ -s $data ]] || skip "perf record cannot record here: $(head -c 300 "$TMP/err")"
		fail "'$*' under perf record exited $rc: $(head -c 1000 "$TMP/err")"
	fi
}

# perf_counts PERFDATA COMM: perf's samples of the processes named COMM, one
# `COUNT DSO SYMBOL` line per symbol (a symbol perf cannot name is its
# address in the file, 0x...).
perf_counts() {
	perf_report -i "$1" -n --no-children --sort comm,dso,sym |
		awk -v c="$2" '$1 ~ /%$/ && $2 ~ /^[0-9]+$/ && $3 == c { s = $6; for (i = 7; i <= NF; i++) s = s " " $i; print $2, $4, s }'
}

# perf_report ARGS...: `perf report --stdio -q ARGS` with perf_around's home.
perf_report() {
	HOME=$TMP/perfhome perf report --stdio -q "$@" 2>/dev/null
}

# ttext FILE check image|symbols [--top N] [--no-total]: check the layout of a
# text report: tables under a header `UNIT  %  cum%  image` (or `... addr
# function`; UNIT samples, or msec or events when period-weighted), rows
# `VALUE PCT% CUM% NAME` sorted by value with cum% the running sum of %, for
# the image table a `Total` line equal to the sum of the rows (unless
# --top/--no-total; msec rows to within their rounding) and every row's % =
# value/Total, at most N rows per table with --top N, and a line starting
# with `lost:`.
# ttext FILE names: `VALUE NAME` for every row of every table (for symbol
# tables NAME is the function, after the address column).
# ttext FILE total: the number on the first `Total` line (empty if none).
# ttext FILE unit: the heading of the first table (samples, msec, events).
TALLY_TEXT_PY='
import re, sys

HDR = re.compile(r"^\s*(samples|msec|events)\s+%\s+cum%\s+(.*\S)\s*$")
ROW = re.compile(r"^\s*(\d+(?:\.\d)?)\s+(\d+(?:\.\d+)?)%?\s+(\d+(?:\.\d+)?)%?\s+(\S.*?)\s*$")
TOTAL = re.compile(r"^\s*Total\b[^\d]*(\d+(?:\.\d)?)|^\s*(\d+(?:\.\d)?)(?![\d.]).*\bTotal\b")

def num(s):
    return float(s) if "." in s else int(s)

def parse(path):
    tables, cur, lost = [], None, []
    for no, line in enumerate(open(path, errors="replace"), 1):
        line = line.rstrip("\n")
        if line.startswith("lost:"):
            lost.append(line)
        m = HDR.match(line)
        if m:
            cur = dict(unit=m.group(1), cols=m.group(2).split(), rows=[], total=None, line=no)
            tables.append(cur)
            continue
        if cur is None:
            continue
        t = TOTAL.match(line)
        if t:
            cur["total"] = num(t.group(1) or t.group(2))
            cur = None
            continue
        r = ROW.match(line)
        if r:
            name = r.group(4)
            if cur["cols"][-2:] == ["addr", "function"]:
                parts = name.split(None, 1)
                name = parts[1] if len(parts) == 2 else ""
            cur["rows"].append(dict(n=num(r.group(1)), pct=float(r.group(2)),
                                    cum=float(r.group(3)), name=name, line=no))
            continue
        cur = None
    return tables, lost

def main():
    path, q = sys.argv[1], sys.argv[2]
    tables, lost = parse(path)
    if q == "total":
        ts = [t["total"] for t in tables if t["total"] is not None]
        print(ts[0] if ts else "")
        return
    if q == "unit":
        print(tables[0]["unit"] if tables else "")
        return
    if q == "names":
        for t in tables:
            for r in t["rows"]:
                print(r["n"], r["name"])
        return
    kind, opts = sys.argv[3], sys.argv[4:]
    top = int(opts[opts.index("--top") + 1]) if "--top" in opts else None
    want = ["image"] if kind == "image" else ["addr", "function"]
    errs = []
    mine = [t for t in tables if t["cols"] == want]
    if not mine:
        errs.append("no table with the header `UNIT  %%  cum%%  %s` (headers seen: %s)"
                    % ("  ".join(want), ["  ".join(t["cols"]) for t in tables] or "none"))
    for t in mine:
        rows = t["rows"]
        where = "table at line %d" % t["line"]
        if not rows:
            errs.append(where + ": no rows")
            continue
        if top is not None and len(rows) > top:
            errs.append("%s: %d rows, more than --top %d" % (where, len(rows), top))
        run = 0.0
        for a, b in zip(rows, rows[1:]):
            if b["n"] > a["n"]:
                errs.append("%s: line %d (%s %s) sorts after line %d (%s)"
                            % (where, b["line"], b["n"], t["unit"], a["line"], a["n"]))
        for r in rows:
            run += r["pct"]
            if abs(r["cum"] - run) > 0.15 + 0.01 * len(rows):
                errs.append("%s line %d: cum%% %.2f is not the running sum of %% (%.2f)"
                            % (where, r["line"], r["cum"], run))
        if kind == "image" and top is None and "--no-total" not in opts:
            s = sum(r["n"] for r in rows)
            # msec rows are rounded to a tenth each
            slack = 0.05 * len(rows) + 0.05 if t["unit"] == "msec" else 0
            if t["total"] is None:
                errs.append(where + ": no `Total` line after the rows")
            elif abs(t["total"] - s) > slack:
                errs.append("%s: Total says %s but the rows add up to %s" % (where, t["total"], s))
        if kind == "image" and t["total"]:
            for r in rows:
                exp = 100.0 * r["n"] / t["total"]
                # a msec value is rounded to 0.05: its %% within that of the total
                tol = 0.06 + (100.0 * 0.05 / t["total"] if t["unit"] == "msec" else 0)
                if abs(r["pct"] - exp) > tol:
                    errs.append("%s line %d: %% is %.2f, value/Total gives %.2f"
                                % (where, r["line"], r["pct"], exp))
    if not lost:
        errs.append("no line starting with `lost:`")
    if errs:
        print("; ".join(errs[:8]))
        sys.exit(1)

main()
'
ttext() {
	local msg rc=0
	msg=$(python3 -c "$TALLY_TEXT_PY" "$@") || rc=$?
	if ((rc != 0)); then
		fail "text report $1 ($2 ${3:-}): $msg; report: $(head -c 1500 "$1")"
	fi
	[[ -z $msg ]] || echo "$msg"
}

# prof_files DB: the profile files of a database, one a line.
prof_files() {
	find "$1" -type f -name '*-*.prof' | sort
}

# prof_sum FILE...: check the layout of .prof files (`key: value` header
# lines first, then `HEXOFFSET COUNT...` lines, one count per event, each
# followed by its weight in format 3 and 4; a
# `samples:` header, when present, must equal the file's counts) and print
# the sum of all the counts.
prof_sum() {
	python3 - "$@" <<'EOF' || fail "bad .prof layout (see above)"
import re, sys
KV = re.compile(r"^([A-Za-z0-9_.-]+):( .*)?$")
DATA = re.compile(r"^(?:0x)?[0-9a-fA-F]+( +[0-9]+)+$")
total = 0
for path in sys.argv[1:]:
    headers = {}
    in_header = True
    mine = 0
    for no, line in enumerate(open(path, errors="replace"), 1):
        line = line.rstrip("\n")
        m = KV.match(line) if in_header else None
        if m:
            headers[m.group(1)] = (m.group(2) or "").strip()
            continue
        in_header = False
        if line == "":
            continue
        if not DATA.match(line):
            print("%s line %d: expected `HEXOFFSET COUNT`, got %r" % (path, no, line))
            sys.exit(1)
        cols = line.split()[1:]
        # format 3 and 4: a weight after each count
        if headers.get("format-version") in ("3", "4"):
            cols = cols[0::2]
        mine += sum(int(c) for c in cols)
    if not headers:
        print("%s: no `key: value` header lines at the top" % path)
        sys.exit(1)
    want = headers.get("samples", "")
    if re.fullmatch(r"[0-9]+(,[0-9]+)*", want) and sum(int(c) for c in want.split(",")) != mine:
        print("%s: header says samples: %s but the counts add up to %d" % (path, want, mine))
        sys.exit(1)
    total += mine
print(total)
EOF
}

# stacks_text DB: DB's stacks file as text, on stdout: a binary one (format
# version 4) in the version 3 text layout, `COUNT:WEIGHT[,...] PID LABEL
# IMAGE:HEXOFFSET...` (leaf first) under a `#` line; a text one as it is.
# Through tests/e2e/stacks.py, which checks the binary layout (docs/format.md)
# on its own and fails on anything malformed.
stacks_text() {
	python3 "$SRCDIR/tests/e2e/stacks.py" text "$1" || fail "cannot read the stacks of $1 (stacks.py above)"
}

# stacks_to_text DB: rewrite DB's stacks file as that text (atomically; the
# session's format-version stays: tally reads a text stacks file in any
# version), e.g. to damage its lines with sed or awk.
stacks_to_text() {
	python3 "$SRCDIR/tests/e2e/stacks.py" to-text "$1" || fail "cannot turn the stacks of $1 into text (stacks.py above)"
}

# stacks_to_binary DB: rewrite DB's text stacks file (version 3 layout) in the
# binary layout of format version 4.
stacks_to_binary() {
	python3 "$SRCDIR/tests/e2e/stacks.py" to-binary "$1" || fail "cannot turn the stacks of $1 into binary (stacks.py above)"
}

# session_key DB KEY: the value of `KEY: value` in DB/session.
session_key() {
	[[ -f $1/session ]] || fail "database $1 has no 'session' file (files: $(ls "$1" | head -20 | tr '\n' ' '))"
	awk -v k="$2:" '$1 == k { sub(/^[^:]*:[ \t]*/, ""); print; exit }' "$1/session"
}

# info_val KEY [FILE]: the word after KEY on the workload's first `info` line
# that has it (e.g. `info rounds 900 cpu_ms 1000.3`).
info_val() {
	local v
	v=$(awk -v k="$1" '$1 == "info" { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "${2:-$TMP/out}")
	[[ -n $v ]] || fail "the workload printed no 'info ... $1 N' in ${2:-$TMP/out}"
	echo "$v"
}

# has_line WORD LIST: LIST (newline-separated) has the line WORD.
has_line() {
	grep -qxF -- "$1" <<<"$2"
}

# alive PID: PID is running (neither gone nor a zombie waiting for us).
alive() {
	local st
	st=$(sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $st && $st != Z && $st != X ]]
}

load_mark start
