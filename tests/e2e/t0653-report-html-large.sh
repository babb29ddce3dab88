#!/bin/bash
# A large profile stays a small page: a synthetic database of 30000 distinct
# stacks (tests/e2e/gen-bigdb.py) gives an HTML report whose flame graphs keep
# only frames of at least --percent-limit (0.1% by default) plus one "other"
# frame per parent, at most 1000 frames a level, with no sample lost in the
# folding; the page opens in Chromium without errors, and its load time is
# printed (no time is asserted: bench/html.sh measures a million stacks).
. "$SRCDIR/tests/e2e/lib.sh"

python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big.db 30000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
total=$(session_key big.db samples)
tally_ok report -i big.db --html big.html

folded() {
	python3 - big.html "$total" <<'EOF' || fail "the folded page (above)"
import os, re, sys
page, total = sys.argv[1], int(sys.argv[2])
t = open(page, encoding="utf-8").read()
errs = []
for gid in ("flame-0", "callers-0"):
    svg = t[t.index('id="%s"' % gid):]
    svg = svg[:svg.index("</svg>")]
    fr = [(int(x), int(c), int(d), n) for x, c, d, n in
          re.findall(r'<g class="f" data-x="(\d+)" data-c="(\d+)" data-d="(\d+)"><title>([^\n<]*)', svg)]
    levels = {}
    for x, c, d, n in fr:
        levels.setdefault(d, []).append((x, c, n))
    small = [(n, c) for x, c, d, n in fr if c * 1000 < total and n != "other"]
    if small:
        errs.append("%s: frames under 0.1%% were not folded: %s" % (gid, small[:3]))
    widest = max(sum(1 for _, _, n in v if n != "other") for v in levels.values())
    if widest > 1000:
        errs.append("%s: %d frames at one level, more than 1000 at 0.1%% each" % (gid, widest))
    if not any(n == "other" for _, _, _, n in fr):
        errs.append("%s: no 'other' frame, though most of the 30000 stacks are under 0.1%%" % gid)
    # frames at a level lie side by side, and level 1 holds every sample
    for d, v in levels.items():
        v.sort()
        for (x1, c1, _), (x2, _, _) in zip(v, v[1:]):
            if x1 + c1 > x2:
                errs.append("%s: frames overlap at level %d" % (gid, d))
                break
    l1 = sum(c for _, c, _ in levels.get(1, []))
    if l1 != total:
        errs.append("%s: the first level holds %d samples, the profile %d" % (gid, l1, total))
    print("ok: %s: %d frames (%d levels), %d at the widest level" % (gid, len(fr), len(levels), widest))
rows = len(re.findall(r'<tr><td class="fn"', t[t.index('class="sortable functions"'):t.index('<h3>Flame graph')]))
if rows > 1000:
    errs.append("the function table has %d rows, more than 500 by inclusive plus 500 by self" % rows)
print("ok: %d rows in the function table; the page is %d bytes" % (rows, os.path.getsize(page)))
if errs:
    print("; ".join(errs))
    sys.exit(1)
EOF
}

in_chromium() {
	need_browser
	python3 - "$TMP" big.html <<'EOF' || fail "big.html in Chromium (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
tmp, page = sys.argv[1:3]
with Browser(tmp) as b:
    b.open("file://" + os.path.abspath(page))
    t = b.eval("(function(){var n=performance.getEntriesByType('navigation')[0];return [n.domContentLoadedEventEnd, n.loadEventEnd, document.querySelectorAll('g.f').length, !!document.getElementById('flame-0').tallyFlame]})()")
    if b.errors or not t[3]:
        sys.exit("script errors %s, graph interactive: %s" % (b.errors, t[3]))
    print("ok: the page of 30000 stacks loads in %.0f ms (DOM ready at %.0f ms), %d frames" % (t[1], t[0], t[2]))
EOF
}

subtest "the page: frames folded, none lost" folded
subtest "in Chromium: it loads, interactive, without errors" in_chromium
