#!/bin/bash
# The text, the JSON and the HTML page of a report list the same rows with
# the same counts (one view model, lib/report/view.c, renders all three):
# images (per process with --per-pid), functions (--symbols; the HTML table
# without stacks), source lines (--lines; text and JSON), and with stacks the call-graph functions (--children; the
# HTML table's self and inclusive), on workloads with a known split, which
# all three give.  The call-graph views select stacks by --image as the page
# does (they ignored it).  Every early return of `tally report` frees what it
# took (under ASan, make check-asan, a leak there fails this test).  The
# renderings are compared in samples (--samples): the text shows weighted
# time rounded to a tenth of a millisecond, which cannot equal a count.
. "$SRCDIR/tests/e2e/lib.sh"

# agree KIND TEXT JSON HTML: the three renderings of one database list the
# same rows (KIND: images, functions, children, functions-per-pid; lines:
# text and JSON only, the page has no line table).
agree() {
	python3 - "$@" <<'EOF' || fail "$1: the renderings disagree (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
import report_rows as rr
kind, text, js, page = sys.argv[1:5]
doc = rr.json_report(js)
tables = rr.html_tables(page)
errs = []

def same(what, a, b):
    if a != b:
        errs.append("%s:\n    %s\n    %s" % (what, a, b))

for ev in sorted(tables):
    h = tables[ev]
    if kind == "lines":
        t = rr.text_lines(text, rr.json_images(doc))[ev]
        j = rr.json_lines(doc)[ev]
        same(ev + ": line rows, text vs JSON", t, j)
        if not any(r["file"] for r in t):
            errs.append(ev + ": no row has a source line: the test proves nothing")
        n = len(t)
    elif kind == "images":
        t = rr.text_images(text)[ev]
        j = [dict(name=r["name"], pid=r["pid"], samples=r["samples"]) for r in rr.json_images(doc)[ev]]
        same(ev + ": image rows, text vs JSON", t, j)
        same(ev + ": image rows, text vs HTML", t, h["images"])
        n = len(t)
    elif kind in ("functions", "functions-per-pid"):
        t = rr.text_functions(text, rr.json_images(doc))[ev]
        j = rr.json_functions(doc)[ev]
        key = lambda r: (r["image"], r["pid"], r["name"], r["addr"] or "", r["samples"])
        same(ev + ": function rows, text vs JSON", sorted(map(key, t)), sorted(map(key, j)))
        # the page's table sums a function over the processes of its image
        summed = {}
        for r in t:
            k = (r["image"], r["name"], r["addr"] or "")
            summed[k] = summed.get(k, 0) + r["samples"]
        page = {(r["image"], r["name"], r["addr"] or ""): r["samples"] for r in h["functions"]}
        same(ev + ": function rows, text vs HTML", sorted(summed.items()), sorted(page.items()))
        if kind == "functions-per-pid" and len(t) <= len(summed):
            errs.append("%s: no function is in several processes (%d rows): the test proves nothing" % (ev, len(t)))
        n = len(t)
    elif kind == "children":
        t = rr.text_children(text)[ev]
        j = rr.json_children(doc)[ev]
        total = next(e["samples"] for e in doc["events"] if e["name"] == ev)
        pct = lambda n: "%.2f" % (100.0 * n / total if total else 0.0)
        tt = [(r["image"], r["name"], r["incl"], r["self_pct"]) for r in t]
        same(ev + ": call-graph rows, text vs JSON", tt, [(r["image"], r["name"], r["incl"], pct(r["self"])) for r in j])
        same(ev + ": call-graph rows, JSON vs HTML", [(r["image"], r["name"], r["incl"], r["self"]) for r in j],
             [(r["image"], r["name"], r["incl"], r["self"]) for r in h["functions"]])
        n = len(t)
    if not errs:
        print("ok: %s, event %s: %d rows alike in text, JSON%s" % (kind, ev, n, "" if kind == "lines" else " and HTML"))
if not tables:
    errs.append("no event section in the page")
if errs:
    print("\n".join(errs))
    sys.exit(1)
EOF
}

# html_page DB ARGS...: DB.html with every row (--percent-limit 0)
html_page() {
	local db=$1
	shift
	tally_ok report -i "$db" --html "$db.html" --percent-limit 0 --samples "$@"
	[[ ! -s $TMP/out ]] || fail "report --html printed on stdout"
}

# --- flat profiles: split_funcs, work_a:work_b:work_c 6:3:1 ---
tally_ok record -F 2000 -o flat.db -- "$WORKLOADS/split_funcs" 400
cp out flat.truth
report_text flat.txt -i flat.db --samples
report_json flat.json -i flat.db --samples
report_text flat-f.txt -i flat.db --samples --symbols
report_json flat-f.json -i flat.db --samples --symbols
html_page flat.db
agree images flat.txt flat.json flat.db.html
agree functions flat-f.txt flat-f.json flat.db.html
report_text flat-l.txt -i flat.db --samples --lines
report_json flat-l.json -i flat.db --samples --lines
agree lines flat-l.txt flat-l.json flat.db.html
python3 - flat.db.html flat.truth <<'EOF' || fail "the page's function table against the workload's split (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
import report_rows as rr
import shares
page, truthfile = sys.argv[1:3]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
rows = {r["name"]: r["samples"] for r in rr.html_tables(page)["cpu-clock"]["functions"] if r["image"] == "split_funcs"}
tot = sum(rows.get(n, 0) for n in truth)
bad = 0
for n in sorted(truth):
    ok, msg = shares.check("%s of the three" % n, 100.0 * rows.get(n, 0) / tot if tot else None, truth[n], tot)
    print(("ok: " if ok else "FAIL: ") + msg)
    bad += not ok
