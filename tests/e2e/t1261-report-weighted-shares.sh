#!/bin/bash
# tally report is weighted by period by default: each image's share (JSON
# percent, text %) is its share of the database's weights (the .prof files'
# weights in a format-3 database; count x the session's period-mean in an
# older one), the text's column is msec with a `# values:` line saying so,
# the JSON names the unit and keeps the samples beside each value, annotate
# gives the report's value; --samples gives the sample counts as before
# (the samples column, Totals equal to the session's samples, JSON without
# values).  page-faults, whose period the kernel adapts under -F, is weighed
# in events.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -e cpu-clock,page-faults -F 999 -o db -- "$WORKLOADS/split_images" 600
report_json w.json -i db
report_json s.json -i db --samples
report_text w.txt -i db
report_text s.txt -i db --samples

# PROF_PY DB: per event and image (name), its samples and its weight, from
# the database's own files: the .prof headers' samples and, in format 3, the
# weight columns (`OFFSET COUNT WEIGHT ...`); before format 3 a weight is
# count x the session's period-mean.  Prints JSON.
PROF_PY='
import glob, json, os, sys
db = sys.argv[1]
sess = dict(l.rstrip("\n").split(": ", 1) for l in open(os.path.join(db, "session")) if ": " in l)
evs = sess["events"].split(",")
fmt = int(sess.get("format-version", "1"))
mean = [int(x) for x in sess.get("period-mean", ",".join("1" for _ in evs)).split(",")]
out = {e: {} for e in evs}
for p in glob.glob(os.path.join(db, "*.prof")):
    hdr, body = open(p).read().split("\n\n", 1)
    h = dict(l.split(": ", 1) for l in hdr.split("\n") if ": " in l)
    name = h["image"]
    for line in body.split("\n"):
        w = line.split()
        if not w:
            continue
        for i, e in enumerate(evs):
            if fmt >= 3:
                c, wt = int(w[1 + 2 * i]), int(w[2 + 2 * i])
            else:
                c = int(w[1 + i])
                wt = c * mean[i]
            s = out[e].setdefault(name, [0, 0])
            s[0] += c
            s[1] += wt
print(json.dumps({"format": fmt, "events": out}))
'
python3 -c "$PROF_PY" db >prof.json || fail "cannot read the database's .prof files"

shares() {
	python3 - w.json prof.json <<'PY' || fail "the report's shares are not the database's weights (above)"
import json, sys
r = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
errs = []
for e in r["events"]:
    per = p["events"][e["name"]]
    tw = sum(v[1] for v in per.values())
    want_unit = "ns" if e["name"] == "cpu-clock" else "events"
    if e.get("unit") != want_unit:
        errs.append("%s: unit %r, expected %s" % (e["name"], e.get("unit"), want_unit))
    if e.get("value") != tw:
        errs.append("%s: value %r, the .prof weights add up to %d" % (e["name"], e.get("value"), tw))
    if e["samples"] != sum(v[0] for v in per.values()):
        errs.append("%s: samples %r, the .prof counts add up to %d" % (e["name"], e["samples"], sum(v[0] for v in per.values())))
    for i in e["images"]:
        c, w = per[i["name"]]
        if i["samples"] != c or i["value"] != w:
            errs.append("%s %s: samples %d value %d, the .prof files %d and %d" % (e["name"], i["name"], i["samples"], i["value"], c, w))
        if abs(i["percent"] - 100.0 * w / tw) > 0.0002:
            errs.append("%s %s: %.4f%%, its weight's share is %.4f%%" % (e["name"], i["name"], i["percent"], 100.0 * w / tw))
    vals = [i["value"] for i in e["images"]]
    if vals != sorted(vals, reverse=True):
        errs.append("%s: images not by weight: %s" % (e["name"], vals))
if errs:
    print("\n".join(errs[:10]))
    sys.exit(1)
print("ok: format %d: every image's percent is its share of the weights; units %s" % (p["format"], [e["unit"] for e in r["events"]]))
PY
}

