#!/bin/bash
# call graphs of callsplit (leaf reached through caller_a and caller_b, 3:1 by
# the workload's own clock): -g on the frame-pointer build and --call-graph
# dwarf on the build without frame pointers both give the measured split in
# --children, --callgraph, --tree, --callers leaf and --callees main, and
# reach a process root; a plain frame-pointer chain (fp,0: no stack copy) on
# the build without frame pointers does not.
# The text layouts (columns, indentation, the unwind line) are checked once.
. "$SRCDIR/tests/e2e/lib.sh"

# cgcheck DB TRUTHFILE JSONPREFIX: the JSON call-graph reports of DB against
# the truth; prints `ok:` lines, fails with the reason.
CG_PY='
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
import shares  # noqa: E402 (the binomial tolerance of a share)

db, truthfile, pre = sys.argv[1:4]
truth = {}
for line in open(truthfile):
    w = line.split()
    if len(w) == 3 and w[0] == "truth":
        truth[w[1]] = float(w[2])
session = dict(l.rstrip("\n").split(": ", 1) for l in open(db + "/session") if ": " in l)
errs = []

def ev_of(name):
    try:
        d = json.load(open(pre + "." + name + ".json"))
    except ValueError as e:
        sys.exit("tally report --json --%s printed invalid JSON: %s" % (name, e))
    evs = d.get("events") or []
    if len(evs) != 1:
        sys.exit("%s: expected one event, got %d" % (name, len(evs)))
    return evs[0]

def near(what, got, want, n):
    """GOT, a share (percent) of N samples, against the truth WANT"""
    ok, msg = shares.check(what, got, want, n)
    if ok:
        print("ok: " + msg)
    else:
        errs.append(msg)

def fn(ev, name, image):
    for f in ev.get("functions", []):
        if f.get("name") == name and f.get("image") == image:
            return f
    return None

def kid(node, name, image):
    for c in node.get("children", []):
        if c.get("name") == name and c.get("image") == image:
            return c
    return None

def nodes(ns, depth=0):
    for n in ns:
        yield n, depth
        yield from nodes(n.get("children", []), depth + 1)

img = session["command"].split()[0].rsplit("/", 1)[-1]
ta, tb = truth["caller_a"], truth["caller_b"]
nsamples = int(session["samples"])

# --children: inclusive % of caller_a and caller_b (of all samples)
ev = ev_of("children")
if ev.get("samples") != nsamples:
    errs.append("--children: event samples %s, the session counted %d" % (ev.get("samples"), nsamples))
for name, t in (("caller_a", ta), ("caller_b", tb)):
    f = fn(ev, name, img)
    if f is None:
        errs.append("--children: no function %s [%s]" % (name, img))
        continue
    near("--children inclusive %% of %s" % name, f.get("inclusive_percent"), t, ev["samples"])
    if f.get("inclusive", 0) > ev["samples"] or f.get("self", 0) > f.get("inclusive", 0):
        errs.append("--children: %s has self %s, inclusive %s of %s samples" % (name, f.get("self"), f.get("inclusive"), ev["samples"]))
uw = ev.get("unwind") or {}
if uw.get("samples") != nsamples:
    errs.append("unwind.samples is %s, the session counted %d samples" % (uw.get("samples"), nsamples))
rooted = uw.get("rooted_percent")
if not isinstance(rooted, (int, float)) or rooted <= 95:
    errs.append("only %s%% of the samples reached a process root, expected > 95%%" % rooted)
else:
    print("ok: %.2f%% of the samples reached a process root" % rooted)

# --callgraph: leaf s callers, percent of leaf s inclusive samples
ev = ev_of("callgraph")
leaf = fn(ev, "leaf", img)
if leaf is None:
    errs.append("--callgraph: no function leaf [%s]" % img)