sys.exit(1 if bad else 0)
EOF

# --- call stacks: callsplit_fp, leaf through caller_a and caller_b 3:1 ---
tally_ok record -g -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 400
cp out cs.truth
report_text cs.txt -i cs.db --samples
report_json cs.json -i cs.db --samples
report_text cs-c.txt -i cs.db --samples --children
report_json cs-c.json -i cs.db --samples --children
html_page cs.db
agree images cs.txt cs.json cs.db.html
agree children cs-c.txt cs-c.json cs.db.html
for f in caller_a caller_b; do
	t=$(truth $f cs.truth)
	read -r incl n < <(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["events"][0]
print(["%.2f" % (100.0 * f["inclusive"] / e["samples"]) for f in e["functions"] if f["name"] == sys.argv[2]][0], e["samples"])' cs-c.json $f)
	share_near "$incl" "$n" "$t" "$f inclusive % (text, JSON and HTML alike)"
done

# the call-graph views take --image as the page does: the stacks sampled in it
tally_ok record -g -F 2000 -o img.db -- "$WORKLOADS/split_images" 300
for img in libtallywork.so split_images; do
	report_text img-c.txt -i img.db --samples --children --image $img
	report_json img-c.json -i img.db --samples --children --image $img
	report_json img-i.json -i img.db --samples --image $img
	html_page img.db --image $img
	agree children img-c.txt img-c.json img.db.html
	python3 - img-c.json img-i.json $img <<'EOF' || fail "--children --image $img (above)"
import json, sys
cg, flat, img = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
n_cg, n_flat = cg["events"][0]["samples"], flat["events"][0]["samples"]
leaf = {f["image"] for f in cg["events"][0]["functions"] if f["self"]}
if n_cg != n_flat or leaf - {img} or n_cg == 0:
    sys.exit("--children --image %s: %d samples in functions of %s; the image summary has %d" %
             (img, n_cg, sorted(leaf), n_flat))
print("ok: --children --image %s: %d samples, all sampled in %s, as the summary's %d" % (img, n_cg, img, n_flat))
EOF
done

# --- one profile per process: forker's children run the same functions ---
# two processes running the same functions: rows per process that the page sums
tally_ok record --per-pid -F 2000 -o pp.db -- sh -c "'$WORKLOADS/split_funcs' 200 & '$WORKLOADS/split_funcs' 200 & wait"
report_text pp.txt -i pp.db --samples
report_json pp.json -i pp.db --samples
report_text pp-f.txt -i pp.db --samples --symbols
report_json pp-f.json -i pp.db --samples --symbols
html_page pp.db
agree images pp.txt pp.json pp.db.html
agree functions-per-pid pp-f.txt pp-f.json pp.db.html

# --- every early return frees what it took (ASan's leak check sees it) ---
mkdir dir scandir
cp "$WORKLOADS/split_funcs" scandir/
tally_ok scan -o m.map scandir
keep=(--image-path dir --debug-dir dir --image-path dir --debug-dir dir)
expect_fail_with "no database at 'nosuch.db'" "$TALLY" report -i nosuch.db "${keep[@]}"
expect_fail_with "no database at 'nosuch.db'" "$TALLY" report -i nosuch.db --mapfile m.map "${keep[@]}"
expect_fail_with "invalid --top" "$TALLY" report -i flat.db --top 0 "${keep[@]}"
expect_fail_with "invalid --percent-limit" "$TALLY" report -i flat.db --percent-limit x "${keep[@]}"
expect_fail_with "invalid --debuginfod-timeout" "$TALLY" report -i flat.db --debuginfod-timeout 0 "${keep[@]}"
expect_fail_with "--pid" "$TALLY" report -i flat.db --pid 0 "${keep[@]}"
expect_fail_with "--since" "$TALLY" report -i flat.db --since junk "${keep[@]}"
expect_fail_with "option .--bogus. is unknown" "$TALLY" report -i flat.db --bogus "${keep[@]}"
expect_fail_with "unexpected argument 'extra'" "$TALLY" report -i flat.db extra "${keep[@]}"
expect_fail_with "--html makes the whole report" "$TALLY" report -i flat.db --html x.html --json "${keep[@]}"
expect_fail_with "cannot write 'nodir/x.html'" "$TALLY" report -i flat.db --html nodir/x.html --mapfile m.map "${keep[@]}"
expect_fail_with "cannot read --vmlinux" "$TALLY" report -i flat.db --vmlinux nosuch --mapfile m.map "${keep[@]}"
expect_fail_with "event 'nosuch' is not in" "$TALLY" report -i flat.db --event nosuch --mapfile m.map "${keep[@]}"
expect_fail_with "give one of" "$TALLY" report -i flat.db --symbols --lines --mapfile m.map "${keep[@]}"
expect_fail_with "has no call stacks" "$TALLY" report -i flat.db --children --mapfile m.map "${keep[@]}"
expect_fail_with "no image 'nosuch' in" "$TALLY" report -i flat.db --explain nosuch --mapfile m.map "${keep[@]}"
[[ $("$TALLY" report "${keep[@]}" --help | head -1) == "usage: tally report"* ]] || fail "report --help"
