# Helpers for the job tests (t11NN-job-*.sh), sourced after lib.sh.

# Profilers' state stays in $TMP, and no profiler of the machine is found.
export TALLY_STATE_DIR=$TMP/state
export TALLY_PROFILERS_PATH=

# job_ok CONTROL [ARGS...]: `tally job run ARGS CONTROL`, which must exit 0;
# stdout in $TMP/job.out, stderr in $TMP/job.err.
job_ok() {
	local ctl=$1 rc=0
	shift
	"$TALLY" job run "$@" "$ctl" >"$TMP/job.out" 2>"$TMP/job.err" </dev/null || rc=$?
	((rc == 0)) || fail "'tally job run $* $ctl' exited $rc; stdout: $(head -c 1500 "$TMP/job.out"); stderr: $(head -c 1500 "$TMP/job.err")"
}

# job_rc CONTROL [ARGS...]: the same, its exit status in JOB_RC (any).
JOB_RC=0
job_rc() {
	local ctl=$1
	shift
	JOB_RC=0
	"$TALLY" job run "$@" "$ctl" >"$TMP/job.out" 2>"$TMP/job.err" </dev/null || JOB_RC=$?
}

# sjson FILE EXPR: a value of the job's status.json, EXPR in Python over `s`
# (e.g. "s['tests'][0]['status']"); fails on invalid JSON.
sjson() {
	python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$1" "$2" ||
		fail "cannot read '$2' from '$1': $(head -c 1000 "$1")"
}

# example_plugin DIR: the example plugin of docs/job.md, as the docs show it,
# into DIR/loadavg/profiler.
example_plugin() {
	mkdir -p "$1/loadavg"
	awk '/<!-- example plugin: loadavg -->/ { f = 1; next }
	     f && /^```sh/ { g = 1; next }
	     g && /^```/ { exit }
	     g' "$SRCDIR/docs/job.md" >"$1/loadavg/profiler"
	[[ -s $1/loadavg/profiler ]] || fail "docs/job.md has no example plugin block"
	chmod +x "$1/loadavg/profiler"
}

# no_leftovers PATTERN: no process whose command line matches PATTERN.
no_leftovers() {
	local p
	p=$(pgrep -f -- "$1" || true)
	[[ -z $p ]] || fail "left running after the job: $(ps -o pid,args -p "$(tr '\n' ',' <<<"$p" | sed 's/,$//')" 2>&1)"
}