else:
    callers = {(c.get("name"), c.get("image")): c for c in leaf.get("callers", [])}
    for name, t in (("caller_a", ta), ("caller_b", tb)):
        c = callers.get((name, img))
        if c is None:
            errs.append("--callgraph: leaf has no caller %s; callers: %s" % (name, sorted(callers)))
            continue
        near("--callgraph %% of leaf from %s" % name, c.get("percent"), t, leaf.get("inclusive", 0))
        want = 100.0 * c.get("samples", -1) / leaf["inclusive"] if leaf.get("inclusive") else -1
        if abs(c.get("percent", -1) - want) > 0.01:
            errs.append("--callgraph: leaf <- %s is %s%% but %s of leaf s %s inclusive samples is %.4f%%"
                        % (name, c.get("percent"), c.get("samples"), leaf.get("inclusive"), want))

# --tree: the nodes under main
ev = ev_of("tree")
mains = [n for n, _ in nodes(ev.get("tree", [])) if n.get("name") == "main" and n.get("image") == img]
if not mains:
    errs.append("--tree: no node main [%s]" % img)
else:
    m = max(mains, key=lambda n: n.get("samples", 0))
    for name, t in (("caller_a", ta), ("caller_b", tb)):
        k = kid(m, name, img)
        if k is None:
            errs.append("--tree: main has no child %s; children: %s" % (name, [c.get("name") for c in m.get("children", [])]))
            continue
        near("--tree %s under main (%% of main)" % name, 100.0 * k["samples"] / m["samples"], t, m["samples"])
        lf = kid(k, "leaf", img)
        if lf is None or lf["samples"] < 0.95 * k["samples"]:
            errs.append("--tree: %s under main has no child leaf holding nearly all its %d samples" % (name, k["samples"]))

# --callers leaf / --callees main: the focus at the top, 100%
for q, top, kids in (("callers", "leaf", ("caller_a", "caller_b")), ("callees", "main", ("caller_a", "caller_b"))):
    ev = ev_of(q)
    t = ev.get("tree", [])
    if len(t) != 1 or t[0].get("name") != top:
        errs.append("--%s %s: expected one top node %s, got %s" % (q, top, top, [n.get("name") for n in t]))
        continue
    if abs(t[0].get("percent", 0) - 100) > 0.01:
        errs.append("--%s %s: the top node is %s%%, expected 100%%" % (q, top, t[0].get("percent")))
    for name, tr in zip(kids, (ta, tb)):
        k = kid(t[0], name, img)
        if k is None:
            errs.append("--%s %s: no child %s" % (q, top, name))
            continue
        near("--%s %s: %s" % (q, top, name), k.get("percent"), tr, t[0].get("samples", 0))

if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
'

run_case() {
	local label=$1 w=$2 msg rc=0
	shift 2
	tally_ok record "$@" -F 2000 -o "$label" -- "$WORKLOADS/$w" 400
	cp out "$label.truth"
	# its calls are picked at random, one of two: 3:1 of the time within their scatter
	SHARE_OF=calls share_near "$(truth caller_a "$label.truth")" "$(info_val calls "$label.truth")" 75 "$label: the workload's own caller_a share"
	# (CG_PY checks that the JSON is valid)
	report_text "$label.children.json" -i "$label" --json --samples --children
	report_text "$label.callgraph.json" -i "$label" --json --samples --callgraph
	report_text "$label.tree.json" -i "$label" --json --samples --tree
	report_text "$label.callers.json" -i "$label" --json --samples --callers leaf
	report_text "$label.callees.json" -i "$label" --json --samples --callees main
	msg=$(python3 -c "$CG_PY" "$label" "$label.truth" "$label") || rc=$?
	((rc == 0)) || fail "$label ($*): $msg"
	echo "$msg"
}

run_case fp callsplit_fp -g
run_case dwarf callsplit_nofp --call-graph dwarf
[[ $(session_key dwarf call-graph) == dwarf ]] || fail "--call-graph dwarf: session call-graph is '$(session_key dwarf call-graph)'"
[[ $(session_key fp call-graph) == fp ]] || fail "-g: session call-graph is '$(session_key fp call-graph)'"

