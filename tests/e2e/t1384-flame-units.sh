#!/bin/bash
# A flame graph's script says what its values are, as the frames' titles do:
# on a period-weighted export (the default) the search's "Matched" line and a
# frame's details are in msec, with --samples in samples. split_funcs spends
# known shares of its time in three functions; the search for one of them
# gives its share and its time (the share of the run within the binomial
# error of the run's samples).
. "$SRCDIR/tests/e2e/lib.sh"

need_browser
tally_ok record -g -o db -- "$WORKLOADS/split_funcs" 600
cp out truth.txt
tally_ok export -i db --format svg -o w.svg
tally_ok export -i db --format svg --samples -o s.svg
grep -q 'data-unit="msec"' w.svg || fail "the weighted SVG does not say its unit is msec: $(grep -o 'data-unit="[^"]*"' w.svg)"
grep -q 'data-unit="samples"' s.svg || fail "the --samples SVG does not say its unit is samples: $(grep -o 'data-unit="[^"]*"' s.svg)"

fn=$(awk '$1 == "truth" { print $2; exit }' truth.txt)
share=$(truth "$fn" truth.txt)
python3 - "$TMP" "$fn" "$share" "$(session_key db samples)" <<'PY' || fail "the flame graphs' lines in Chromium (above)"
import os, re, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
import shares
tmp, fn, share, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
errs = []
def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        errs.append(what)
with Browser(tmp) as b:
    for svg, unit in (("w.svg", "msec"), ("s.svg", "sample")):
        b.open("file://" + os.path.join(tmp, svg))
        fg = "document.documentElement.tallyFlame"
        b.eval(fg + ".search('^" + fn + "$')")
        got = b.eval("document.querySelector('text.matched').textContent")
        m = re.match(r"Matched: ([0-9.]+)% \(([0-9.]+) (msec|samples?|events?)\)$", got or "")
        check(m is not None and m.group(3).startswith(unit), "%s: the search's line is in %s: %r" % (svg, unit, got))
        if m:
            check(*shares.check("%s: %s's share of the run" % (svg, fn), float(m.group(1)), share, n))
        # a frame's details (what hovering or selecting shows) in the same unit
        info = b.eval("(" + fg + ".frames.filter(function (f) { return f.name === '" + fn + "'; })[0] || {}).info || ''")
        check((" msec, " if unit == "msec" else " samples, ") in info, "%s: %s's details are in %s: %r" % (svg, fn, unit, info))
    check(not b.errors, "no script errors: %s" % b.errors)
if errs:
    sys.exit("%d checks failed" % len(errs))
PY
