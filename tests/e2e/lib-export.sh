# Helpers for the export tests (t06NN-export-*.sh), sourced after lib.sh: the
# real tools that read each format, run offline and inside $TMP.


# gopprof ARGS...: `go tool pprof ARGS` with its home, caches and temporary
# files in $TMP and no network (no toolchain download, no module proxy).
gopprof() {
	mkdir -p "$TMP/gohome" "$TMP/gocache" "$TMP/pprof"
	HOME=$TMP/gohome GOCACHE=$TMP/gocache GOFLAGS= GOTOOLCHAIN=local GOPROXY=off GOENV=off \
		PPROF_TMPDIR=$TMP/pprof PPROF_BINARY_PATH=$TMP/pprof go tool pprof "$@"
}

# gopprof_ok OUT ARGS...: gopprof into OUT (stderr OUT.err); fails unless it exits 0.
gopprof_ok() {
	local out=$1 rc=0
	shift
	gopprof "$@" >"$out" 2>"$out.err" || rc=$?
	((rc == 0)) || fail "'go tool pprof $*' exited $rc: $(head -c 1500 "$out.err")"
}

# share A B: A's percent of A + B.
share() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + b <= 0) exit 1; printf "%.2f\n", 100 * a / (a + b) }' ||
		fail "share of $1 in $1 + $2: both are 0"
}

# json_total FILE [EVENT]: the samples of an event (default the first) in a `tally report --json` file.
json_total() {
	python3 - "$1" "${2:-}" <<'EOF'
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
want = sys.argv[2]
for e in evs:
    if not want or e["name"] == want:
        print(e["samples"])
        break
EOF
}

# json_value FILE [EVENT]: the period-weighted total (`value`, in the event's
# unit) of an event (default the first) in a `tally report --json` file.
json_value() {
	python3 - "$1" "${2:-}" <<'EOF' || fail "no value of event '${2:-(first)}' in $1 (a report without --samples has one)"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
want = sys.argv[2]
for e in evs:
    if not want or e["name"] == want:
        print(e["value"])
        break
else:
    sys.exit(1)
EOF
}
