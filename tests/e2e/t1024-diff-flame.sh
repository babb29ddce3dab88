#!/bin/bash
# tally diff --format svg and --format folded on two builds of split_weights
# (6:3:1, then 2:3:5, recorded with call graphs). The SVG is well-formed XML
# with NEW's shape (each frame's width is NEW's samples, as in NEW's own
# flame graph) coloured by the change of its self share: work_c (grew) red,
# work_a (shrank) blue, every frame red or blue as its change's sign and as
# deep as its size against the largest (Gregg's scale), the change being
# NEW's self share minus BASE's for the same path. The
# folded lines are `STACK BASE NEW`: with --absolute each column is that
# side's own `tally export --format folded`; by default BASE is scaled to
# NEW's total, adding up exactly.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"

build_split base -DW_A=6 -DW_B=3 -DW_C=1
build_split new -DW_A=2 -DW_B=3 -DW_C=5
record_split base.db base.truth base 500 -g -F 2000
record_split new.db new.truth new 500 -g -F 2000

tally_ok diff base.db new.db --format svg -o d.svg
tally_ok export -i new.db --format folded -o new.folded
tally_ok export -i base.db --format folded -o base.folded
python3 - d.svg new.folded base.folded <<'PY' || fail "the differential flame graph (above)"
import re, sys
import xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
def stacks(path):
    out = {}
    for l in open(path):
        st, n = l.rsplit(" ", 1)
        out[st] = out.get(st, 0) + int(n)
    return out
new, base = stacks(sys.argv[2]), stacks(sys.argv[3])
tn, tb = sum(new.values()), sum(base.values())
errs = []
frames = []
for g in root.iter("{http://www.w3.org/2000/svg}g"):
    if g.get("class") != "f":
        continue
    title = g.find("s:title", ns).text
    rect = g.find("s:rect", ns)
    name = title.split("\n")[0]
    # code without a symbol is [IMAGE] in both, the image's own ';[]' made '_'
    # in folded stacks (the vDSO's [[vdso]] is [_vdso_] there)
    if name.startswith("[") and name.endswith("]"):
        name = "[" + re.sub(r"[;\[\]]", "_", name[1:-1]) + "]"
    frames.append((g, name, rect.get("fill"), int(g.get("data-d")), int(g.get("data-c"))))
# Gregg's scale: 210 * |change| / the largest |change| off white
maxch = max(abs(float(g.get("data-change"))) for g, *_ in frames if g.get("data-change") is not None)
# a frame's path from the root: the names of the frames below it (preorder)
path, total_red, total_blue = [], set(), set()
for g, name, fill, depth, count in frames:
    path = path[:depth] + [name]
    if depth == 0 or g.get("data-change") is None:
        continue
    ch = float(g.get("data-change"))
    prefix = ";".join(path[1:])
    self_new = sum(c for s, c in new.items() if s == prefix)
    self_base = sum(c for s, c in base.items() if s == prefix)
    incl_new = sum(c for s, c in new.items() if s == prefix or s.startswith(prefix + ";"))
    want = 100.0 * self_new / tn - 100.0 * self_base / tb
    if abs(ch - want) > 0.01:
        errs.append("%s: data-change %.4f, expected %.4f from the folded stacks" % (prefix, ch, want))
    if count != incl_new:
        errs.append("%s: width %d samples, NEW has %d" % (prefix, count, incl_new))
    m = re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", fill)
    r_, g_, b_ = map(int, m.groups())
    depth_want = 210.0 * abs(ch) / maxch
    if ch > 0 and not (r_ == 255 and g_ == b_ and abs(255 - g_ - depth_want) <= 1.01):
        errs.append("%s grew by %.4f but is %s" % (prefix, ch, fill))
    if ch < 0 and not (b_ == 255 and r_ == g_ and abs(255 - r_ - depth_want) <= 1.01):
        errs.append("%s shrank by %.4f but is %s" % (prefix, ch, fill))
    if ch == 0 and fill != "rgb(255,255,255)":
        errs.append("%s did not change but is %s" % (prefix, fill))
    if name == "work_c" and ch > 10:
        total_red.add(name)
    if name == "work_a" and ch < -10:
        total_blue.add(name)
if not total_red or not total_blue:
    errs.append("work_c is not a frame that grew (red), or work_a one that shrank (blue)")
if errs:
    sys.exit("; ".join(errs[:8]))
print("ok: %d frames with NEW's widths, coloured by the change of their self share" % len(frames))
PY

tally_ok diff base.db new.db --format folded -o d.folded --absolute
python3 - d.folded base.folded new.folded <<'PY' || fail "--format folded --absolute (above)"
import sys
def stacks(path):
    out = {}
    for l in open(path):
        st, n = l.rsplit(" ", 1)
        out[st] = int(n)
    return out
b, n = {}, {}
for l in open(sys.argv[1]):
    st, x, y = l.rsplit(" ", 2)
    b[st], n[st] = int(x), int(y)
b = {k: v for k, v in b.items() if v}
n = {k: v for k, v in n.items() if v}
if b != stacks(sys.argv[2]) or n != stacks(sys.argv[3]):
    sys.exit("the BASE and NEW columns are not the two sides' own folded stacks")
print("ok: --absolute columns are each side's folded stacks")
PY
tally_ok diff base.db new.db --format folded -o -
cp out norm.folded
awk '{ b += $(NF-1); n += $NF } END { if (b != n || n == 0) exit 1 }' norm.folded ||
	fail "normalized folded: the BASE column adds up to $(awk '{ b += $(NF-1) } END { print b }' norm.folded), NEW to $(awk '{ n += $NF } END { print n }' norm.folded)"
sort -c norm.folded || fail "folded lines are not sorted"
note "normalized folded: both columns add up to $(awk '{ n += $NF } END { print n }' norm.folded)"
expect_fail_with "the svg format goes to files" "$TALLY" diff base.db new.db --format svg -o -
