#!/bin/bash
# The flat views say what they are asked: --percent-limit leaves rows out of
# --symbols (text and JSON alike), --top N --symbols lists the same N images in
# text and JSON, `report --flat` is one table of the hottest functions of every
# image (perf report's default view, pprof -top) in the workload's split, and
# `annotate NAME` of an inlined function gives its lines, summed over every
# place it was inlined.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 2000 -o si.db -- "$WORKLOADS/split_images" 1200
cp out si.truth

limit() {
	report_json lim.json -i si.db --symbols --percent-limit 20
	python3 - lim.json <<'PY' >lim.out || fail "--symbols --percent-limit 20, JSON: $(cat lim.out)"
import json, sys
d = json.load(open(sys.argv[1]))
imgs = [i for e in d["events"] for i in e["images"]]
low = [(i["name"], i["percent"]) for i in imgs if i["percent"] < 20]
rows = [(i["name"], f["name"], f["percent"]) for i in imgs for f in i["functions"]]
lowf = [r for r in rows if r[2] < 20]
print("images %s, functions %s" % ([i["name"] for i in imgs], rows[:6]))
sys.exit(1 if low or lowf or not rows else 0)
PY
	report_text lim.txt -i si.db --symbols --percent-limit 20
	awk '/^ +[0-9.]+ +[0-9.]+% / { sub("%", "", $2); if ($2 + 0 < 20) bad = bad $0 "\n" } END { if (bad != "") { printf "%s", bad; exit 1 } }' lim.txt >lim.bad ||
		fail "--symbols --percent-limit 20, text: rows under 20%: $(cat lim.bad)"
	report_text all.txt -i si.db --symbols
	(($(grep -Ec '^ +[0-9.]+ ' all.txt) > $(grep -Ec '^ +[0-9.]+ ' lim.txt))) || fail "--percent-limit 20 left nothing out: $(cat lim.txt)"
}
subtest "--percent-limit leaves rows out of --symbols, text and JSON" limit

top() {
	# (the sample counts: the text's titles say them as the JSON's samples)
	report_json top.json -i si.db --symbols --top 2 --samples
	report_text top.txt -i si.db --symbols --top 2 --samples
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); [print(i["path"] or i["name"], i["samples"]) for e in d["events"] for i in e["images"]]' top.json >top.json.imgs
	sed -nE 's/^(.+) \(([0-9]+) samples?, .*% of total\)$/\1 \2/p' top.txt >top.txt.imgs
	[[ $(wc -l <top.json.imgs) == 2 ]] || fail "--top 2 --symbols JSON lists $(wc -l <top.json.imgs) images: $(cat top.json.imgs)"
	diff top.json.imgs top.txt.imgs >top.diff || fail "--top 2 --symbols: text and JSON list other images: $(cat top.diff)"
}
subtest "--top 2 --symbols: the same two images in text and JSON" top

flat() {
	report_json flat.json -i si.db --flat
	report_json sym.json -i si.db --symbols
	python3 - flat.json sym.json si.truth <<'PY' >flat.out || fail "--flat: $(cat flat.out)"
import json, sys
f = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
truth = {l.split()[1]: float(l.split()[2]) for l in open(sys.argv[3]) if l.startswith("truth ")}
ev = f["events"][0]
rows = ev["functions"]
if sum(r["samples"] for r in rows) != ev["samples"]:
    print("the rows hold %d of %d samples" % (sum(r["samples"] for r in rows), ev["samples"])); sys.exit(1)
if [r["samples"] for r in rows] != sorted((r["samples"] for r in rows), reverse=True):
    print("rows not by samples"); sys.exit(1)
# the same rows as --symbols per image, merged
per = sorted(((i["name"], x["name"], x["samples"]) for e in s["events"] for i in e["images"] for x in i["functions"]), key=str)
mine = sorted(((r["image"], r["name"], r["samples"]) for r in rows), key=str)
if per != mine:
    print("--flat rows differ from --symbols': %s vs %s" % (mine[:5], per[:5])); sys.exit(1)
# the workload's split over the hottest function of each of its images
by = {}
for r in rows:
    by.setdefault(r["image"], r["samples"])
top = {"split_images": by.get("split_images", 0), "libtallywork.so": by.get("libtallywork.so", 0), "libc.so.6": by.get("libc.so.6", 0)}
tot = sum(top.values())
for k, v in top.items():
    print(k, "%.2f" % (100.0 * v / tot if tot else 0), truth[k], tot)
PY
	while read -r img share t tot; do
		share_near "$share" "$tot" "$t" "--flat: the hottest function of $img"
	done <flat.out
	report_text flat.txt -i si.db --flat --top 3
	(($(grep -Ec '^ +[0-9.]+ +[0-9.]+% +[0-9.]+%  .*  \[[^]]+\]$' flat.txt) == 3)) || fail "--flat --top 3 text is not 3 'samples % cum% function [image]' rows: $(cat flat.txt)"
}
subtest "report --flat: the hottest functions of all images in one table" flat

