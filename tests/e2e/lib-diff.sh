# Helpers for the tests of tally diff and tally merge (t10NN-*.sh), sourced
# after lib.sh.

# build_split DIR CFLAGS...: tests/workloads/split_weights.c built as
# DIR/split_w with the weights given (-DW_A=6 -DW_B=3 -DW_C=1 [-DW_OLD=N]
# [-DW_NEW=N]), as meson builds the workloads: -O2 -g, frame pointers, no
# identical code folding.
build_split() {
	local dir=$1
	shift
	command -v cc >/dev/null || skip "no C compiler (cc) to build the workload twice"
	mkdir -p "$dir"
	cc -O2 -g -fno-omit-frame-pointer -fno-ipa-icf -I"$SRCDIR/tests/workloads" "$@" \
		-o "$dir/split_w" "$SRCDIR/tests/workloads/split_weights.c" 2>"$TMP/cc.err" ||
		fail "cc $* split_weights.c failed: $(head -c 1000 "$TMP/cc.err")"
}

# build_id FILE: the GNU build-id of an ELF file (empty when it has none).
build_id() {
	readelf -n "$1" 2>/dev/null | awk '/Build ID/ { print $3 }'
}

# record_split DB TRUTHFILE DIR MS [RECORD OPTIONS...]: records DIR/split_w MS
# into DB and keeps its truth lines in TRUTHFILE.
record_split() {
	local db=$1 truthfile=$2 dir=$3 ms=$4
	shift 4
	tally_ok record "$@" -o "$db" -- "$dir/split_w" "$ms"
	cp "$TMP/out" "$truthfile"
}

# diff_row JSON FUNCTION FIELD: FIELD of FUNCTION's row in a `tally diff
# --json` file (empty when there is no such row).
diff_row() {
	python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    if r["function"] == sys.argv[2]:
        v = r[sys.argv[3]]
        print("null" if v is None else v)
        break
PY
}
