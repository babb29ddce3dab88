#!/bin/bash
# tally report --html on callsplit (leaf reached through caller_a and
# caller_b, 3:1 by the workload's own clock), opened in headless Chromium:
# the function table (read through the DOM) gives the measured split and the
# same counts as `report --children --json`, sorts on a click, the image
# table adds up to the session's samples, a click on a flame-graph frame
# zooms (widths change), the callers' graph puts leaf's callers under it, the
# search box highlights, the hottest function's source line carries its
# samples, the session and unwind figures are there, the screenshot shows the
# graphs, and the page loads nothing (CSP, no request).  A database without
# stacks gives the flat tables and says why there is no flame graph.  The
# pages whose figures are checked against the session's samples are made with
# --samples; the default page says its values are weighted by period.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 400
cp out cs.truth
# its calls are picked at random, one of two: 3:1 of the time within their scatter
SHARE_OF=calls share_near "$(truth caller_a cs.truth)" "$(info_val calls cs.truth)" 75 "the workload's own caller_a share"
tally_ok report -i cs.db --html report.html --samples
[[ -s report.html ]] || fail "no report.html"
[[ ! -s out ]] || fail "report --html printed on stdout: $(head -c 300 out)"
report_json children.json -i cs.db --children --samples
tally_ok report -i cs.db --html weighted.html
grep -q 'Values: nanoseconds, each sample weighted by its period' weighted.html || fail "the default page does not say its values are weighted by period"
grep -q 'Values: samples' report.html || fail "the --samples page does not say its values are samples"

# self-contained: no outside reference, a CSP that allows none
self_contained() {
	python3 - report.html <<'EOF' || fail "report.html is not self-contained (above)"
import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
refs = re.findall(r"""<(?:script|link|img|iframe|object|embed)\b[^>]*\b(?:src|href)\s*=|@import|url\((?!data:)|https?://(?!www\.w3\.org/2000/svg)""", t)
if refs:
    sys.exit("outside references: %s" % refs[:5])
if "Content-Security-Policy\" content=\"default-src 'none'" not in t:
    sys.exit("no Content-Security-Policy that forbids loading anything")
print("ok: no outside references, and a CSP of default-src 'none'")
EOF
}

