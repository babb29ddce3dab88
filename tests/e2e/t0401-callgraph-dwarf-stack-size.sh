#!/bin/bash
# --call-graph dwarf,SIZE with the smallest copy (64 bytes) on callsplit_nofp
# (no frame pointers to fall back on): leaf's stack up to _start does not fit,
# so far fewer samples reach a process root than with the default 16 KiB; the
# unwind line says so and unwind.stops names where unwinding stopped (a
# function of callsplit_nofp), and the frames the copy did hold still give
# the measured caller split.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record --call-graph dwarf -F 2000 -o full -- "$WORKLOADS/callsplit_nofp" 300
tally_ok record --call-graph dwarf,64 -F 2000 -o small -- "$WORKLOADS/callsplit_nofp" 300
cp out small.truth
[[ $(session_key full stack-size) == 16384 ]] || fail "--call-graph dwarf: session stack-size is '$(session_key full stack-size)', expected the default 16384"
[[ $(session_key small stack-size) == 64 ]] || fail "--call-graph dwarf,64: session stack-size is '$(session_key small stack-size)', expected 64"

report_json full.json -i full --children
report_json small.json -i small --children
report_text small.txt -i small --children

msg=$(python3 - full.json small.json small.truth small.txt <<'EOF'
import json, re, sys
full, small, truthfile, text = sys.argv[1:5]
truth = {w[1]: float(w[2]) for w in (l.split() for l in open(truthfile)) if len(w) == 3 and w[0] == "truth"}
errs, notes = [], []
IMG = "callsplit_nofp"

def ev(path):
    return json.load(open(path))["events"][0]

f, s = ev(full), ev(small)
fu, su = f.get("unwind") or {}, s.get("unwind") or {}
fr, sr = fu.get("rooted_percent"), su.get("rooted_percent")
if fr is None or sr is None:
    sys.exit("no unwind.rooted_percent in the JSON reports: %s / %s" % (fu, su))
if fr <= 95:
    errs.append("the full-size recording reached a root for only %.2f%% of samples (expected > 95%%)" % fr)
if sr > 20 or sr > fr - 50:
    errs.append("with a 64-byte copy %.2f%% of samples still reached a root (full size: %.2f%%); expected far fewer (< 20%%)" % (sr, fr))
notes.append("rooted: %.2f%% with 16 KiB, %.2f%% with 64 bytes" % (fr, sr))

stops = su.get("stops")
if not isinstance(stops, list) or not stops:
    errs.append("64-byte copy: unwind.stops is %r, expected the functions where unwinding stopped" % (stops,))
    stops = []
for st in stops:
    if not isinstance(st.get("samples"), int) or not isinstance(st.get("name"), str):
        errs.append("unwind.stops entry %r has no name and samples" % st)
tot = su.get("samples", 0)
stopped = tot - su.get("rooted", 0)
listed = sum(st.get("samples", 0) for st in stops)
if listed > stopped or (len(stops) < 5 and listed != stopped):
    errs.append("unwind.stops account for %d samples, but %d of %d stopped early" % (listed, stopped, tot))
own = sum(st["samples"] for st in stops if st.get("image") == IMG and st.get("name") in ("main", "caller_a", "caller_b", "leaf"))
if own < 0.9 * stopped:
    errs.append("only %d of the %d samples that stopped early stopped in main/caller_a/caller_b/leaf [%s]; stops: %s"
                % (own, stopped, IMG, [(x.get("name"), x.get("image"), x.get("samples")) for x in stops]))
if stops:
    notes.append("stops: " + ", ".join("%s [%s] %d" % (x.get("name"), x.get("image"), x.get("samples", 0)) for x in stops))

# the text unwind line
u = [l for l in open(text) if l.startswith("unwind:")]
m = re.match(r"^unwind: (\d+\.\d\d)% of (\d+) samples reached a process root.*; (\d+\.\d\d)% stopped early.*outermost frame: (.*)$", u[0]) if u else None
if not m:
    errs.append("64-byte copy: the unwind line is %r, expected `unwind: P%% of N samples reached a process root ...; Q%% stopped early ..., outermost frame: ...`" % (u[0] if u else None))
else:
    if abs(float(m.group(1)) - sr) > 0.006 or int(m.group(2)) != tot:
        errs.append("the unwind line (%s%% of %s) disagrees with the JSON (%.2f%% of %d)" % (m.group(1), m.group(2), sr, tot))
    if abs(float(m.group(3)) - (100 - sr)) > 0.02:
        errs.append("the unwind line says %s%% stopped early, the JSON %.2f%%" % (m.group(3), 100 - sr))
    if stops and stops[0]["name"] + "  [" not in m.group(4):
        errs.append("the unwind line's outermost frames %r do not name %s" % (m.group(4), stops[0]["name"]))

# what the 64 bytes held still counts: caller_a/caller_b inclusive
for name in ("caller_a", "caller_b"):
    fn = [x for x in s.get("functions", []) if x.get("name") == name and x.get("image") == IMG]
    got = fn[0].get("inclusive_percent") if fn else None
    if got is None or abs(got - truth[name]) > 5:
        errs.append("64-byte copy: %s inclusive is %s%%, the workload measured %.2f" % (name, got, truth[name]))
    else:
        notes.append("64-byte copy: %s inclusive %.2f%% (truth %.2f)" % (name, got, truth[name]))
if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
print("\n".join("ok: " + n for n in notes))
EOF
) || fail "$msg"
echo "$msg"

# and it says why: the copy was too small, not missing CFI
grep -Eq '^unwind: .*DWARF unwinds stopped early by cause: stack copy too small [1-9][0-9]*,' small.txt ||
	fail "64-byte copy: the unwind line does not blame the stack copy size: $(grep '^unwind:' small.txt)"
note "64-byte copy: cause given: $(grep -o 'stack copy too small [0-9]*' small.txt)"