# a plain chain without frame pointers: the kernel's frame-pointer walk cannot
# get past leaf (with the default stack copy, the repair unwinds this shallow
# program's frames with their CFI: docs/callgraph.md)
tally_ok record --call-graph fp,0 -F 2000 -o nofp -- "$WORKLOADS/callsplit_nofp" 200
report_json nofp.json -i nofp --children
r=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"][0]["unwind"]["rooted_percent"])' nofp.json) ||
	fail "no events[0].unwind.rooted_percent in nofp.json: $(head -c 600 nofp.json)"
fcmp "$r" '<' 10 || fail "fp,0 on callsplit_nofp (no frame pointers): $r% of the samples reached a process root, expected almost none (< 10%)"
note "a plain chain without frame pointers: $r% reached a root"
report_text nofp.txt -i nofp --children
grep -Eq '^unwind: [0-9]+\.[0-9]{2}% of [0-9]+ samples reached a process root.*stopped early' nofp.txt ||
	fail "fp,0 on callsplit_nofp: no unwind line saying stacks stopped early: $(grep -i unwind nofp.txt || head -c 600 nofp.txt)"

# text layouts, on the -g recording
for q in children callgraph tree "callers leaf" "callees main"; do
	read -ra o <<<"--$q"
	report_text "fp.${q%% *}.txt" -i fp --samples "${o[@]}"