inlined() {
	tally_ok record -F 2000 -o ic.db -- "$WORKLOADS/inline_chain" 1000
	lm=$(info_val line_mid out)
	ll=$(info_val line_leaf out)
	report_json ic.json -i ic.db --symbols --samples
	for fn in leaf_mix mid_mix; do
		"$TALLY" annotate -i ic.db --samples --json "$fn" >"$fn.json" 2>"$fn.err" || fail "annotate $fn (inlined) failed: $(cat "$fn.err")"
	done
	python3 - ic.json leaf_mix.json mid_mix.json "$lm" "$ll" <<'PY' >ann.out || fail "annotate of inlined functions: $(cat ann.out)"
import json, sys
rep = json.load(open(sys.argv[1]))
f = {x["name"]: x["samples"] for e in rep["events"] for i in e["images"] for x in i["functions"]}
lm, ll = int(sys.argv[4]), int(sys.argv[5])
def one(path):
    a = json.load(open(path))
    fs = a["functions"] if isinstance(a, dict) and "functions" in a else a
    return fs[0]
leaf, mid = one(sys.argv[2]), one(sys.argv[3])
for a in (leaf, mid):
    if a.get("inlined") is not True or a.get("inlined_into") != ["hot_loop"]:
        print("%s: inlined %r, inlined_into %r" % (a["name"], a.get("inlined"), a.get("inlined_into"))); sys.exit(1)
lines = lambda a: {l["line"]: l["samples"] for l in a["lines"]}
if leaf["samples"] != f["leaf_mix"] or lines(leaf).get(ll) != f["leaf_mix"]:
    print("leaf_mix: %d samples, line %d %s; the report: %d" % (leaf["samples"], ll, lines(leaf).get(ll), f["leaf_mix"])); sys.exit(1)
# mid_mix holds leaf_mix (and the workload's clock) inlined: annotate counts
# them with it (inclusive), the report's rows each on its own (self)
inc = f["mid_mix"] + f["leaf_mix"]
if not inc <= mid["samples"] <= inc + max(2, inc // 100):
    print("mid_mix: annotate has %d samples, the report's mid_mix and leaf_mix %d and %d" % (mid["samples"], f["mid_mix"], f["leaf_mix"])); sys.exit(1)
# its own time is its loop's line; a sample or two can fall on the calls of
# the clock around it (lines of mid_mix too)
if not 0.98 * f["mid_mix"] <= lines(mid).get(lm, 0) <= f["mid_mix"]:
    print("mid_mix: line %d has %s, the report's mid_mix %d" % (lm, lines(mid).get(lm), f["mid_mix"])); sys.exit(1)
print("leaf_mix %d, mid_mix line %d: %d" % (leaf["samples"], lm, lines(mid)[lm]))
PY
	note "$(cat ann.out)"
	"$TALLY" annotate -i ic.db --samples leaf_mix >leaf.txt 2>&1 || fail "annotate leaf_mix (text): $(cat leaf.txt)"
	grep -Eq "^# leaf_mix \(inlined\)  \[inline_chain\]  .*, inlined into hot_loop$" leaf.txt || fail "annotate leaf_mix: header: $(head -3 leaf.txt)"
	grep -Eq "^ +[0-9]+ +100\.00% +$ll  " leaf.txt || fail "annotate leaf_mix: line $ll does not have all its samples: $(cat leaf.txt)"
}
subtest "annotate an inlined function: its lines, the report's samples" inlined

two_places() {
	[[ -x $WORKLOADS/cxxsplit ]] || skip "the C++ workload was not built (no C++ compiler when meson set the build up: Debian package g++)"
	tally_ok record -F 2000 -o cx.db -- "$WORKLOADS/cxxsplit" 1000
	report_json cx.json -i cx.db --symbols --image cxxsplit
	"$TALLY" annotate -i cx.db --samples --json ns_a::compare >cmp.json 2>cmp.err || fail "annotate ns_a::compare failed: $(cat cmp.err)"
	python3 - cx.json cmp.json <<'PY' >cmp.out || fail "annotate ns_a::compare: $(cat cmp.out)"
import json, sys
rep = json.load(open(sys.argv[1]))
want = sum(x["samples"] for e in rep["events"] for i in e["images"] for x in i["functions"] if x["name"] == "ns_a::compare")
a = json.load(open(sys.argv[2]))
f = (a["functions"] if isinstance(a, dict) and "functions" in a else a)[0]
into = sorted(f.get("inlined_into") or [])
print("samples %d (report %d), inlined into %s" % (f["samples"], want, into))
ok = f["samples"] == want and into == ["ns_b::again(int, double*)", "ns_b::mix(int, double*, double*)"]
ok = ok and sum(l["samples"] for l in f["lines"]) == want
sys.exit(0 if ok else 1)
PY
	note "$(cat cmp.out)"
}
subtest "annotate an inlined function inlined in two places: both, summed" two_places