# in Chromium: tables, sorting, zoom, callers, search, source, nothing loaded
in_chromium() {
	need_browser
	python3 - "$TMP" report.html cs.truth cs.db children.json <<'EOF' || fail "report.html in Chromium (above)"
import json, os, re, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser, count_pixels
import shares
tmp, page, truthfile, db, cj = sys.argv[1:6]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
session = dict(l.rstrip("\n").split(": ", 1) for l in open(db + "/session") if ": " in l)
nsamples = int(session["samples"])
children = {f["name"]: f for f in json.load(open(cj))["events"][0]["functions"]}
errs = []

def check(cond, what):
    if cond:
        print("ok: " + what)
    else:
        errs.append(what)

TABLE = """(function (sel) {
  var t = document.querySelector(sel), rows = [];
  Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
    var o = {};
    Array.prototype.forEach.call(r.cells, function (c) {
      var k = c.className.split(" ").filter(function (x) { return x !== "n"; })[0] || "";
      o[k] = c.hasAttribute("data-v") ? Number(c.getAttribute("data-v")) : c.textContent;
    });
    rows.push(o);
  });
  return rows;
})"""
FR = """(function (id, name) {
  var out = [];
  document.getElementById(id).tallyFlame.frames.forEach(function (f) {
    if (name !== null && f.name !== name) return;
    var r = f.rect.getBoundingClientRect();
    out.push({name: f.name, d: f.d, c: f.c, x: r.x, y: r.y, w: r.width, h: r.height, cls: f.g.getAttribute("class")});
  });
  return out;
})"""

def frames(b, gid, name=None):
    return b.eval(FR + '("%s", %s)' % (gid, "null" if name is None else '"%s"' % name))

with Browser(tmp, width=1400, height=1000) as b:
    url = "file://" + os.path.abspath(page)
    b.open(url)
    b.screenshot(os.path.join(tmp, "report.png"))
    check(b.requests == [url], "the page loaded nothing else: %s" % b.requests)
    check(not b.errors, "no script errors: %s" % b.errors)

    # the function table
    rows = b.eval(TABLE + '("table.functions")')
    by = {r["fn"]: r for r in rows if r.get("img") == "callsplit_fp"}
    for f in ("caller_a", "caller_b"):
        if f not in by:
            errs.append("no row for %s in the function table" % f)
            continue
        check(*shares.check("the table's inclusive %% of %s" % f, by[f]["inclp"], truth[f], nsamples))
    for f in ("leaf", "caller_a", "caller_b", "main"):
        r, c = by.get(f), children.get(f)
        check(r is not None and c is not None and r["self"] == c["self"] and r["incl"] == c["inclusive"],
              "%s: self %s, inclusive %s in the page; report --children says %s, %s" %
              (f, r and r["self"], r and r["incl"], c and c["self"], c and c["inclusive"]))
    check(by.get("leaf", {}).get("selfp", 0) > 90, "leaf has most self samples (%s%%)" % by.get("leaf", {}).get("selfp"))
    # sorting: a click on "self" sorts by it, high to low, a second one low to high
    hdr = b.eval("""(function(){var r=[];Array.prototype.forEach.call(document.querySelector('table.functions').tHead.rows[0].cells,function(c){var b=c.getBoundingClientRect();r.push([c.textContent,b.x+b.width/2,b.y+b.height/2])});return r})()""")
    selfh = [h for h in hdr if h[0] == "self"][0]
    b.click(selfh[1], selfh[2])
    s1 = [r["self"] for r in b.eval(TABLE + '("table.functions")')]
    check(s1 == sorted(s1, reverse=True) and s1 != [r["self"] for r in rows], "a click on 'self' sorts by self samples, high to low")
    b.click(selfh[1], selfh[2])
    s2 = [r["self"] for r in b.eval(TABLE + '("table.functions")')]
    check(s2 == sorted(s2), "a second click sorts low to high")

    # images: they add up to the session's samples
    im = b.eval(TABLE + '("table.images")')
    check(sum(r["samples"] for r in im) == nsamples, "the image table adds up to the session's %d samples" % nsamples)

    # the flame graph: the callers' widths, then a click on caller_b zooms
    # (a stack that stopped early may hold a caller out of place: the widest counts)
    a, bb = frames(b, "flame-0", "caller_a"), frames(b, "flame-0", "caller_b")
    if not a or not bb:
        errs.append("flame graph: %d caller_a and %d caller_b frames" % (len(a), len(bb)))
    else:
        a, bb = max(a, key=lambda f: f["c"]), max(bb, key=lambda f: f["c"])
        share = 100.0 * a["w"] / (a["w"] + bb["w"])
        check(*shares.check("flame graph: caller_a's share of the callers' width", share, truth["caller_a"], a["c"] + bb["c"]))
        b.eval("document.getElementById('flame-0').scrollIntoView()")
        bb = max(frames(b, "flame-0", "caller_b"), key=lambda f: f["c"])
        b.click(bb["x"] + bb["w"] / 2, bb["y"] + bb["h"] / 2)
        z = max(frames(b, "flame-0", "caller_b"), key=lambda f: f["c"])
        check(z["w"] > bb["w"] * 2, "a click on caller_b widens it from %.0f to %.0f px" % (bb["w"], z["w"]))
        check("hide" in max(frames(b, "flame-0", "caller_a"), key=lambda f: f["c"])["cls"], "and hides caller_a")
        b.screenshot(os.path.join(tmp, "flame-zoomed.png"), full=False)
        b.eval("document.querySelector('.tools[data-for=\"flame-0\"] button.reset').click()")
        check(abs(max(frames(b, "flame-0", "caller_a"), key=lambda f: f["c"])["w"] - a["w"]) < 0.2, "the reset button unzooms")
        # the search box
        m = b.eval("""(function(){var i=document.querySelector('.tools[data-for="flame-0"] input'); i.value='caller_a'; i.dispatchEvent(new Event('input')); return document.querySelector('.tools[data-for="flame-0"] .matched').textContent})()""")
        # the page rounds halves up (JavaScript's toFixed), Python's %.2f to even: the
        # figure must be the share to two decimals, either way of an exact half
        want = 100.0 * a["c"] / nsamples
        got = re.fullmatch(r"matched (\d+\.\d\d)%", m or "")
        check(got is not None and abs(float(got.group(1)) - want) <= 0.005 + 1e-9,
              "searching caller_a reads %r (expected the share %.4f%% to two decimals)" % (m, want))
        check({f["name"] for f in frames(b, "flame-0") if "match" in f["cls"]} == {"caller_a"}, "and highlights caller_a only")

    # the callers' graph: leaf at the bottom level, its callers under it 3:1
    lf = [f for f in frames(b, "callers-0", "leaf") if f["d"] == 1]
    ca = [f for f in frames(b, "callers-0", "caller_a") if f["d"] == 2 and lf and f["x"] >= lf[0]["x"] and f["x"] < lf[0]["x"] + lf[0]["w"]]
    cb = [f for f in frames(b, "callers-0", "caller_b") if f["d"] == 2 and lf and f["x"] >= lf[0]["x"] and f["x"] < lf[0]["x"] + lf[0]["w"]]
    if len(lf) != 1 or len(ca) != 1 or len(cb) != 1:
        errs.append("callers graph: expected leaf at level 1 and caller_a, caller_b at level 2, got %d %d %d" % (len(lf), len(ca), len(cb)))
    else:
        check(lf[0]["y"] < ca[0]["y"], "callers graph: leaf's callers are drawn under it")
        share = 100.0 * ca[0]["c"] / (ca[0]["c"] + cb[0]["c"])
        check(*shares.check("callers graph: caller_a's share of leaf's samples", share, truth["caller_a"], ca[0]["c"] + cb[0]["c"]))

    # the annotated source of leaf: its hot line is the spin loop
    hot = b.eval("""(function(){var o=[];document.querySelectorAll('h4.annotated').forEach(function(h){var t=h.nextElementSibling;while(t&&t.tagName!=='TABLE'&&t.tagName!=='H4')t=t.nextElementSibling;var best=null;if(t&&t.tagName==='TABLE')t.querySelectorAll('tr.hot').forEach(function(r){var v=Number(r.cells[1].getAttribute('data-v'));if(!best||v>best[0])best=[v,r.cells[2].textContent,Number(r.cells[0].textContent)]});o.push([h.textContent,best])});return o})()""")
    leafs = [h for h in hot if h[0].startswith("leaf ")]
    check(leafs and leafs[0][1] and "WL_SPIN" in leafs[0][1][1] and leafs[0][1][0] >= 0.9 * children["leaf"]["self"],
          "the annotated source of leaf has its samples on the WL_SPIN line: %s" % (leafs[:1],))

    # session and unwind figures
    meta = b.eval("""(function(){var o={};var d=document.querySelectorAll('dl.meta dt');d.forEach(function(t){o[t.textContent]=t.nextElementSibling.textContent});return o})()""")
    check(meta.get("samples") == session["samples"] and meta.get("command") == session["command"],
          "the session metadata shows samples %s and the command" % meta.get("samples"))
    lost = b.eval("document.querySelector('p.lost').textContent")
    check(lost.startswith("Lost: %s samples" % session["lost"]), "the lost-sample figure: %r" % lost)
    uw = b.eval("document.querySelector('p.unwind').textContent")
    exp = children and json.load(open(cj))["events"][0]["unwind"]["rooted_percent"]
    check(("%.2f%%" % exp) in uw, "the unwind figure %r has the %.2f%% of report --children" % (uw, exp))

    # the screenshot: the flame graph in the program's colours
    r = b.eval("(function(){var r=document.getElementById('flame-0').getBoundingClientRect();return [r.x+scrollX,r.y+scrollY,r.width,r.height]})()")
    b.screenshot(os.path.join(tmp, "flame-part.png"), clip=r)
    n = count_pixels(os.path.join(tmp, "flame-part.png"), lambda r_, g, b_: r_ >= 200 and 55 <= g <= 195 and b_ <= 55)
    check(n > 3000, "the screenshot shows the program's frames (%d sampled pixels of their colours)" % n)

if errs:
    print("; ".join(errs))
    sys.exit(1)
EOF
}

