# Helpers for tally top's end-to-end tests (t13xx), sourced after lib.sh.

# top_shares FILE NAME...: from the last whole snapshot of tally top's text
# output in FILE (of those with at least half the samples of the fullest),
# the share of each function NAME among the NAMEs (so that kernel and libc
# rows do not count), one `NAME SHARE SAMPLES` line each.
# With --total the first column (inclusive with -g) is taken as is, not
# renormalized.
TOP_SHARES_PY='
import sys
args = sys.argv[1:]
raw = args[0] == "--total"
if raw:
    args = args[1:]
path, names = args[0], args[1:]
snaps, cur = [], None
for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("# tally top:"):
        cur = {"rows": [], "header": line}
        snaps.append(cur)
        continue
    if cur is None or not line.strip() or line.lstrip().startswith("share"):
        continue
    w = line.split()
    if not w[0].endswith("%"):
        continue  # the workload'"'"'s own lines, interleaved
    # share, [self share,] value, image, command, then the name, which may
    # hold blanks (a kernel or C++ function): counted from the left
    i = 2 if len(w) > 1 and w[1].endswith("%") else 1
    cur["rows"].append((float(w[0].rstrip("%")), float(w[i]), " ".join(w[i + 3:])))
snaps = [s for s in snaps if s["rows"]]
if not snaps:
    sys.exit("no snapshot with rows in " + path)
# the last snapshot that holds at least half as many samples of the NAMEs as
# the fullest: the window the command ended in can hold a few samples only
def mass(s):
    return sum(x[1] for x in s["rows"] if x[2] in names)
top = max(mass(s) for s in snaps)
rows = [s for s in snaps if mass(s) >= top / 2][-1]["rows"]
got = {}
for share, samples, name in rows:
    if name in names:
        s = got.setdefault(name, [0.0, 0.0])
        s[0] += share
        s[1] += samples
tot = sum(v[0] for v in got.values())
for n in names:
    v = got.get(n, [0.0, 0.0])
    print(n, "%.2f" % (v[0] if raw else (100 * v[0] / tot if tot else 0)), "%.1f" % v[1])
'
top_shares() {
	python3 -c "$TOP_SHARES_PY" "$@"
}

# top_check FILE TRUTHFILE TOL NAME...: the last snapshot's split of the NAMEs
# is the workload's measured split within TOL points.
top_check() {
	local file=$1 truthfile=$2 tol=$3 name share samples
	shift 3
	local shares
	shares=$(top_shares "$file" "$@") || fail "cannot read tally top's snapshots: $shares"
	while read -r name share samples; do
		near "$share" "$(truth "$name" "$truthfile")" "$tol" "tally top: $name ($samples samples in the window)"
	done <<<"$shares"
}

# snapshots FILE: how many snapshots FILE holds.
snapshots() {
	grep -c '^# tally top:' "$1" || true
}
