#!/bin/bash
# tally export --format svg: the flame graph of callsplit (leaf reached through
# caller_a and caller_b, 3:1 by the workload's own clock), opened in headless
# Chromium: the frames' widths give the measured split, hovering shows the
# name and percentage, a click zooms (widths change) and Reset zoom undoes it,
# Search (through its prompt) highlights and reports the matched share, the
# screenshot shows the graph, and the page loads nothing from anywhere.  Also:
# names with markup, control characters and bytes that are not UTF-8 leave a
# well-formed SVG; and the refusals (no stacks, unwritable path).  The graph
# of the browser checks is exported with --samples: its figures are checked
# against the session's sample count.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 400
cp out cs.truth
# its calls are picked at random, one of two: 3:1 of the time within their scatter
SHARE_OF=calls share_near "$(truth caller_a cs.truth)" "$(info_val calls cs.truth)" 75 "the workload's own caller_a share"
tally_ok export -i cs.db --format svg --samples -o flame.svg
grep -q "wrote 'flame.svg' (svg" err || fail "export did not say what it wrote: $(cat err)"
[[ -s flame.svg ]] || fail "no flame.svg"

# self-contained: a well-formed SVG that names no outside resource (the only
# URL is the SVG namespace, which is a name, not a fetch)
self_contained() {
	python3 - flame.svg <<'EOF' || fail "flame.svg is not a self-contained SVG (above)"
import re, sys
import xml.etree.ElementTree as ET
t = open(sys.argv[1], encoding="utf-8").read()
ET.fromstring(t.encode())
bad = [m for m in re.findall(r"(?:href|src)\s*=|url\(|@import|https?://[^\"' ]*", t) if m != "http://www.w3.org/2000/svg"]
if bad:
    sys.exit("outside references in the SVG: %s" % bad[:5])
print("ok: well-formed, no outside references")
EOF
}

# in Chromium: widths, tooltips, zoom, search, nothing loaded
in_chromium() {
	need_browser
	python3 - "$TMP" flame.svg cs.truth "$(session_key cs.db samples)" <<'EOF' || fail "the SVG in Chromium (above)"
import os, re, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser, count_pixels
import shares
tmp, svg, truthfile, nsamples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
errs = []

def check(cond, what):
    if cond:
        print("ok: " + what)
    else:
        errs.append(what)

FR = """(function (name) {
  var fg = document.documentElement.tallyFlame, out = [];
  fg.frames.forEach(function (f) {
    if (name !== null && f.name !== name) return;
    var r = f.rect.getBoundingClientRect();
    out.push({name: f.name, d: f.d, c: f.c, x: r.x, y: r.y, w: r.width, h: r.height,
              cls: f.g.getAttribute("class"), title: f.g.querySelector("title").textContent,
              fill: getComputedStyle(f.rect).fill});
  });
  return out;
})"""

def frames(b, name=None):
    return b.eval(FR + "(%s)" % ("null" if name is None else '"%s"' % name))

def one(b, name):
    # (a stack that stopped early may hold a function out of place: the widest counts)
    fs = frames(b, name)
    if not fs:
        raise SystemExit("no frame %s" % name)
    return max(fs, key=lambda f: f["c"])

with Browser(tmp, width=1200, height=420) as b:
    b.open("file://" + os.path.abspath(svg))
    check(b.eval("!!document.documentElement.tallyFlame"), "the script ran (the graph is interactive)")
    allf = one(b, "all")
    check(allf["c"] == nsamples, "the bottom frame holds all %d samples (it says %d)" % (nsamples, allf["c"]))
    a, bb = one(b, "caller_a"), one(b, "caller_b")
    share = 100.0 * a["w"] / (a["w"] + bb["w"])
    check(*shares.check("caller_a's share of the two callers' width", share, truth["caller_a"], a["c"] + bb["c"]))
    check(a["d"] == bb["d"], "caller_a and caller_b stand at one level (%d, %d)" % (a["d"], bb["d"]))
    # the tooltip: name, image, samples and percentage of all
    want = "%.2f%%" % (100.0 * a["c"] / nsamples)
    check(a["title"].startswith("caller_a\nin callsplit_fp\n%d samples, %s" % (a["c"], want)),
          "caller_a's tooltip names it, its image and its %s: %r" % (want, a["title"]))
    b.hover(a["x"] + a["w"] / 2, a["y"] + a["h"] / 2)
    det = b.eval("document.querySelector('text.details').textContent")
    check("caller_a" in det and want in det, "hovering caller_a shows %r" % det)
    b.screenshot(os.path.join(tmp, "flame.png"))
    # the program's frames are drawn in its colours (red to orange)
    n = count_pixels(os.path.join(tmp, "flame.png"), lambda r, g, b_: r >= 200 and 55 <= g <= 195 and b_ <= 55)
    check(n > 3000, "the screenshot shows the program's frames (%d sampled pixels of their colours)" % n)

    # click caller_b: it fills the width, caller_a goes, leaf above it widens
    leaf_b = [f for f in frames(b, "leaf") if f["d"] == bb["d"] + 1 and abs(f["x"] - bb["x"]) < 1]
    check(len(leaf_b) == 1, "one leaf frame stands on caller_b")
    b.click(bb["x"] + bb["w"] / 2, bb["y"] + bb["h"] / 2)
    z = one(b, "caller_b")
    check(z["w"] > 1150 and z["w"] > bb["w"] * 2, "after a click caller_b is %.0f px wide (was %.0f)" % (z["w"], bb["w"]))
    check("hide" in one(b, "caller_a")["cls"], "after the click caller_a is hidden")
    if leaf_b:
        lz = [f for f in frames(b, "leaf") if f["d"] == z["d"] + 1 and "hide" not in f["cls"]]
        check(len(lz) == 1 and lz[0]["w"] > leaf_b[0]["w"] * 2,
              "the leaf on caller_b widened from %.0f to %s px" % (leaf_b[0]["w"], [round(f["w"]) for f in lz]))
    check("dim" in one(b, "main")["cls"], "main, under the zoomed frame, is dimmed")
    b.screenshot(os.path.join(tmp, "flame-zoomed.png"), full=False)
    r = b.eval("(function(){var r=document.querySelector('text.reset').getBoundingClientRect(); return [r.x+r.width/2, r.y+r.height/2]})()")
    b.click(r[0], r[1])
    a2 = one(b, "caller_a")
    check(abs(a2["w"] - a["w"]) < 0.2 and "hide" not in a2["cls"], "Reset zoom gives caller_a back its %.1f px (%.1f)" % (a["w"], a2["w"]))

    # Search: the button asks for a regular expression
    s = b.eval("(function(){var r=document.querySelector('text.search').getBoundingClientRect(); return [r.x+r.width/2, r.y+r.height/2]})()")
    b.click_async(s[0], s[1])
    b.answer_prompt("^caller_")
    b.eval("new Promise(r => setTimeout(r, 50))")
    m = [f for f in frames(b) if "match" in (f["cls"] or "")]
    check({f["name"] for f in m} == {"caller_a", "caller_b"}, "the search highlights caller_a and caller_b: %s" % [f["name"] for f in m])
    check(all(f["fill"] == "rgb(225, 60, 225)" for f in m), "highlighted frames are magenta: %s" % [f["fill"] for f in m])
    got = b.eval("document.querySelector('text.matched').textContent")
    exp = 100.0 * sum(f["c"] for f in m) / nsamples
    # two decimals, an exact half rounded either way (JavaScript's toFixed rounds it up)
    g = re.match(r"Matched: (\d+\.\d\d)%", got or "")
    check(g is not None and abs(float(g.group(1)) - exp) <= 0.005 + 1e-9, "the matched share reads %r, expected %.4f%% to two decimals" % (got, exp))
    check(b.eval("document.documentElement.tallyFlame.search('leaf_done|nothing-like-this')") >= 0, "a second search runs")
    check(b.requests == ["file://" + os.path.abspath(svg)], "the SVG loaded nothing else: %s" % b.requests)
    check(not b.errors, "no script errors: %s" % b.errors)

if errs:
    print("; ".join(errs))
    sys.exit(1)
EOF
}

