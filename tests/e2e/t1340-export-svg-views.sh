#!/bin/bash
# tally export --format svg of a known shape (tests/e2e/gen-stacksdb.py):
# main calls parse, eval and emit; hash is called from all three and calls mix
# from two of them; one 1-sample stack is 195 frames deep.  The graph is where
# the eye lands (root at the top, search beside it, the deep thin stack does
# not make the picture tall), frames under a pixel are hidden with a button
# to show them, and in headless Chromium a selected function's sandwich (its
# callers above, its callees below, merged over its three places), focus and
# ignore give the figures worked out here from the same stacks, and Reset
# view undoes them.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-shape.sh"

shape_db s.db
tally_ok export -i s.db --format svg -o s.svg

# without a script: a short picture, root at the top, the deep column hidden
static() {
	python3 - s.svg <<'EOF' || fail "the SVG's markup (above)"
import sys
import xml.etree.ElementTree as ET
N = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
errs = []
h = int(root.get("height"))
# all, _start, main, parse|eval|emit|deep, lex|hash|work, mix: 6 rows of 16 px
# under the 96 px of controls, and the legend: nothing for the deep column
if h > 96 + 6 * 16 + 30:
    errs.append("the SVG is %d px tall: the hidden deep column still counts" % h)
fr = {}
for g in root.iter(N + "g"):
    if "f" in (g.get("class") or "").split():
        name = g.find(N + "title").text.split("\n")[0]
        fr.setdefault(name, []).append((int(g.get("data-d")), float(g.find(N + "rect").get("y")), g.get("class")))
if fr["all"][0][1] > 100:
    errs.append("the root frame is drawn at y %g, not at the top" % fr["all"][0][1])
if not fr["main"][0][1] < fr["parse"][0][1] < fr["lex"][0][1]:
    errs.append("callees are not drawn under their callers: main %g, parse %g, lex %g" % (fr["main"][0][1], fr["parse"][0][1], fr["lex"][0][1]))
tiny = [n for n, v in fr.items() if any("tiny" in c for _, _, c in v)]
if len(tiny) != 193 or "rec_191" not in tiny or "deep" not in tiny:
    errs.append("expected deep and rec_000..rec_191 (193 frames under a pixel) marked tiny, got %d: %s" % (len(tiny), tiny[:4]))
if any("tiny" in c for n in ("main", "hash", "mix", "emit") for _, _, c in fr[n]):
    errs.append("a frame wider than a pixel is marked tiny")
btn = [t for t in root.iter(N + "text") if "tinies" in (t.get("class") or "")]
if not btn or "193" not in btn[0].text:
    errs.append("no button offers the 193 hidden frames: %s" % [b.text for b in btn])
search = [t for t in root.iter(N + "text") if "search" in (t.get("class") or "").split()]
if not search or float(search[0].get("y")) > 100:
    errs.append("Search is not at the top, by the graph")
if errs:
    sys.exit("; ".join(errs))
print("ok: %d px tall, root at the top, 193 frames under a pixel hidden, a button to show them" % h)
EOF
}