done
msg=$(python3 - fp fp.truth "$(session_key fp samples)" <<'EOF'
import json, os, re, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests/e2e"))
import shares  # noqa: E402 (the binomial tolerance of a share)
pre, truthfile, nsamples = sys.argv[1], sys.argv[2], int(sys.argv[3])
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
errs = []
TAIL = r"(\S.*?)  \[([^\]]+)\]$"

def lines(name):
    return open("%s.%s.txt" % (pre, name)).read().split("\n")

def unwind(name):
    u = [l for l in lines(name) if l.startswith("unwind:")]
    if len(u) != 1:
        errs.append("--%s: expected one unwind line, got %d" % (name, len(u)))
        return
    m = re.match(r"^unwind: (\d+\.\d\d)% of (\d+) samples reached a process root", u[0])
    if not m:
        errs.append("--%s: unwind line %r is not `unwind: P%% of N samples reached a process root ...`" % (name, u[0]))
    elif int(m.group(2)) != nsamples:
        errs.append("--%s: the unwind line counts %s samples, the session %d" % (name, m.group(2), nsamples))
    if not any(l.startswith("lost:") for l in lines(name)):
        errs.append("--%s: no `lost:` line" % name)

# --children: header, then `INCL% SELF% SAMPLES  function  [image]` by inclusive
L = lines("children")
hdr = [i for i, l in enumerate(L) if re.match(r"^\s*children\s+self\s+samples\s+function\s+\[image\]\s*$", l)]
if len(hdr) != 1:
    errs.append("--children: no header `children  self  samples  function  [image]`")
else:
    rows = []
    for l in L[hdr[0] + 1:]:
        m = re.match(r"^\s*(\d+\.\d\d)%\s+(\d+\.\d\d)%\s+(\d+)  " + TAIL, l)
        if not m:
            break
        rows.append((float(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4), m.group(5)))
    if len(rows) < 4:
        errs.append("--children: %d rows under the header" % len(rows))
    for a, b in zip(rows, rows[1:]):
        if b[2] > a[2]:
            errs.append("--children: %s (%d) sorts after %s (%d)" % (b[3], b[2], a[3], a[2]))
    for r in rows:
        if abs(r[0] - 100.0 * r[2] / nsamples) > 0.006 or r[1] > r[0] + 0.001:
            errs.append("--children: row %s: %.2f%% inclusive, %.2f%% self for %d of %d samples" % (r[3], r[0], r[1], r[2], nsamples))
    got = {r[3]: r[0] for r in rows}
    for f in ("caller_a", "caller_b"):
        ok, msg = shares.check("--children text: %s" % f, got.get(f), truth[f], nsamples)
        if not ok:
            errs.append(msg)
unwind("children")

# --callgraph: blocks between dashed lines; callers `<-` above the function line, callees `->` below
L = lines("callgraph")
blocks, cur = [], None
for l in L:
    if re.match(r"^-{20,}$", l):
        cur = []
        blocks.append(cur)
    elif cur is not None and l and not l.startswith(("unwind:", "lost:")):
        cur.append(l)
leafblock = None
for b in blocks:
    fl = [i for i, l in enumerate(b) if re.match(r"^\s*\d+\s+\d+\.\d\d%\s+self \d+ \d+\.\d\d%  leaf  \[", l)]
    if fl:
        leafblock, at = b, fl[0]
if leafblock is None:
    errs.append("--callgraph: no block with the line `N  P%%  self N P%%  leaf  [image]`")
else:
    incl = int(leafblock[at].split()[0])
    ups = {}
    for i, l in enumerate(leafblock):
        m = re.match(r"^\s+(\d+)\s+(\d+\.\d\d)%  (<-|->) " + TAIL, l)
        if not m:
            if i != at:
                errs.append("--callgraph: leaf block line %r is neither a caller nor a callee line" % l)
            continue
        if (m.group(3) == "<-") != (i < at):
            errs.append("--callgraph: %r is on the wrong side of the function line" % l)
        if m.group(3) == "<-":
            ups[m.group(4)] = (int(m.group(1)), float(m.group(2)))
        if abs(float(m.group(2)) - 100.0 * int(m.group(1)) / incl) > 0.006:
            errs.append("--callgraph: %r: the %% is not of leaf s %d inclusive samples" % (l, incl))
    for f in ("caller_a", "caller_b"):
        ok, msg = shares.check("--callgraph text: leaf <- %s" % f, ups.get(f, (0, None))[1], truth[f], incl)
        if not ok:
            errs.append(msg)
unwind("callgraph")

# trees: `P%  SAMPLES  function  [image]`, indented 2 per level: the percent
# is right-aligned in 7 columns after the indentation, so its `%` sits at
# column 2 * level + 7
def tree(name, top):
    out = []
    for l in lines(name):
        m = re.match(r"^( *)(\d+\.\d\d)% +(\d+)  " + TAIL, l)
        if not m:
            continue
        col = len(m.group(1)) + len(m.group(2))
        if col < 7 or (col - 7) % 2:
            errs.append("--%s: %r: the percent does not end at column 2 * level + 7" % (name, l))
            continue
        out.append(((col - 7) // 2, float(m.group(2)), int(m.group(3)), m.group(4)))
    if not out:
        errs.append("--%s: no tree lines" % name)
        return out
    if out[0][0] != 0:
        errs.append("--%s: the first node %s is at level %d" % (name, out[0][3], out[0][0]))
    for a, b in zip(out, out[1:]):
        if b[0] > a[0] + 1:
            errs.append("--%s: %s (level %d) is more than one level under %s (level %d)" % (name, b[3], b[0], a[3], a[0]))
    if top and out[0][3] != top:
        errs.append("--%s: the tree starts at %s, expected %s" % (name, out[0][3], top))
    return out

def child_pct(rows, parent, child):
    for i, r in enumerate(rows):
        if r[3] != parent:
            continue
        for s in rows[i + 1:]:
            if s[0] <= r[0]:
                break
            if s[3] == child and s[0] == r[0] + 1:
                return 100.0 * s[2] / r[2], s, r[2]
    return None, None, 0

for name, top, parent in (("tree", None, "main"), ("callers", "leaf", "leaf"), ("callees", "main", "main")):
    rows = tree(name, top)
    for f in ("caller_a", "caller_b"):
        p, row, n = child_pct(rows, parent, f)
        ok, msg = shares.check("--%s text: %s under %s" % (name, f, parent), p, truth[f], n)
        if not ok:
            errs.append(msg)
    unwind(name)
L = lines("callers")
if not any(re.match(r"^# callers of leaf: percentages of its \d+ inclusive samples$", l) for l in L):
    errs.append("--callers leaf: no line `# callers of leaf: percentages of its N inclusive samples`")
if errs:
    print("; ".join(errs[:8]))
    sys.exit(1)
print("ok: text layouts of --children, --callgraph, --tree, --callers, --callees")
EOF
) || fail "text layout: $msg"
echo "$msg"
