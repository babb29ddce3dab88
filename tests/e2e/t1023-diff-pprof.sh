#!/bin/bash
# tally diff --format pprof writes NEW and its base for `go tool pprof
# -diff_base BASE NEW`, which reads them: in the default (time) sample type
# each function's flat% is tally's change in points (the base's weights
# scaled to the new total), in the samples type its flat is NEW's samples
# minus BASE's (tally diff --samples); the two builds (different build-ids) diff by function name;
# with --absolute the time values are each side's own weights; -o names the
# files.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
need_tool go golang-go

build_split base -DW_A=6 -DW_B=3 -DW_C=1 -DW_OLD=2
build_split new -DW_A=2 -DW_B=3 -DW_C=5 -DW_NEW=2
record_split base.db base.truth base 500 -g -F 2000
record_split new.db new.truth new 500 -g -F 2000
"$TALLY" diff base.db new.db --json >d.json || fail "tally diff --json failed"
"$TALLY" diff base.db new.db --json --samples >ds.json || fail "tally diff --json --samples failed"

tally_ok diff base.db new.db --format pprof -o d.pb.gz
[[ -s d.pb.gz && -s d.base.pb.gz ]] || fail "--format pprof -o d.pb.gz did not write d.pb.gz and d.base.pb.gz: $(ls)"
grep -q "go tool pprof -diff_base 'd.base.pb.gz' 'd.pb.gz'" err || fail "no hint how to read them: $(cat err)"

gopprof_ok t.txt -top -nodefraction=0 -edgefraction=0 -nodecount=1000 -diff_base d.base.pb.gz d.pb.gz
gopprof_ok s.txt -top -sample_index=samples -nodefraction=0 -edgefraction=0 -nodecount=1000 -diff_base d.base.pb.gz d.pb.gz
python3 - d.json t.txt s.txt ds.json <<'PY' || fail "go tool pprof -diff_base (above)"
import json, re, sys
rows = {r["function"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["image"] == "split_w"}
srows = {r["function"]: r for r in json.load(open(sys.argv[4]))["rows"] if r["image"] == "split_w"}
def top(path):
    out = {}
    for l in open(path):
        m = re.match(r"^\s*(-?[0-9.]+)(\S*)\s+([0-9.]+)%\s+\S+\s+(-?[0-9.]+)\S*\s+([0-9.]+)%\s+(\S+)$", l)
        if m:
            out[m.group(6)] = (float(m.group(1)), float(m.group(3)))
    return out
t, s = top(sys.argv[2]), top(sys.argv[3])
errs = []
for f in ("work_a", "work_b", "work_c", "old_work", "new_work"):
    r = rows[f]
    sr = srows[f]
    # pprof -top leaves out a function whose value is zero: only then may it be missing
    sdiff = sr["new_samples"] - sr["base_samples"]
    if f not in s and sdiff == 0:
        s[f] = (0.0, 0.0)
    if f not in t and abs(r["change_points"]) < 0.005:
        t[f] = (0.0, 0.0)
    if f not in t or f not in s:
        errs.append("%s missing from pprof -top (tally: %+.4f points, %+d samples)" % (f, r["change_points"], sdiff))
        continue
    flat, pct = t[f]
    # flat% is unsigned; the sign is flat's
    got = pct if flat >= 0 else -pct
    if abs(got - r["change_points"]) > 0.06:
        errs.append("%s: pprof flat%% %+.2f, tally's change %+.2f points" % (f, got, r["change_points"]))
    else:
        print("ok: %s: pprof -diff_base flat%% %+.2f, tally %+.4f points" % (f, got, r["change_points"]))
    if s[f][0] != sdiff:
        errs.append("%s: pprof samples flat %s, tally new %d - base %d" % (f, s[f][0], sr["new_samples"], sr["base_samples"]))
if errs:
    sys.exit("; ".join(errs))
PY

# --absolute: each side's own time, so the base's total is its own
tally_ok diff base.db new.db --format pprof --absolute -o abs.pb.gz
gopprof_ok b.txt -top -unit=ns abs.base.pb.gz
gopprof_ok b0.txt -top -unit=ns d.base.pb.gz
tb=$(sed -nE 's/.*Total samples = ([0-9.]+)ns.*/\1/p' b.txt)
tn=$(sed -nE 's/.*Total samples = ([0-9.]+)ns.*/\1/p' b0.txt)
gopprof_ok n.txt -top -unit=ns abs.pb.gz
tnew=$(sed -nE 's/.*Total samples = ([0-9.]+)ns.*/\1/p' n.txt)
awk -v a="$tn" -v b="$tnew" 'BEGIN { exit !(a >= b * 0.999 && a <= b * 1.001) }' ||
	fail "normalized base's time total $tn ns is not the new one's $tnew ns"
e=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["base"]["value"])' d.json)
awk -v t="$tb" -v e="$e" 'BEGIN { exit !(t >= e * 0.999 - 1 && t <= e * 1.001 + 1) }' ||
	fail "--absolute: the base's time total $tb ns is not its weight, $e ns"
note "base time: $tb ns as recorded, $tn ns normalized (new: $tnew ns)"

# another name than .pb.gz: FILE.base
tally_ok diff base.db new.db --format pprof -o d.prof
[[ -s d.prof && -s d.prof.base ]] || fail "-o d.prof did not write d.prof and d.prof.base"
