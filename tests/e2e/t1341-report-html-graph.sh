#!/bin/bash
# tally report --html of a known shape (tests/e2e/gen-stacksdb.py: hash
# called from parse, eval and emit, and one 1-sample stack 195 frames deep):
# the page opens on the flame graph (its root and search box on the first
# screen), a function's name in the functions table links to the graph and
# shows its sandwich there (its samples from all three places), the search
# box's reset view button undoes it.  And the annotated source of a function
# whose source file is gone names the file once, not on every line (the page
# and `tally annotate`).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-shape.sh"

graph() {
	shape_db s.db
	tally_ok report -i s.db --html s.html --percent-limit 0
	need_browser
	python3 - "$TMP" s.html stacks.txt <<'EOF' || fail "the page in Chromium (above)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
from browser import Browser
tmp, page, stackfile = sys.argv[1:4]
stacks = [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1])) for l in open(stackfile)]
errs = []

def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        errs.append(what)

with Browser(tmp, width=1400, height=900) as b:
    url = "file://" + os.path.abspath(page)
    b.open(url)
    b.screenshot(os.path.join(tmp, "html-open.png"), full=False)
    pos = b.eval("""(function(){
      var fg=document.getElementById('flame-0').tallyFlame, all=fg.frames[0].rect.getBoundingClientRect();
      var s=document.querySelector('.tools[data-for="flame-0"] input').getBoundingClientRect();
      var t=document.querySelector('table.functions').getBoundingClientRect();
      return {all: all.y, allw: all.width, search: s.y, table: t.y, scroll: window.scrollY};
    })()""")
    check(pos["scroll"] == 0 and 0 < pos["all"] < 900 - 16 and 0 < pos["search"] < pos["all"],
          "on open, the search box (y %.0f) and the graph's root (y %.0f) are on the first screen" % (pos["search"], pos["all"]))
    check(pos["table"] > pos["all"], "the functions table comes after the graph (y %.0f)" % pos["table"])
    # the link of hash in the functions table
    link = b.eval("""(function(){var o=null;document.querySelectorAll('table.functions a.tograph').forEach(function(a){
        if(a.textContent==='hash'){a.scrollIntoView({block:'center'});var r=a.getBoundingClientRect();o=[r.x+r.width/2,r.y+r.height/2,a.getAttribute('href')]}});return o})()""")
    check(link is not None and link[2] == "#flame-0", "hash's name in the table links to the flame graph: %s" % (link,))
    if link:
        b.click(link[0], link[1])
        b.eval("new Promise(r => setTimeout(r, 100))")
        st = b.eval("document.getElementById('flame-0').tallyFlame.state()")
        check(st["sandwich"] == "hash\njit", "the click shows hash's sandwich: %r" % (st,))
        v = b.eval("""document.getElementById('flame-0').tallyFlame.view().map(function(f){var r=f.rect.getBoundingClientRect();return {n:f.name,d:f.d,dir:f.dir,c:f.c,y:r.y}})""")
        mid = [f for f in v if f["d"] == 0 and f["dir"] > 0]
        nhash = sum(c for f, c in stacks if "hash" in f)
        check(mid and mid[0]["n"] == "hash" and mid[0]["c"] == nhash, "the middle row is hash with its %d samples from its three places: %s" % (nhash, mid))
        callers = sorted(f["n"] for f in v if f["dir"] < 0 and f["d"] == 1)
        check(callers == ["emit", "eval", "parse"], "its callers: %s" % callers)
        top = b.eval("document.querySelector('.tools[data-for=\"flame-0\"]').getBoundingClientRect().y")
        check(-2 <= top < 900 and mid and 0 < mid[0]["y"] < 900, "the page scrolled to the graph (tools at y %.0f, hash at %s)" % (top, mid and mid[0]["y"]))
        b.screenshot(os.path.join(tmp, "html-sandwich.png"), full=False)
        b.eval("document.querySelector('.tools[data-for=\"flame-0\"] button.reset').click()")
        check(b.eval("var fg=document.getElementById('flame-0').tallyFlame; fg.view()===fg.frames"), "reset view goes back to the whole graph")
    # the callers' graph (inverted: a frame's kids are its callers) gives the same sandwich
    cv = b.eval("""(function(){var fg=document.getElementById('callers-0').tallyFlame; if(!fg.sandwich('hash')) return null;
        return fg.view().map(function(f){return {n:f.name,d:f.d,dir:f.dir,c:f.c}})})()""")
    if cv is None:
        errs.append("no sandwich of hash in the callers' graph")
    else:
        callers = sorted(f["n"] for f in cv if f["dir"] < 0 and f["d"] == 1)
        callees = sorted(f["n"] for f in cv if f["dir"] > 0 and f["d"] == 1)
        check(callers == ["emit", "eval", "parse"] and callees == ["mix"],
              "in the callers' graph too, hash's callers are above (%s) and its callees below (%s)" % (callers, callees))
    check(not b.errors, "no script errors: %s" % b.errors)
    check(b.requests == [url], "nothing loaded: %s" % b.requests)
