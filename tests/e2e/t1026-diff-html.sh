#!/bin/bash
# tally diff --html, opened in headless Chromium: the page loads nothing else
# and runs without errors; its table holds the diff's rows (the same changes
# as --json) and sorts on a click; its differential flame graph has work_c
# red and work_a blue and zooms on a click.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"

msg=$(python3 "$SRCDIR/tests/e2e/browser.py" check) || skip "$msg (scripts/deps.sh --test installs Debian's chromium)"
build_split base -DW_A=6 -DW_B=3 -DW_C=1
build_split new -DW_A=2 -DW_B=3 -DW_C=5
record_split base.db base.truth base 400 -g -F 2000
record_split new.db new.truth new 400 -g -F 2000
"$TALLY" diff base.db new.db --json >d.json || fail "tally diff --json failed"
tally_ok diff base.db new.db --html d.html
[[ -s d.html && ! -s out ]] || fail "--html wrote no page, or printed on stdout"

python3 - "$TMP" d.html d.json <<'PY' || fail "the diff page in Chromium (above)"
import json, os, re, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
tmp, page, dj = sys.argv[1:4]
rows = {r["function"]: r for r in json.load(open(dj))["rows"]}
errs = []
def check(c, what):
    print(("ok: " if c else "FAIL: ") + what)
    if not c:
        errs.append(what)
TABLE = """(function(){var o=[];Array.prototype.forEach.call(document.querySelector('table.diff').tBodies[0].rows,function(r){o.push([r.cells[2].getAttribute('data-v'),r.cells[5].textContent,r.className])});return o})()"""
with Browser(tmp) as b:
    url = "file://" + os.path.abspath(page)
    b.open(url)
    check(b.requests == [url], "the page loaded nothing else: %s" % b.requests)
    check(not b.errors, "no script errors: %s" % b.errors)
    t = b.eval(TABLE)
    got = {fn: float(v) for v, fn, _ in t}
    for f in ("work_a", "work_b", "work_c"):
        check(f in got and abs(got[f] - rows[f]["change_points"]) < 0.001,
              "%s: the table's change %s, --json %s" % (f, got.get(f), rows[f]["change_points"]))
    check([c for _, fn, c in t if fn == "work_c"] == ["grew"] and [c for _, fn, c in t if fn == "work_a"] == ["shrank"],
          "work_c's row is marked grew, work_a's shrank")
    hdr = b.eval("""(function(){var r=[];Array.prototype.forEach.call(document.querySelector('table.diff').tHead.rows[0].cells,function(c){var x=c.getBoundingClientRect();r.push([c.textContent,x.x+x.width/2,x.y+x.height/2])});return r})()""")
    ch = [h for h in hdr if h[0] == "change"][0]
    b.click(ch[1], ch[2])
    s = [float(v) for v, _, _ in b.eval(TABLE)]
    check(s == sorted(s, reverse=True), "a click on 'change' sorts the rows by it")
    fr = b.eval("""(function(){var o=[];document.getElementById('diff-flame').tallyFlame.frames.forEach(function(f){var r=f.rect.getBoundingClientRect();o.push({n:f.name,fill:f.rect.getAttribute('fill'),x:r.x,y:r.y,w:r.width,h:r.height})});return o})()""")
    def widest(n):
        c = [f for f in fr if f["n"] == n]
        return max(c, key=lambda f: f["w"]) if c else None
    c, a = widest("work_c"), widest("work_a")
    check(c is not None and re.fullmatch(r"rgb\(255,\d+,\d+\)", c["fill"]) and c["fill"] != "rgb(255,255,255)", "work_c is red: %s" % (c and c["fill"]))
    check(a is not None and re.fullmatch(r"rgb\(\d+,\d+,255\)", a["fill"]) and a["fill"] != "rgb(255,255,255)", "work_a is blue: %s" % (a and a["fill"]))
    if a:
        b.eval("document.getElementById('diff-flame').scrollIntoView()")
        a = widest("work_a")
        fr = b.eval("""(function(){var o=[];document.getElementById('diff-flame').tallyFlame.frames.forEach(function(f){var r=f.rect.getBoundingClientRect();o.push({n:f.name,fill:f.rect.getAttribute('fill'),x:r.x,y:r.y,w:r.width,h:r.height})});return o})()""")
        a = widest("work_a")
        b.click(a["x"] + a["w"] / 2, a["y"] + a["h"] / 2)
        fr = b.eval("""(function(){var o=[];document.getElementById('diff-flame').tallyFlame.frames.forEach(function(f){var r=f.rect.getBoundingClientRect();o.push({n:f.name,fill:f.rect.getAttribute('fill'),x:r.x,y:r.y,w:r.width,h:r.height})});return o})()""")
        z = widest("work_a")
        check(z["w"] > a["w"] * 1.5, "a click on work_a widens it from %.0f to %.0f px" % (a["w"], z["w"]))
if errs:
    sys.exit("%d checks failed" % len(errs))
PY
