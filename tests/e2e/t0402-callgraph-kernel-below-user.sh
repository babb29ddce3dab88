#!/bin/bash
# split_kernel (half its time in read() of /dev/zero) with --call-graph dwarf
# and with -g: kernel frames (image `kernel`) sit below the user frames that
# made the system call, never above them: in the --tree no user node has a
# kernel ancestor, no kernel function calls a user function, and the kernel
# samples hang under libc's read (and, with dwarf, under the workload's
# kernel_read), with the kernel share the workload measured.
. "$SRCDIR/tests/e2e/lib.sh"

CHECK_PY='
import json, sys
path, truthfile, mode = sys.argv[1:4]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
ev = json.load(open(path))["events"][0]
errs, notes = [], []
K = "kernel"
# what must be above the kernel part: the syscall wrapper, and with dwarf the
# workload function calling it (a frame-pointer walk skips kernel_read, whose
# callee read() sets up no frame)
need = ["read"] + (["kernel_read"] if mode == "dwarf" else [])

under = {n: 0 for n in need}   # kernel samples with n above them
kernel_total = 0               # samples whose leaf part is in the kernel
kernel_topmost = 0             # ... whose stack is kernel frames only
bad = []

def walk(node, above):
    global kernel_total, kernel_topmost
    img, name = node.get("image"), node.get("name")
    if img == K and not any(a[1] == K for a in above):
        # the first kernel frame of this path: everything below is kernel
        kernel_total += node["samples"]
        if not above:
            kernel_topmost += node["samples"]
        for n in need:
            if any(a[0] == n for a in above):
                under[n] += node["samples"]
    if img != K and any(a[1] == K for a in above):
        bad.append("%s [%s] under %s" % (name, img, " <- ".join("%s [%s]" % a for a in reversed(above))))
    for c in node.get("children", []):
        walk(c, above + [(name, img)])

for t in ev.get("tree", []):
    walk(t, [])
if bad:
    errs.append("%d user frame(s) below kernel frames, e.g. %s" % (len(bad), bad[0]))
total = ev["samples"]
kpct = 100.0 * kernel_total / total
if abs(kpct - truth["kernel"]) > 5:
    errs.append("kernel samples (by the tree) are %.2f%% of %d, the workload measured %.2f%%" % (kpct, total, truth["kernel"]))
else:
    notes.append("kernel part: %.2f%% of %d samples (truth %.2f)" % (kpct, total, truth["kernel"]))
if kernel_topmost > 0.05 * kernel_total:
    errs.append("%d of %d kernel samples have no user frame above them" % (kernel_topmost, kernel_total))
for n in need:
    if under[n] < 0.9 * kernel_total:
        errs.append("only %d of %d kernel samples are below %s" % (under[n], kernel_total, n))
    else:
        notes.append("%d of %d kernel samples below %s" % (under[n], kernel_total, n))

# arcs: a kernel function never has a user callee, a user function no kernel caller
for f in ev.get("functions", []):
    if f.get("image") == K:
        for c in f.get("callees", []):
            if c.get("image") != K:
                errs.append("kernel function %s calls %s [%s]" % (f["name"], c.get("name"), c.get("image")))
    else:
        for c in f.get("callers", []):
            if c.get("image") == K:
                errs.append("%s [%s] is called by kernel function %s" % (f.get("name"), f.get("image"), c.get("name")))
# read: its callees are kernel frames holding nearly all of its time
rd = [f for f in ev.get("functions", []) if f.get("name") == "read" and f.get("image", "").startswith("libc")]
if not rd:
    errs.append("no function read [libc.so.6] in the call graph")
else:
    kin = sum(c["samples"] for c in rd[0].get("callees", []) if c.get("image") == K)
    if kin < 0.9 * rd[0]["inclusive"]:
        errs.append("read [libc] has %d inclusive samples but only %d in kernel callees" % (rd[0]["inclusive"], kin))
if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
print("\n".join("ok: " + mode + ": " + n for n in notes))
'

for mode in dwarf fp; do
	if [[ $mode == dwarf ]]; then opt=(--call-graph dwarf); else opt=(-g); fi
	tally_ok record "${opt[@]}" -F 2000 -o "$mode" -- "$WORKLOADS/split_kernel" 400
	cp out "$mode.truth"
	report_json "$mode.json" -i "$mode" --tree --percent-limit 0
	msg=$(python3 -c "$CHECK_PY" "$mode.json" "$mode.truth" "$mode") || fail "${opt[*]}: $msg"
	echo "$msg"
done

# the text --callers of the kernel's read path: read above it, the workload above read
report_text callers.txt -i dwarf --callers ksys_read
python3 - callers.txt <<'EOF' || fail "--callers ksys_read (dwarf): read [libc.so.6] and kernel_read [split_kernel] are not its callers: $(head -c 1500 callers.txt)"
import re, sys
rows = [re.match(r"^( *)(\d+\.\d\d)% +(\d+(?:\.\d)?)  (\S.*?)  \[([^\]]+)\]$", l) for l in open(sys.argv[1])]
rows = [(len(m.group(1)) + len(m.group(2)), float(m.group(2)), m.group(4), m.group(5)) for m in rows if m]
names = [(r[2], r[3]) for r in rows]
assert rows and names[0] == ("ksys_read", "kernel"), names[:3]
def level(r):
    return (r[0] - 7) // 2
# along the heaviest path up from ksys_read: kernel frames, then read, then kernel_read
path = [rows[0]]
for r in rows[1:]:
    if level(r) == level(path[-1]) + 1:
        path.append(r)
imgs = [r[3] for r in path]
first_user = next(i for i, x in enumerate(imgs) if x != "kernel")
assert all(x != "kernel" for x in imgs[first_user:]), imgs
assert ("read", "libc.so.6") in [(r[2], r[3]) for r in path], path
assert ("kernel_read", "split_kernel") in [(r[2], r[3]) for r in path], path
assert path[first_user][2] == "read", path
EOF
note "--callers ksys_read: kernel frames, then read [libc.so.6], then kernel_read [split_kernel]"