if errs:
    sys.exit("%d checks failed" % len(errs))
EOF
}

# a program built with -g whose source tree is then removed
missing_source() {
	need_tool cc gcc
	local dir=tree/a/rather/long/directory/for/the/sources/of/this/test
	mkdir -p "$dir"
	cat >"$dir/prog.c" <<'EOC'
#include <stdint.h>
#include <stdio.h>
static inline uint64_t mixer(uint64_t x) { x ^= x >> 13; x *= 0x9E3779B97F4A7C15ull; return x ^ (x >> 29); }
__attribute__((noinline)) uint64_t hot_function(uint64_t n)
{
	uint64_t x = 1;
	for (uint64_t i = 0; i < n; i++) {
		x = mixer(x + i);
		x ^= x << 7;
		x += i * 3;
	}
	return x;
}
int main(void) { printf("%llu\n", (unsigned long long)hot_function(150000000ull)); return 0; }
EOC
	(cd tree && cc -O2 -g -o ../prog "${dir#tree/}/prog.c") || fail "cc failed"
	tally_ok record -F 2000 -o mdb -- ./prog
	rm -rf tree
	local path="$TMP/$dir/prog.c" n
	tally_ok report -i mdb --html m.html
	n=$(sed -n '/<h4 class="annotated">hot_function/,/<\/section>/p' m.html | grep -o -F "$path" | wc -l)
	[[ $n == 1 ]] || fail "the page names $path $n times in hot_function's annotated source: $(sed -n '/<h4 class="annotated">hot_function/,/<\/section>/p' m.html | head -12)"
	sed -n '/<h4 class="annotated">hot_function/,/<\/section>/p' m.html | grep '<td class="ln">[0-9]' >/dev/null ||
		fail "the page lists no sampled line of hot_function"
	"$TALLY" annotate -i mdb hot_function --samples >a.txt 2>a.err || fail "annotate failed: $(cat a.err)"
	n=$(grep -c -F "$path" a.txt || true)
	[[ $n == 1 ]] || fail "tally annotate names $path $n times: $(head -12 a.txt)"
	grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9]+$' a.txt || fail "tally annotate lists no sampled line: $(head -12 a.txt)"
	note "the missing source's path is said once (page and annotate)"
}

subtest "the page opens on the graph; a table link shows a sandwich" graph
subtest "a missing source file's path is said once" missing_source

if [[ -n ${TALLY_KEEP_SCREENSHOTS:-} ]] && ls "$TMP"/*.png >/dev/null 2>&1; then
	mkdir -p "$TALLY_KEEP_SCREENSHOTS" && cp "$TMP"/*.png "$TALLY_KEEP_SCREENSHOTS"/
fi