text() {
	grep -Eq '^# values: msec, weighted by period .*--samples for sample counts$' w.txt || fail "no '# values: msec, weighted by period' line: $(head -5 w.txt)"
	grep -Eq '^# values: events, weighted by period .*--samples for sample counts$' w.txt || fail "page-faults: no '# values: events, weighted by period' line: $(grep '^#' w.txt)"
	grep -Eq '^ +msec +% +cum% +image$' w.txt || fail "no 'msec  %  cum%  image' column: $(head -8 w.txt)"
	# the cpu-clock table's Total is the JSON's value in msec
	t=$(awk '/^# event: cpu-clock/ { on = 1 } on && / Total$/ { print $1; exit }' w.txt)
	v=$(python3 -c 'import json, sys; print([e["value"] for e in json.load(open(sys.argv[1]))["events"] if e["name"] == "cpu-clock"][0])' w.json)
	awk -v t="$t" -v v="$v" 'BEGIN { exit !(t != "" && t - v / 1e6 <= 0.05 && v / 1e6 - t <= 0.05) }' ||
		fail "the text's cpu-clock Total is '$t' msec, the JSON's value $v ns"
	note "text: cpu-clock Total $t msec = $v ns"
}

samples() {
	grep -Eq '^ +samples +% +cum% +image$' s.txt || fail "--samples: no 'samples  %  cum%  image' column: $(head -8 s.txt)"
	grep -Eq '^# values: samples' s.txt || fail "--samples: no '# values: samples' line"
	! grep -q 'msec' s.txt || fail "--samples shows msec: $(grep msec s.txt | head -3)"
	python3 - s.json prof.json db/session <<'PY' || fail "--samples (above)"
import json, sys
r = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
sess = dict(l.rstrip("\n").split(": ", 1) for l in open(sys.argv[3]) if ": " in l)
errs = []
for k, e in enumerate(r["events"]):
    if e.get("unit") != "samples" or "value" in e:
        errs.append("%s: unit %r, value %r" % (e["name"], e.get("unit"), e.get("value")))
    if str(e["samples"]) != sess["samples"].split(",")[sess["events"].split(",").index(e["name"])]:
        errs.append("%s: %d samples, the session %s" % (e["name"], e["samples"], sess["samples"]))
    per = p["events"][e["name"]]
    for i in e["images"]:
        if "value" in i or abs(i["percent"] - 100.0 * per[i["name"]][0] / e["samples"]) > 0.0002:
            errs.append("%s %s: %r%% of %d samples" % (e["name"], i["name"], i["percent"], i["samples"]))
    n = [i["samples"] for i in e["images"]]
    if n != sorted(n, reverse=True):
        errs.append("%s: images not by samples" % e["name"])
if errs:
    print("\n".join(errs[:10]))
    sys.exit(1)
PY
	ttext s.txt check image
	[[ $(ttext s.txt total) == "$(session_key db samples | cut -d, -f1)" ]] ||
		fail "--samples: the text's first Total is $(ttext s.txt total), the session's samples $(session_key db samples)"
}

annotate() {
	local v s
	"$TALLY" annotate -i db --json lib_work >a.json 2>a.err || fail "annotate lib_work: $(cat a.err)"
	"$TALLY" annotate -i db --json --samples lib_work >as.json 2>as.err || fail "annotate --samples lib_work: $(cat as.err)"
	report_json f.json -i db --symbols --event cpu-clock
	python3 - a.json as.json f.json <<'PY' || fail "annotate's values are not the report's (above)"
import json, sys
a, s, f = (json.load(open(p)) for p in sys.argv[1:4])
fn = [x for e in f["events"] for i in e["images"] for x in i["functions"] if x["name"] == "lib_work"][0]
af, sf = a["functions"][0], s["functions"][0]
errs = []
if a["unit"] != "ns" or af.get("value") != fn["value"]:
    errs.append("annotate: unit %r value %r, the report's value %d" % (a["unit"], af.get("value"), fn["value"]))
# the number of samples beside the value, as the report keeps it
if af.get("samples") != fn["samples"]:
    errs.append("annotate: samples %r beside the value, the report's samples %d" % (af.get("samples"), fn["samples"]))
if sum(l["value"] for l in af["lines"]) + af["no_line_value"] != af["value"]:
    errs.append("annotate: the lines' values do not add up to the function's")
if sum(l["samples"] for l in af["lines"]) + af["no_line_samples"] != af["samples"]:
    errs.append("annotate: the lines' samples do not add up to the function's")
if s["unit"] != "samples" or sf.get("samples") != fn["samples"]:
    errs.append("annotate --samples: unit %r samples %r, the report's %d" % (s["unit"], sf.get("samples"), fn["samples"]))
if errs:
    print("\n".join(errs))
    sys.exit(1)
PY
}

subtest "JSON: each image's share is its share of the database's weights" shares
subtest "text: msec, the values line, the Total" text
subtest "--samples: the sample counts, as before" samples
subtest "annotate: the report's value; --samples its samples" annotate
