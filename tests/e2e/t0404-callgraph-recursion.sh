#!/bin/bash
# recursion (the recurse workload: self_rec calls itself, ping and pong call
# each other, DEPTH levels deep, the work at the bottom): recursion counts once
# per stack, so no function's inclusive share exceeds 100% and self_rec and
# ping/pong get the shares the workload measured; every report finishes
# quickly; 300 levels deep, -g stops at the kernel's depth limit and
# --call-graph dwarf at the end of its 16 KiB stack copy, both keeping the
# stack as far as it went and counting it as stopped early, without crashing.
. "$SRCDIR/tests/e2e/lib.sh"

# run_report OUT ARGS...: tally report ARGS... into OUT, which must finish
# within 30 s (not hang) and exit 0 (not crash)
run_report() {
	local out=$1 rc=0
	shift
	timeout 30 "$TALLY" report "$@" >"$out" 2>"$out.err" || rc=$?
	((rc != 124)) || fail "'tally report $*' did not finish within 30 s"
	((rc == 0)) || fail "'tally report $*' exited $rc; stderr: $(head -c 1000 "$out.err")"
}

# check JSON TRUTHFILE MODE: inclusive <= 100%, shares as measured; MODE
# shallow (stacks complete), fp300 (-g, 300 deep) or dwarf300
CHECK_PY='
import json, sys
sys.setrecursionlimit(100000)
path, truthfile, mode = sys.argv[1:4]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
ev = json.load(open(path))["events"][0]
errs, notes = [], []
total = ev["samples"]
fns = ev.get("functions", [])
for f in fns:
    if f.get("inclusive_percent", 0) > 100.0001 or f.get("inclusive", 0) > total:
        errs.append("%s [%s]: inclusive %s (%s%%) of %d samples" % (f.get("name"), f.get("image"), f.get("inclusive"), f.get("inclusive_percent"), total))
    if f.get("self", 0) > f.get("inclusive", 0):
        errs.append("%s: self %s > inclusive %s" % (f.get("name"), f.get("self"), f.get("inclusive")))
    for side in ("callers", "callees"):
        for c in f.get(side, []):
            if c.get("percent", 0) > 100.0001 or c.get("samples", 0) > f.get("inclusive", 0):
                errs.append("%s %s %s: %s samples (%s%%) of its %s inclusive" % (f.get("name"), side, c.get("name"), c.get("samples"), c.get("percent"), f.get("inclusive")))
def incl(name):
    x = [f for f in fns if f.get("name") == name and f.get("image") == "recurse"]
    return x[0].get("inclusive_percent") if x else None
# a share is off by chance by its binomial error (4 sigmas of its samples),
# and by at most the samples the ring lost (the ASan build on a busy machine
# lost 8 to 136 of 500 here; a loss comes in bursts, so in one function)
lost = json.load(open(path)).get("lost", 0)
for name, t in (("self_rec", "self_rec"), ("ping", "ping"), ("pong", "ping"), ("flat_work", "flat_work")):
    got = incl(name)
    p = truth[t] / 100
    tol = 400 * (p * (1 - p) / max(total, 1)) ** 0.5 + 100.0 * lost / max(total + lost, 1)
    if got is None or abs(got - truth[t]) > tol:
        errs.append("%s inclusive is %s%%, the workload measured %.2f%% (%s); %d samples, %d lost: %.2f points allowed" % (name, got, truth[t], t, total, lost, tol))
    else:
        notes.append("%s inclusive %.2f%% (truth %s %.2f)" % (name, got, t, truth[t]))
u = ev.get("unwind") or {}
rooted = u.get("rooted_percent", -1)
deep = truth["self_rec"] + truth["ping"]
stops = u.get("stops") or []
stopped = u.get("samples", 0) - u.get("rooted", 0)
if mode == "shallow":
    if rooted <= 90:
        errs.append("40 levels deep, only %.2f%% of samples reached a process root" % rooted)
else:
    # the recursion is deeper than the unwinder goes: those stacks stopped early
    if 100 - rooted < deep - 10:
        errs.append("300 levels deep, %.2f%% of samples stopped early; the recursion had %.2f%% of the time" % (100 - rooted, deep))
    inrec = sum(s.get("samples", 0) for s in stops if s.get("image") == "recurse" and s.get("name") in ("self_rec", "ping", "pong"))
    if inrec < 0.9 * stopped:
        errs.append("of %d samples that stopped early only %d stopped in self_rec/ping/pong; stops: %s" % (stopped, inrec, [(s.get("name"), s.get("samples")) for s in stops]))
    notes.append("%.2f%% stopped early, %d of them in the recursion" % (100 - rooted, inrec))
    if mode == "fp300" and u.get("truncated", 0) < 0.9 * inrec:
        errs.append("-g: %s samples counted at the depth limit, but %d stopped in the recursion" % (u.get("truncated"), inrec))
