#!/bin/bash
# --call-graph dwarf follows threads, forks and exec: every thread_fn_N of
# `threads`, every child function of `forker` (children and grandchild) and
# the exec'd split_funcs's work functions have stacks that reach a process
# root (a thread start such as start_thread/clone3, or _start /
# __libc_start_main), through the expected frames (start_thread for threads,
# forker's main for the forked functions, split_funcs's main for the exec).
. "$SRCDIR/tests/e2e/lib.sh"

# check JSON SPEC...: SPEC is FUNC:IMAGE:ROOTS:VIA:VIAIMAGE, ROOTS a |-list
# of accepted outermost frames, VIA [VIAIMAGE] a frame that must be above FUNC.  At least
# 90% of FUNC's samples must have a stack whose outermost frame is in ROOTS
# with VIA on the way.
CHECK_PY='
import json, sys
path, specs = sys.argv[1], sys.argv[2:]
ev = json.load(open(path))["events"][0]
errs, notes = [], []
# per function (name, image): samples, and those under an accepted root with VIA above
want = {}
for s in specs:
    name, img, roots, via, viaimg = s.split(":")
    want[(name, img)] = (set(roots.split("|")), (via, viaimg), [0, 0])

def walk(node, above, top):
    key = (node.get("name"), node.get("image"))
    if key in want and key not in [a for a in above]:
        roots, via, acc = want[key]
        acc[0] += node["samples"]
        if top[0] in roots and via in above:
            acc[1] += node["samples"]
    for c in node.get("children", []):
        walk(c, above + [key], top)

for t in ev.get("tree", []):
    walk(t, [], (t.get("name"), t.get("image")))
for (name, img), (roots, via, (n, good)) in want.items():
    if n == 0:
        errs.append("%s [%s] has no samples in the tree" % (name, img))
    elif good < 0.9 * n:
        errs.append("%s [%s]: only %d of %d samples have a stack from %s through %s [%s]" % (name, img, good, n, "/".join(sorted(roots)), via[0], via[1]))
    else:
        notes.append("%s [%s]: %d of %d samples from a root through %s [%s]" % (name, img, good, n, via[0], via[1]))
u = ev.get("unwind") or {}
if not u.get("rooted_percent", 0) > 95:
    errs.append("only %s%% of all samples reached a process root (expected > 95%%)" % u.get("rooted_percent"))
if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
print("\n".join("ok: " + n for n in notes))
'
THREAD_ROOTS='start_thread|clone|clone3|__clone|__clone3|thread_start'
MAIN_ROOTS='_start|__libc_start_main|__libc_start_call_main'

tally_ok record --call-graph dwarf -F 2000 -o threads.db -- "$WORKLOADS/threads" 4 150
report_json threads.json -i threads.db --tree --percent-limit 0
specs=()
for i in 0 1 2 3; do
	specs+=("thread_fn_$i:threads:$THREAD_ROOTS:start_thread:libc.so.6")
done
msg=$(python3 -c "$CHECK_PY" threads.json "${specs[@]}") || fail "threads: $msg"
echo "$msg"

tally_ok record --call-graph dwarf -F 2000 -o forker.db -- "$WORKLOADS/forker" 3 120 120
grep -q '^exec ' out || fail "forker printed no 'exec PID' line: $(head -c 600 out)"
report_json forker.json -i forker.db --tree --percent-limit 0
specs=()
for f in child_fn_0 child_fn_1 child_fn_2 grandchild_fn; do
	specs+=("$f:forker:$MAIN_ROOTS:main:forker")
done
for f in work_a work_b; do
	specs+=("$f:split_funcs:$MAIN_ROOTS:main:split_funcs")
done
msg=$(python3 -c "$CHECK_PY" forker.json "${specs[@]}") || fail "forker: $msg"
echo "$msg"