# names that are markup, control characters, bytes that are not UTF-8
weird() {
	python3 "$SRCDIR/tests/e2e/gen-bigdb.py" --weird weird.db 300 >/dev/null
	tally_ok export -i weird.db --format svg -o weird.svg
	python3 - weird.svg <<'EOF' || fail "weird.svg (above)"
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
w = [t for t in titles if t.startswith("op<b>")]
if not w:
    sys.exit("no frame title starts with the name 'op<b>...' (escaped markup): %s" % titles[:5])
# a JIT name's control byte and non-UTF-8 byte are escaped where the name is
# read (docs/symbols.md), so every view shows the same text
if not w[0].startswith("op<b>&amp;\"quoted\" 'x' \\x01\\xff]]></script>"):
    sys.exit("the name came out as %r" % w[0].split("\n")[0])
print("ok: a name with markup, a control character and a non-UTF-8 byte is escaped: %r" % w[0].split("\n")[0])
EOF
}

# refusals: one line, no file left behind
refusals() {
	local leftover
	tally_ok record -F 2000 -o flat.db -- "$WORKLOADS/callsplit_fp" 100
	expect_fail_with "^tally: 'flat.db' has no call stacks, which the svg format needs \(record with -g" \
		"$TALLY" export -i flat.db --format svg -o nostacks.svg
	[[ ! -e nostacks.svg ]] || fail "a refused export left nostacks.svg"
	expect_fail_with "^tally: cannot write 'nodir/flame.svg': " "$TALLY" export -i cs.db --format svg -o nodir/flame.svg
	mkdir isdir
	expect_fail_with "^tally: cannot write 'isdir': " "$TALLY" export -i cs.db --format svg -o isdir
	expect_fail_with "^tally: unknown export format 'svgz' \(known formats: .*\bsvg\b" "$TALLY" export -i cs.db --format svgz
	leftover=$(find . -maxdepth 2 -name '*.tmp*' | head -3)
	[[ -z $leftover ]] || fail "temporary files left behind: $leftover"
}

subtest "a self-contained, well-formed SVG" self_contained
subtest "in Chromium: widths, tooltip, zoom, search, nothing loaded" in_chromium
subtest "names with markup, control characters and bad UTF-8" weird
subtest "refusals: one line, no file" refusals

if [[ -n ${TALLY_KEEP_SCREENSHOTS:-} ]] && ls "$TMP"/*.png >/dev/null 2>&1; then
	mkdir -p "$TALLY_KEEP_SCREENSHOTS" && cp "$TMP"/*.png "$TALLY_KEEP_SCREENSHOTS"/
fi