views() {
	need_browser
	python3 - "$TMP" s.svg stacks.txt <<'EOF' || fail "the SVG's views in Chromium (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
tmp, svg, stackfile = sys.argv[1:4]
stacks = []
for l in open(stackfile):
    fr, c = l.rsplit(" ", 1)
    stacks.append((fr.split(";"), int(c)))
total = sum(c for _, c in stacks)
errs = []

def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        errs.append(what)

# the oracle: what each view holds, from the stacks themselves
def through(fn):
    return [(f, c) for f, c in stacks if fn in f]

def callers_of(fn):
    # path from fn's outermost place down to the root, nearest caller first: name -> samples at level 1
    out = {}
    for f, c in through(fn):
        i = f.index(fn)
        if i > 0:
            out[f[i - 1]] = out.get(f[i - 1], 0) + c
    return out

def callees_of(fn):
    out = {}
    for f, c in through(fn):
        i = f.index(fn)
        if i + 1 < len(f):
            out[f[i + 1]] = out.get(f[i + 1], 0) + c
    return out

FR = """(function () {
  var fg = document.documentElement.tallyFlame, out = [];
  fg.view().forEach(function (f) {
    var r = f.rect.getBoundingClientRect(), cls = f.g.getAttribute("class") || "";
    out.push({name: f.name, d: f.d, dir: f.dir, c: f.c, x: r.x, y: r.y, w: r.width, h: r.height, cls: cls,
              shown: cls.indexOf("hide") < 0 && r.width > 0});
  });
  return out;
})()"""

def view(b):
    return b.eval(FR)

def shown(b, name):
    return [f for f in view(b) if f["name"] == name and f["shown"]]

def click_text(b, sel):
    r = b.eval("(function(){var e=document.querySelector('%s');var r=e.getBoundingClientRect();return [r.x+r.width/2,r.y+r.height/2,getComputedStyle(e).display]})()" % sel)
    check(r[2] != "none", "the %s control is shown" % sel)
    b.click(r[0], r[1])

with Browser(tmp, width=1200, height=800) as b:
    b.open("file://" + os.path.abspath(svg))
    check(b.eval("!!document.documentElement.tallyFlame"), "the script ran")
    # where the eye lands: the root and Search on the first screen, no scrolling needed
    allf = shown(b, "all")[0]
    s = b.eval("(function(){var r=document.querySelector('text.search').getBoundingClientRect();return [r.y, document.documentElement.getBoundingClientRect().height]})()")
    check(allf["y"] < 150 and s[0] < 50, "the root frame (y %.0f) and Search (y %.0f) open on the first screen" % (allf["y"], s[0]))
    check(s[1] < 800, "the page is %.0f px tall, inside the 800 px window" % s[1])
    check(not shown(b, "rec_100") and not shown(b, "deep"), "the 1-sample column 195 deep is hidden")
    b.screenshot(os.path.join(tmp, "views-open.png"), full=False)

    # show the tiny frames, then hide them again
    click_text(b, "text.tinies")
    r191 = shown(b, "rec_191")
    check(len(r191) == 1 and r191[0]["y"] > allf["y"] + 190 * 16, "shown, rec_191 stands 195 rows under the root (y %s)" % [f["y"] for f in r191])
    h = b.eval("document.documentElement.getBoundingClientRect().height")
    check(h > 195 * 16, "and the picture grows to hold it (%.0f px)" % h)
    click_text(b, "text.tinies")
    check(not shown(b, "rec_191"), "hidden again")

    # select hash (click its widest frame), then Sandwich
    hs = max(shown(b, "hash"), key=lambda f: f["w"])
    b.click(hs["x"] + hs["w"] / 2, hs["y"] + hs["h"] / 2)
    check("hash:" in b.eval("document.querySelector('.selbar .name').textContent"), "a click selects hash")
    click_text(b, ".selbar .sandwich")
    v = view(b)
    nhash = sum(c for f, c in through("hash"))
    mid = [f for f in v if f["name"] == "hash" and f["d"] == 0]
    check(len(mid) == 1 and mid[0]["c"] == nhash and abs(mid[0]["w"] - 1180) < 1,
          "the sandwich's middle row is hash with all its %d samples, full width: %s" % (nhash, [(f["c"], round(f["w"])) for f in mid]))
    want_callers, want_callees = callers_of("hash"), callees_of("hash")
    got_callers = {f["name"]: f["c"] for f in v if f["dir"] < 0 and f["d"] == 1}
    got_callees = {f["name"]: f["c"] for f in v if f["dir"] > 0 and f["d"] == 1}
    check(got_callers == want_callers, "hash's callers, merged over its places: %s (want %s)" % (got_callers, want_callers))
    check(got_callees == want_callees, "hash's callees, merged over its places: %s (want %s)" % (got_callees, want_callees))
    if mid:
        up = [f for f in v if f["dir"] < 0 and f["shown"]]
        down = [f for f in v if f["dir"] > 0 and f["d"] > 0 and f["shown"]]
        check(up and all(f["y"] < mid[0]["y"] for f in up), "the callers stand above hash")
        check(down and all(f["y"] > mid[0]["y"] for f in down), "the callees hang below hash")
        for f in v:
            if f["dir"] < 0 and f["d"] == 1 and f["name"] == "eval":
                check(abs(f["w"] - 1180.0 * want_callers["eval"] / nhash) < 1, "eval is %.1f px, %d/%d of the width" % (f["w"], want_callers["eval"], nhash))
        # the callers' callers: main under all three, _start under main
        lvl2 = [(f["name"], f["c"]) for f in v if f["dir"] < 0 and f["d"] == 2]
        check({n for n, _ in lvl2} == {"main"} and sum(c for _, c in lvl2) == nhash,
              "main calls each of them, with all %d samples: %s" % (nhash, lvl2))
    st = b.eval("document.querySelector('text.state').textContent")
    check("sandwich of hash" in st, "the state line says so: %r" % st)
    b.screenshot(os.path.join(tmp, "views-sandwich.png"), full=False)
    # a click on a caller moves the sandwich to it
    ev = [f for f in view(b) if f["name"] == "eval" and f["shown"]]
    if ev:
        b.click(ev[0]["x"] + ev[0]["w"] / 2, ev[0]["y"] + ev[0]["h"] / 2)
        m2 = [f for f in view(b) if f["d"] == 0 and f["dir"] > 0]
        check(m2 and m2[0]["name"] == "eval", "a click on eval makes it the sandwich's middle: %s" % [f["name"] for f in m2])

    # Reset view: the graph as it opened
    click_text(b, "text.reset")
    check(b.eval("document.documentElement.tallyFlame.view() === document.documentElement.tallyFlame.frames"), "Reset view gives back the graph")
    check(b.eval("document.querySelector('text.reset').getAttribute('class').indexOf('hide') >= 0"), "and hides itself")

    # focus on eval: only the stacks through it, rescaled to them
    fe = max(shown(b, "eval"), key=lambda f: f["w"])
    b.click(fe["x"] + fe["w"] / 2, fe["y"] + fe["h"] / 2)
    click_text(b, ".selbar .focus")
    neval = sum(c for f, c in through("eval"))
    v = view(b)
    names = {f["name"] for f in v}
    check(names == {"all", "_start", "main", "eval", "hash", "mix", "work"}, "focus on eval keeps its stacks' functions only: %s" % sorted(names))
    a0 = [f for f in v if f["name"] == "all"]
    check(a0 and a0[0]["c"] == neval, "the focused graph holds eval's %d samples (%s)" % (neval, a0 and a0[0]["c"]))
    e = [f for f in v if f["name"] == "eval"]
    check(e and abs(e[0]["w"] - 1180) < 1, "eval fills the width (%.1f px)" % (e and e[0]["w"]))
    st = b.eval("document.querySelector('text.state').textContent")
    check("focus on eval" in st and ("%.2f%%" % (100.0 * neval / total)) in st, "the state line: %r" % st)

    # then ignore hash inside it: eval's stacks without hash
    hh = max(shown(b, "hash"), key=lambda f: f["w"])
    b.click(hh["x"] + hh["w"] / 2, hh["y"] + hh["h"] / 2)
    click_text(b, ".selbar .ignore")
    v = view(b)
    keep = sum(c for f, c in stacks if "eval" in f and "hash" not in f)
    check(not [f for f in v if f["name"] in ("hash", "mix")], "ignoring hash drops it and what it called")
    a0 = [f for f in v if f["name"] == "all"]
    check(a0 and a0[0]["c"] == keep, "eval's stacks without hash: %d samples (%s)" % (keep, a0 and a0[0]["c"]))

    # ignore alone, from the whole graph, with the search still counting
    click_text(b, "text.reset")
    b.eval("document.documentElement.tallyFlame.search('^lex$')")
    fg = "document.documentElement.tallyFlame"
    check(b.eval(fg + ".ignore('hash')"), "ignore hash from the whole graph")
    keep = sum(c for f, c in stacks if "hash" not in f)
    a0 = [f for f in view(b) if f["name"] == "all"]
    check(a0 and a0[0]["c"] == keep, "the graph without hash's stacks holds %d samples (%s)" % (keep, a0 and a0[0]["c"]))
    got = b.eval("document.querySelector('text.matched').textContent")
    check(("%.2f%%" % (100.0 * 750 / keep)) in got, "the search's share is of the view's samples: %r" % got)
    b.eval(fg + ".reset()")
    check(len(view(b)) == b.eval(fg + ".frames.length"), "reset: the base frames again")
    check(not b.errors, "no script errors: %s" % b.errors)
    check(b.requests == ["file://" + os.path.abspath(svg)], "nothing loaded: %s" % b.requests)
if errs:
    sys.exit("%d checks failed" % len(errs))
EOF
}

subtest "the markup: root at the top, the deep thin column hidden" static
subtest "in Chromium: tiny frames, sandwich, focus, ignore, reset" views

if [[ -n ${TALLY_KEEP_SCREENSHOTS:-} ]] && ls "$TMP"/*.png >/dev/null 2>&1; then
	mkdir -p "$TALLY_KEEP_SCREENSHOTS" && cp "$TMP"/*.png "$TALLY_KEEP_SCREENSHOTS"/
fi
