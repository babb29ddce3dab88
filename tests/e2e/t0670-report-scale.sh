#!/bin/bash
# Scale: on a synthetic database of 100000 distinct stacks (tests/e2e/gen-bigdb.py)
# the per-image summary never reads the stacks: it stays the same when the
# stacks file is replaced by 256 MB of zeros or by text that is not stacks,
# in a database and in a daemon's epoch, while the views that need stacks fail
# with one line naming the file; the call-graph views agree with one another
# (--children's self and inclusive counts are the folded stacks' sums, the
# flame graph holds every sample); and the cost is linear in distinct stacks:
# 200000 stacks take well under three times the CPU time of 100000 (a ratio of
# the best of three runs each, never seconds).
. "$SRCDIR/tests/e2e/lib.sh"

python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big.db 100000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
total=$(session_key big.db samples)

# ---- the summary needs no stacks ----
# same OUT WANT: equal but for the first line (which names the database)
same() { cmp -s <(tail -n +2 "$1") <(tail -n +2 "$2"); }
tally_ok report -i big.db
cp out summary.want
tally_ok report -i big.db --symbols --top 20
cp out symbols.want
cp -r big.db zero.db
rm zero.db/stacks
truncate -s 256M zero.db/stacks
echo >>zero.db/stacks
tally_ok report -i zero.db
same out summary.want || fail "the summary changed when the stacks became zeros: $(diff summary.want out | head -5)"
tally_ok report -i zero.db --symbols --top 20
same out symbols.want || fail "--symbols changed when the stacks became zeros"
note "256 MB of zeros as stacks: the summary and --symbols are unchanged"
expect_fail_with "zero\.db/stacks' line 1: binary data" "$TALLY" report -i zero.db --children

cp -r big.db text.db
printf '# count[,count...] pid frames (image-index:hex-offset, leaf first)\nthis is not a stack line\n' >text.db/stacks
tally_ok report -i text.db
same out summary.want || fail "the summary changed when the stacks became text: $(diff summary.want out | head -5)"
expect_fail_with "text\.db/stacks' line 2: expected 'COUNT PID IMAGE:OFFSET" "$TALLY" report -i text.db --tree
expect_fail_with "text\.db/stacks' line 2" "$TALLY" report -i text.db --html page.html
[[ ! -e page.html ]] || fail "--html wrote a page though the stacks are damaged"

# a daemon's database: the damaged epoch counts for the summary, not for stacks
mkdir daemon.db
printf 'format-version: 1\nlayout: epochs\n' >daemon.db/tally-daemon
cp -r big.db daemon.db/202601010000
cp -r big.db daemon.db/202601010100
tally_ok report -i daemon.db
cp out dsummary.want
cp text.db/stacks daemon.db/202601010100/stacks
tally_ok report -i daemon.db
cmp -s out dsummary.want || fail "the merged summary changed with one epoch's stacks damaged: $(diff dsummary.want out | head -5)"
expect_fail_with "202601010100/stacks' line 2" "$TALLY" report -i daemon.db --children
note "daemon epochs: the summary reads no stacks; --children names the damaged epoch"

# ---- the views agree ----
tally_ok report -i big.db --children --json --samples
cp out children.json
tally_ok export -i big.db --format folded --samples -o big.folded
tally_ok export -i big.db --format svg --samples -o big.svg
python3 - children.json big.folded big.svg "$total" <<'EOF' || fail "the views disagree (above)"
import json, re, sys
cj, folded, svg, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ev = json.load(open(cj))["events"][0]
self_f, incl_f, n = {}, {}, 0
for line in open(folded):
    stack, c = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    c = int(c)
    n += c
    self_f[frames[-1]] = self_f.get(frames[-1], 0) + c
    for f in set(frames):
        incl_f[f] = incl_f.get(f, 0) + c
errs = []
if n != total or ev["samples"] != total:
    errs.append("folded holds %d samples, --children %d, the session %d" % (n, ev["samples"], total))
funcs = ev["functions"]
if len(funcs) != len(incl_f):
    errs.append("--children lists %d functions, the folded stacks %d" % (len(funcs), len(incl_f)))
for f in funcs:
    if f["self"] != self_f.get(f["name"], 0) or f["inclusive"] != incl_f.get(f["name"], 0):
        errs.append("%s: --children self %d inclusive %d, folded %d and %d" %
                    (f["name"], f["self"], f["inclusive"], self_f.get(f["name"], 0), incl_f.get(f["name"], 0)))
        break
t = open(svg).read()
m = re.search(r'data-total="(\d+)"', t)
if not m or int(m.group(1)) != total:
    errs.append("the flame graph's total is %s, the session's %d" % (m and m.group(1), total))
if errs:
    print("; ".join(errs))
    sys.exit(1)
print("ok: --children's %d functions are the folded stacks' sums; every view holds %d samples" % (len(funcs), total))
EOF

# ---- linear in distinct stacks ----
python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big2.db 200000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
# For each view, the CPU time (user and system: what other load on the machine
# changes least) of three runs on each database, taken in turns; the least of
# each.
python3 - "$TALLY" big.db big2.db <<'EOF' || fail "not linear in distinct stacks (above)"
import os, subprocess, sys
tally, small, large = sys.argv[1:4]
views = [["report", "--children"], ["report", "--html", "x.html"],
         ["export", "--format", "folded", "-o", "x.folded"], ["export", "--format", "pprof", "-o", "x.pb.gz"]]
def cpu(db, view):
    p = subprocess.Popen([tally, view[0], "-i", db] + view[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status:
        sys.exit("'tally %s -i %s' failed" % (" ".join(view), db))
    return ru.ru_utime + ru.ru_stime
bad = []
for view in views:
    a = b = None
    for _ in range(3):
        x, y = cpu(small, view), cpu(large, view)
        a = x if a is None else min(a, x)
        b = y if b is None else min(b, y)
    ratio = b / max(a, 1e-3)
    print("ok: 'tally %s': 200000 stacks take %.2fx the CPU time of 100000 (%.3f s, %.3f s)" % (" ".join(view), ratio, b, a))
    if ratio >= 3:
        bad.append("'tally %s' took %.2fx the CPU time on twice the stacks (expected about 2x, under 3x)" % (" ".join(view), ratio))
if bad:
    sys.exit("; ".join(bad))
EOF