# without stacks: flat tables, and the flame sections say what is missing
flat() {
	tally_ok record -F 2000 -o flat.db -- "$WORKLOADS/split_funcs" 400
	cp out flat.truth
	tally_ok report -i flat.db --html flat.html
	report_json flat.json -i flat.db --symbols --samples
	need_browser
	python3 - "$TMP" flat.html flat.truth "$(tjson flat.json shares func work_a work_b work_c | awk '{ s += $3 } END { print s }')" <<'EOF' || fail "flat.html in Chromium (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
import shares
tmp, page, truthfile, n_samples = sys.argv[1:5]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
with Browser(tmp) as b:
    b.open("file://" + os.path.abspath(page))
    b.screenshot(os.path.join(tmp, "flat.png"))
    r = b.eval("""(function(){return {graphs: document.querySelectorAll('svg.tally-flame').length,
        note: (document.querySelector('p.nostacks')||{}).textContent || '',
        incl: document.querySelectorAll('table.functions td.incl').length,
        rows: Array.prototype.map.call(document.querySelectorAll('table.functions tbody tr'), function(t){return [t.cells[0].textContent, Number(t.cells[2].getAttribute('data-v'))]})}})()""")
    errs = []
    if r["graphs"]:
        errs.append("%d flame graphs for a database without stacks" % r["graphs"])
    if "no call stacks" not in r["note"] or "-g" not in r["note"]:
        errs.append("the flame section does not say the stacks are missing and how to get them: %r" % r["note"])
    if r["incl"]:
        errs.append("inclusive figures without stacks")
    rows = dict(r["rows"])
    names = [n for n in truth if n in rows]
    if len(names) < 2:
        errs.append("the function table lacks the workload's functions %s: %s" % (sorted(truth), sorted(rows)[:10]))
    else:
        tot = sum(rows[n] for n in names)
        for n in names:
            ok, msg = shares.check("flat table: %s's share of the workload's functions" % n, 100.0 * rows[n] / tot, truth[n], int(n_samples))
            if ok:
                print("ok: " + msg)
            else:
                errs.append(msg)
    if b.errors:
        errs.append("script errors: %s" % b.errors)
    if errs:
        print("; ".join(errs))
        sys.exit(1)
    print("ok: without stacks the page has the flat tables and says why there is no flame graph")
EOF
}