if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
print("\n".join("ok: " + mode + ": " + n for n in notes))
'

# tree_depth JSON NAME: the depth of the deepest path in the JSON tree
tree_depth() {
	python3 -c '
import json, sys
sys.setrecursionlimit(100000)
best, todo = 0, [(n, 1) for n in json.load(open(sys.argv[1]))["events"][0].get("tree", [])]
while todo:
    n, d = todo.pop()
    best = max(best, d)
    todo.extend((c, d + 1) for c in n.get("children", []))
print(best)' "$1" || fail "cannot read the tree of $1"
}

# max_stack DB: the most frames of one stack in DB/stacks (read as text:
# COUNT:WEIGHT PID LABEL FRAME...)
max_stack() {
	stacks_text "$1" >"$1.stacks.txt"
	awk '!/^#/ && NF > 3 { if (NF - 3 > m) m = NF - 3 } END { print m + 0 }' "$1.stacks.txt"
}

# reports DB: every call-graph report of DB, text and JSON, finishes and
# exits 0, the text with an unwind line, the JSON valid; the JSON of the last
# (--callers ping) stays in DB.json
reports() {
	local db=$1 q i=0 jsons=()
	run_report "$db.children.json" -i "$db" --children --json
	for q in --children --callgraph --tree "--callers self_rec" "--callees main" "--callers ping"; do
		read -ra o <<<"$q"
		run_report "$db.txt" -i "$db" "${o[@]}"
		grep -q '^unwind: ' "$db.txt" || fail "$db: 'tally report $q' has no unwind line: $(head -c 600 "$db.txt")"
		i=$((i + 1))
		run_report "$db.$i.json" -i "$db" "${o[@]}" --json --percent-limit 0
		jsons+=("$db.$i.json")
	done
	cp "$db.$i.json" "$db.json"
	python3 -c '
import json, sys
sys.setrecursionlimit(100000)
for p in sys.argv[1:]:
    try:
        json.load(open(p))
    except ValueError as e:
        sys.exit("%s: %s" % (p, e))' "${jsons[@]}" || fail "$db: a call-graph report printed invalid JSON (see above)"
}

# 40 levels: every stack complete
tally_ok record -g -F 2000 -o shallow -- "$WORKLOADS/recurse" 40 300
cp out shallow.truth
reports shallow
msg=$(python3 -c "$CHECK_PY" shallow.children.json shallow.truth shallow) || fail "-g, 40 levels: $msg"
echo "$msg"

# 300 levels, -g: the kernel's frame-pointer chain stops at max-stack
tally_ok record -g -F 2000 -o fp300 -- "$WORKLOADS/recurse" 300 300
cp out fp300.truth
reports fp300
msg=$(python3 -c "$CHECK_PY" fp300.children.json fp300.truth fp300) || fail "-g, 300 levels: $msg"
echo "$msg"
grep -Eq '^unwind: .*stopped early \([0-9.]+% at the depth limit\)' fp300.txt ||
	fail "-g, 300 levels: the unwind line does not count stacks at the depth limit: $(grep '^unwind' fp300.txt)"

# 300 levels, dwarf: the 16 KiB copy holds about 250 levels of 64 bytes
tally_ok record --call-graph dwarf -F 2000 -o dwarf300 -- "$WORKLOADS/recurse" 300 300
cp out dwarf300.truth
reports dwarf300
msg=$(python3 -c "$CHECK_PY" dwarf300.children.json dwarf300.truth dwarf300) || fail "--call-graph dwarf, 300 levels: $msg"
echo "$msg"
grep -Eq '^unwind: [0-9.]+% of [0-9]+ samples reached a process root.*; [0-9.]+% stopped early' dwarf300.txt ||
	fail "--call-graph dwarf, 300 levels: the unwind line does not count stacks stopped early: $(grep '^unwind' dwarf300.txt)"
# kept as far as it unwound: beyond the 127 frames of the kernel's chain
n=$(max_stack dwarf300)
((n >= 200)) || fail "--call-graph dwarf, 300 levels: the longest stack in 'stacks' has $n frames, expected the ~250 levels a 16 KiB copy holds"
# ... and no further: 301 levels, main, libc's start, _start and a few kernel frames at most
((n <= 330)) || fail "--call-graph dwarf, 300 levels: the longest stack in 'stacks' has $n frames, more than the program ever had (301 levels of recursion and a few frames around them)"
d=$(tree_depth dwarf300.json)
((d >= 200)) || fail "--call-graph dwarf, 300 levels: --callers ping reaches only $d levels up, expected >= 200 (ping and pong alternate)"
note "--call-graph dwarf, 300 levels: longest stack $n frames, --callers ping $d levels"
