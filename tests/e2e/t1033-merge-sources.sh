#!/bin/bash
# tally merge takes every kind of input reports read: a daemon's database
# (its epochs merged, or those --epoch selects), a bundle from `tally ctl
# drain` (here written by hand in its documented format), an archive from
# `tally archive`, and a database
# whose JIT code is named by copies of its perf map and jitdump: the merge
# keeps those copies (read before the bundle's unpacked files go away), so
# JIT functions keep their names; the inputs' samples add up under their run
# labels.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 999 -o a.db -- "$WORKLOADS/split_funcs" 200
tally_ok record -F 999 -o c.db -- "$WORKLOADS/split_funcs" 200
rc=0
"$TALLY" record -F 999 -o j.db -- "$WORKLOADS/jitwork" 400 "$TMP" >jit.out 2>jit.err || rc=$?
grep -q '^skip:' jit.out && skip "$(grep '^skip:' jit.out)"
((rc == 0)) || fail "tally record jitwork exited $rc: $(head -c 1000 jit.err)"
rm -f "/tmp/perf-$(workload_pid jit.out).map"

# a daemon's directory of two epochs
mkdir -m 700 dd
printf 'format-version: 1\nlayout: epochs\n' >dd/tally-daemon
cp -r a.db dd/202611211300
cp -r c.db dd/202611211400
# the JIT database as a bundle (docs/format.md, "Bundles")
python3 - j.db j.bundle <<'PY'
import os, sys
src, out = sys.argv[1:3]
names = []
for d, _, fs in os.walk(src):
    for f in fs:
        names.append(os.path.relpath(os.path.join(d, f), src))
with open(out, "wb") as o:
    o.write(b"tally-bundle: 1\n")
    for n in sorted(names):
        data = open(os.path.join(src, n), "rb").read()
        o.write(b"file: %d %s\n" % (len(data), n.encode()))
        o.write(data + b"\n")
    o.write(b"end: %d files\n" % len(names))
PY
tally_ok report -i j.bundle --symbols

tally_ok merge -o m.db dd j.bundle
python3 - m.db/labels <<'PY' || fail "labels (above)"
import sys
runs = sorted(f.split("=", 1)[1] for l in open(sys.argv[1]) if not l.startswith("#") for f in l.rstrip("\n").split("\t")[1:] if f.startswith("run="))
if runs != ["dd", "j.bundle"]:
    sys.exit("runs %s" % runs)
print("ok: one label set per input: %s" % runs)
PY
s() { sed -n 's/^samples: //p' "$1/session"; }
[[ $(s m.db) == $(($(s a.db) + $(s c.db) + $(s j.db))) ]] || fail "m.db has $(s m.db) samples, a + c + j $(s a.db) + $(s c.db) + $(s j.db)"
ls m.db/jit/perf-*.map >/dev/null 2>&1 || fail "the merge lost the JIT map copy: $(ls -R m.db | tr '\n' ' ')"
report_json mj.json -i m.db --symbols --label run=j.bundle
report_json j.json -i j.db --symbols
for f in jit_alpha jit_beta; do
	n=$(tjson j.json func "$f")
	((n > 0)) || fail "test setup: j.db has no samples in $f"
	[[ $(tjson mj.json func "$f") == "$n" ]] || fail "$f: $(tjson mj.json func "$f") samples in the merge (run=j.bundle), $n in j.db"
done
note "JIT functions named from the merged copies: jit_alpha $(tjson mj.json func jit_alpha), jit_beta $(tjson mj.json func jit_beta)"

# an archive (tally archive) is an input like the others
tally_ok archive -i a.db -o a.arch
tally_ok merge -o ar.db archive:a.arch c.db
[[ $(s ar.db) == $(($(s a.db) + $(s c.db))) ]] || fail "ar.db has $(s ar.db) samples, a + c $(s a.db) + $(s c.db)"
grep -qP '\trun=archive:a\.arch$' ar.db/labels || fail "no label set of the archive: $(cat ar.db/labels)"

# --epoch selects the daemon's epochs
tally_ok merge -o e.db --epoch 202611211400 dd
[[ $(s e.db) == "$(s c.db)" ]] || fail "--epoch 202611211400: $(s e.db) samples, that epoch has $(s c.db)"
expect_fail_with "^tally: --epoch: 'a\.db' is not a daemon database" "$TALLY" merge -o e2.db --epoch 202611211400 dd a.db