# --percent-limit folds the flame graph's small frames into "other"
fold() {
	tally_ok report -i cs.db --html fold.html --percent-limit 30 --samples
	python3 - fold.html "$(session_key cs.db samples)" <<'EOF' || fail "--percent-limit 30 (above)"
import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
total = int(sys.argv[2])
svg = t[t.index('id="flame-0"'):]
svg = svg[:svg.index("</svg>")]
fr = re.findall(r'<g class="f" data-x="(\d+)" data-c="(\d+)" data-d="(\d+)"><title>([^\n<]*)', svg)
small = [(n, c) for _, c, d, n in fr if int(c) * 100 < 30 * total and n != "other"]
if small:
    sys.exit("frames under 30%% that were not folded: %s" % small[:5])
if not any(n == "other" for _, _, _, n in fr):
    sys.exit("no 'other' frame at --percent-limit 30 though caller_b holds about 25%")
print("ok: --percent-limit 30 folds caller_b and the other small frames into 'other' (%d frames left)" % len(fr))
EOF
}

subtest "a self-contained page" self_contained
subtest "in Chromium: tables, zoom, callers, search, source, nothing loaded" in_chromium
subtest "in Chromium: a database without stacks" flat
subtest "--percent-limit folds small frames into 'other'" fold

if [[ -n ${TALLY_KEEP_SCREENSHOTS:-} ]] && ls "$TMP"/*.png >/dev/null 2>&1; then
	mkdir -p "$TALLY_KEEP_SCREENSHOTS" && cp "$TMP"/*.png "$TALLY_KEEP_SCREENSHOTS"/
fi
