#!/bin/bash
# export --format speedscope: valid against the schema speedscope ships (npm
# package speedscope, installed by scripts/deps.sh --test); one sampled
# profile per process named by its command and pid; every stack's frames are
# in the shared table; the weights add up to the report's period-weighted
# time (unit nanoseconds; with --samples, unit none, to its samples); the
# callers of callsplit's leaf split 3:1 as the workload measured; equal
# function stacks are written once; --percent-limit cuts into [other] with the
# total unchanged; a database without stacks is refused.
. "$SRCDIR/tests/e2e/lib.sh"

"$TALLY" record -g --per-pid -o cg.db -- "$WORKLOADS/callsplit_fp" 1500 >out 2>rec.err || fail "record: $(cat rec.err)"
total=$("$TALLY" report -i cg.db --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"][0]["value"])')
nsamples=$("$TALLY" report -i cg.db --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"][0]["samples"])')

CHECK_PY='
import json, sys
path, total, truthfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
UNIT = sys.argv[4] if len(sys.argv) > 4 else "nanoseconds"
d = json.load(open(path))
assert d["$schema"] == "https://www.speedscope.app/file-format-schema.json", d.get("$schema")
frames = d["shared"]["frames"]
names = [f["name"] for f in frames]
profs = d["profiles"]
assert profs, "no profiles"
allw = 0
split = {"caller_a": 0, "caller_b": 0}
for p in profs:
    assert p["type"] == "sampled" and p["unit"] == UNIT, (p["type"], p["unit"])
    assert "callsplit_fp (pid " in p["name"] and p["name"].endswith("cpu-clock"), p["name"]
    assert len(p["samples"]) == len(p["weights"]), "samples and weights differ in length"
    assert sum(p["weights"]) == p["endValue"] - p["startValue"], "endValue is not the sum of the weights"
    seen = set()
    for st, w in zip(p["samples"], p["weights"]):
        assert all(0 <= i < len(frames) for i in st), "a frame index out of the table"
        assert tuple(st) not in seen, "a stack written twice: %s" % [names[i] for i in st]
        seen.add(tuple(st))
        assert w > 0
        allw += w
        fs = [names[i] for i in st]
        for c in split:
            if c in fs:
                split[c] += w
    # root first: the leaf function is last, main before its callees
    for st in p["samples"]:
        fs = [names[i] for i in st]
        if "leaf" in fs and "main" in fs:
            assert fs.index("main") < fs.index("leaf"), "stack not root first: %s" % fs
assert allw == total, "weights add up to %d, report counts %d" % (allw, total)
truth = {l.split()[1]: float(l.split()[2]) for l in open(truthfile) if l.startswith("truth ")}
both = split["caller_a"] + split["caller_b"]
for c in split:
    got = 100.0 * split[c] / both
    assert abs(got - truth[c]) <= 5, "%s: %.2f%%, the workload measured %.2f%%" % (c, got, truth[c])
    print("ok: %s %.2f%% (truth %.2f%%)" % (c, got, truth[c]))
print("ok: %d profiles, %d frames, %d samples" % (len(profs), len(frames), allw))
'

case_valid() {
	"$TALLY" export -i cg.db --format speedscope 2>err || fail "export: $(cat err)"
	[[ -s tally.speedscope.json ]] || fail "no tally.speedscope.json"
	python3 -c "$CHECK_PY" tally.speedscope.json "$total" out || fail "the speedscope file is wrong (above)"
	# - writes to stdout, the same document
	"$TALLY" export -i cg.db --format speedscope -o - >stdout.json 2>err || fail "export -o -: $(cat err)"
	cmp -s stdout.json tally.speedscope.json || fail "-o - differs from the file"
	# --samples: the weights are samples, unit none
	"$TALLY" export -i cg.db --format speedscope --samples -o n.json 2>err || fail "export --samples: $(cat err)"
	python3 -c "$CHECK_PY" n.json "$nsamples" out none || fail "the speedscope file of --samples is wrong (above)"
}

case_schema() {
	local schema
	schema=$(npm root -g 2>/dev/null)/speedscope/dist/release/file-format-schema.json
	[[ -r $schema ]] || skip "speedscope's schema is not installed (npm package speedscope; scripts/deps.sh --test installs it)"
	python3 -c 'import jsonschema' 2>/dev/null || skip "python3's jsonschema is missing (Debian package python3-jsonschema)"
	python3 - "$schema" tally.speedscope.json <<'PY' || fail "the export does not validate against speedscope's schema (above)"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
jsonschema.validate(doc, schema)
print("ok: valid against speedscope's file-format-schema.json")
PY
}

case_percent_limit() {
	"$TALLY" export -i cg.db --format speedscope --percent-limit 30 -o cut.json 2>err || fail "export --percent-limit: $(cat err)"
	python3 - cut.json "$total" <<'PY' || fail "--percent-limit (above)"
import json, sys
d = json.load(open(sys.argv[1]))
names = [f["name"] for f in d["shared"]["frames"]]
w = sum(sum(p["weights"]) for p in d["profiles"])
assert w == int(sys.argv[2]), "the total changed: %d, not %s" % (w, sys.argv[2])
used = {names[i] for p in d["profiles"] for st in p["samples"] for i in st}
assert "caller_b" not in used, "caller_b (25%) kept under a 30% limit"
assert "caller_a" in used, "caller_a (75%) cut under a 30% limit"
assert "[other]" in used, "no [other] frame"
print("ok: cut to [other], total %d" % w)
PY
}

case_no_stacks() {
	"$TALLY" record -o flat.db -- "$WORKLOADS/split_funcs" 200 >/dev/null 2>&1 || fail "record flat"
	expect_fail_with "'flat.db' has no call stacks, which the speedscope format needs \(record with -g" "$TALLY" export -i flat.db --format speedscope
}

subtest "a valid file with the measured split" case_valid
subtest "speedscope's own schema" case_schema
subtest "--percent-limit" case_percent_limit
subtest "a database without stacks" case_no_stacks
