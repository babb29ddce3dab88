# Helpers of the JIT call-graph tests (t0707-t0709), sourced after lib.sh.

# stack_shares DB PATTERN...: for each PATTERN (a Python regular expression
# that must match a whole frame name), the percent of DB's samples whose stack
# has such a frame, one `PATTERN PERCENT` line each, then `samples N` and
# `rooted P` (the percent whose outermost frame is _start, __libc_start_main,
# a thread start or a kernel thread start: the report's own figure). From
# the folded export (--samples: counts, not weights) and the JSON report.
# A PATTERN `A|given|B` is the percent of the samples with a B frame that also
# have an A frame.
stack_shares() {
	local db=$1
	shift
	"$TALLY" export -i "$db" --format folded --samples -o "$TMP/$db.folded" 2>"$TMP/$db.folded.err" ||
		fail "tally export --format folded of $db failed: $(head -c 600 "$TMP/$db.folded.err")"
	"$TALLY" report -i "$db" --children --json >"$TMP/$db.cg.json" 2>"$TMP/$db.cg.err" ||
		fail "tally report --children --json of $db failed: $(head -c 600 "$TMP/$db.cg.err")"
	python3 - "$TMP/$db.folded" "$TMP/$db.cg.json" "$@" <<'PY' || fail "cannot read the stacks of $db (above)"
import json, re, sys
folded, rep = sys.argv[1], sys.argv[2]
pats = [[re.compile(q) for q in p.split("|given|")] for p in sys.argv[3:]]
hits = [0] * len(pats)
given = [0] * len(pats)
total = 0
for line in open(folded, encoding="utf-8", errors="replace"):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    n = int(n)
    frames = stack.split(";")
    total += n
    for i, p in enumerate(pats):
        if len(p) > 1 and not any(p[1].fullmatch(f) for f in frames):
            continue
        given[i] += n
        if any(p[0].fullmatch(f) for f in frames):
            hits[i] += n
if not total:
    print("no samples in " + folded)
    sys.exit(1)
for p, h, g in zip(sys.argv[3:], hits, given):
    print("%s %.2f" % (p, 100.0 * h / g if g else 0.0))
print("samples %d" % total)
u = json.load(open(rep))["events"][0]["unwind"]
print("rooted %.2f" % u["rooted_percent"])
print("reasons %s" % u.get("dwarf_stop_reasons", "").replace(" ", "_"))
PY
}

# share_of PATTERN FILE: the percent stack_shares wrote for PATTERN in FILE.
share_of() {
	awk -v p="$1" '$1 == p { print $2; exit }' "$2"
}

# jit_cleanup PID: the perf map and jitdump a runtime left in /tmp.
jit_cleanup() {
	[[ -n ${1:-} ]] && rm -f "/tmp/perf-$1.map" "/tmp/jit-$1.dump" /tmp/jitted-"$1"-*.so
	return 0
}

# minus A B: A - B (decimals), for a bound fcmp compares with (fcmp takes
# numbers, not expressions).
minus() {
	awk -v a="$1" -v b="$2" 'BEGIN { print a - b }'
}
