#!/bin/bash
# inline_chain (built -O2 -g, two always_inline helpers in a hot loop):
# `report --lines` puts the samples on the three spin lines the workload
# printed, in its measured split; --symbols and the call-graph views show
# leaf_mix and mid_mix as their own, inlined, frames; --no-inline folds them
# into hot_loop.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/inline_chain"
tally_ok record -g -F 2000 -o db -- "$W" 1500
cp out truth.txt
lh=$(info_val line_hot truth.txt)
lm=$(info_val line_mid truth.txt)
ll=$(info_val line_leaf truth.txt)

# --lines, JSON: line rows of the image, each with file, line and function
report_json lines.json -i db --lines
python3 - lines.json "$lh" "$lm" "$ll" >shares.txt <<'PY' || fail "--lines JSON: $(cat shares.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
lh, lm, ll = (int(x) for x in sys.argv[2:5])
img = [i for e in d["events"] for i in e["images"] if i["name"] == "inline_chain"]
if not img:
    print("no image inline_chain"); sys.exit(1)
img = img[0]
if img.get("debug_info") is not True:
    print("image inline_chain: debug_info is not true"); sys.exit(1)
by = {}
for r in img["lines"]:
    if r["file"] is not None and not r["file"].endswith("inline_chain.c"):
        continue
    by[(r["line"], r["function"], bool(r.get("inlined")))] = by.get((r["line"], r["function"], bool(r.get("inlined"))), 0) + r["samples"]
want = {"hot_loop": (lh, False), "mid_mix": (lm, True), "leaf_mix": (ll, True)}
tot = sum(by.get((l, f, i), 0) for f, (l, i) in want.items())
if tot < 0.8 * img["samples"]:
    print("the three spin lines hold %d of the image's %d samples; rows: %s" % (tot, img["samples"], sorted(by.items(), key=lambda kv: -kv[1])[:8])); sys.exit(1)
for f, (l, i) in want.items():
    print(f, "%.2f" % (100.0 * by.get((l, f, i), 0) / tot), by.get((l, f, i), 0), tot)
PY
while read -r fn share n tot; do
	share_near "$share" "$tot" "$(truth "$fn" truth.txt)" "--lines: inline_chain.c line of $fn ($n samples)"
done <shares.txt

# --lines, text: file:line and the function, inlined marked
report_text lines.txt -i db --lines
grep -Eq "inline_chain\.c:$ll +leaf_mix \(inlined\)" lines.txt || fail "text --lines has no 'inline_chain.c:$ll  leaf_mix (inlined)' row: $(head -c 1500 lines.txt)"
grep -Eq "inline_chain\.c:$lh +hot_loop$" lines.txt || fail "text --lines has no 'inline_chain.c:$lh  hot_loop' row: $(head -c 1500 lines.txt)"

# --symbols: inlined functions are rows of their own, marked
report_json sym.json -i db --symbols
check_split func sym.json truth.txt hot_loop mid_mix leaf_mix
python3 - sym.json <<'PY' || fail "--symbols JSON does not mark mid_mix and leaf_mix inlined (and hot_loop not)"
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["name"]: x for e in d["events"] for i in e["images"] if i["name"] == "inline_chain" for x in i["functions"]}
assert f["leaf_mix"].get("inlined") is True and f["mid_mix"].get("inlined") is True
assert not f["hot_loop"].get("inlined")
PY
report_text sym.txt -i db --symbols
grep -q 'leaf_mix (inlined)' sym.txt || fail "text --symbols does not mark leaf_mix inlined: $(head -c 1000 sym.txt)"
ttext sym.txt check symbols

# --no-inline: the inlined code counts for hot_loop
report_json noinl.json -i db --symbols --no-inline
hl=$(tjson noinl.json func hot_loop inline_chain)
own=$(tjson noinl.json image inline_chain)
fcmp "$hl" '>=' "$(awk -v o="$own" 'BEGIN { print 0.95 * o }')" || fail "--no-inline: hot_loop has $hl of $own samples, expected nearly all"
[[ $(tjson noinl.json func leaf_mix) == 0 ]] || fail "--no-inline still shows leaf_mix"

# call graphs: leaf_mix inlined into mid_mix inlined into hot_loop
report_json ch.json -i db --children
python3 - ch.json "$(truth leaf_mix truth.txt)" "$(truth mid_mix truth.txt)" <<'PY' >cg.txt || fail "--children: $(cat cg.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["events"][0]
f = {x["name"]: x for x in ev["functions"] if x["image"] == "inline_chain"}
for n in ("leaf_mix", "mid_mix"):
    if n not in f or f[n].get("inlined") is not True:
        print("%s is not an inlined frame in --children (functions: %s)" % (n, sorted(f))); sys.exit(1)
callers = {c["name"] for c in f["leaf_mix"]["callers"]}
if callers != {"mid_mix"}:
    print("leaf_mix's callers are %s, expected mid_mix" % callers); sys.exit(1)
callers = {c["name"] for c in f["mid_mix"]["callers"]}
if callers != {"hot_loop"}:
    print("mid_mix's callers are %s, expected hot_loop" % callers); sys.exit(1)
tot = f["hot_loop"]["inclusive"]
print("leaf_mix %.2f %d" % (100.0 * f["leaf_mix"]["inclusive"] / tot, tot))
print("mid_mix_incl %.2f %d" % (100.0 * f["mid_mix"]["inclusive"] / tot, tot))
PY
incl=$(awk '$1 == "leaf_mix" { print $3 }' cg.txt)
share_near "$(awk '$1 == "leaf_mix" { print $2 }' cg.txt)" "$incl" "$(truth leaf_mix truth.txt)" "--children: leaf_mix inclusive share of hot_loop"
share_near "$(awk '$1 == "mid_mix_incl" { print $2 }' cg.txt)" "$incl" "$(awk -v a="$(truth leaf_mix truth.txt)" -v b="$(truth mid_mix truth.txt)" 'BEGIN { print a + b }')" "--children: mid_mix inclusive share of hot_loop"
report_text callers.txt -i db --callers leaf_mix
awk '/leaf_mix \(inlined\)/ { a = NR } /mid_mix \(inlined\)/ && a && NR > a { b = NR } /hot_loop/ && b && NR > b { c = NR } END { exit !c }' callers.txt ||
	fail "--callers leaf_mix is not leaf_mix > mid_mix > hot_loop: $(head -c 1200 callers.txt)"
note "inline chain in the call graph: leaf_mix <- mid_mix <- hot_loop"

# without stacks, the HTML report's function table counts as --symbols does:
# leaf_mix and mid_mix are rows of their own, marked inlined, with the same samples
tally_ok record -F 2000 -o flat.db -- "$W" 600
report_text flat-sym.txt -i flat.db --symbols --samples
"$TALLY" report -i flat.db --html flat.html --samples 2>html.err || fail "report --html failed: $(cat html.err)"
for fn in leaf_mix mid_mix; do
	want=$(awk -v f="$fn" '$NF == "(inlined)" && $(NF - 1) == f { print $1; exit }' flat-sym.txt)
	[[ -n $want ]] || fail "--symbols without stacks has no inlined $fn row: $(cat flat-sym.txt)"
	grep -Eq "<td class=\"fn inlined\"[^>]*>$fn</td><td class=\"img\">inline_chain</td><td class=\"n self\"[^>]*>$want<" flat.html ||
		fail "the HTML table has no inlined $fn row with --symbols' $want samples: $(grep -o "<tr><td class=\"fn[^\n]*$fn[^\n]*</tr>" flat.html | head -3)"
done
note "HTML without stacks: inlined rows as in --symbols"
