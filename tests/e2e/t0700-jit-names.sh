#!/bin/bash
# JIT code named by a perf map (jit_alpha) and by a jitdump (jit_beta, with
# line records): both names in the report with the workload's own split, the
# database keeps a text copy of the dump with only the sampled function, and
# annotate gives jit_beta's lines (its loop, lines 11-12) and instructions.
. "$SRCDIR/tests/e2e/lib.sh"

rc=0
"$TALLY" record -F 2000 -o db -- "$WORKLOADS/jitwork" 800 "$TMP" >"$TMP/out" 2>"$TMP/err" || rc=$?
grep -q '^skip:' "$TMP/out" && skip "$(grep '^skip:' "$TMP/out")"
((rc == 0)) || fail "tally record jitwork exited $rc: $(head -c 1000 "$TMP/err")"
pid=$(workload_pid)
rm -f "/tmp/perf-$pid.map"
[[ ! -s $TMP/err ]] || ! grep -q warning "$TMP/err" || fail "record warned about a good jitdump: $(cat "$TMP/err")"

report_json r.json -i db --symbols
check_split func r.json "$TMP/out" jit_alpha jit_beta
[[ ! -s r.json.err ]] || fail "report warned: $(cat r.json.err)"
# every anonymous sample was named: nothing is left to nomap
nomap=$(tjson r.json image nomap)
total=$(tjson r.json total)
fcmp "$nomap" "<=" "$((total / 50))" || fail "$nomap of $total samples are nomap though the map and the dump name all JIT code"

# the database's copy of the dump: only what had samples
copy=$(ls db/jit/jitdump-"$pid"-*.txt 2>/dev/null) || fail "no jit/jitdump-$pid-*.txt in the database: $(ls -R db | tr '\n' ' ')"
grep -q '^func [0-9a-f]* 11 2 jit_beta$' "$copy" || fail "the copy has no 'func ADDR 11 2 jit_beta' line: $(head -c 600 "$copy")"
! grep -q jit_unused "$copy" || fail "the copy keeps jit_unused, which never ran"
n=$(grep -c '^line ' "$copy")
((n == 4)) || fail "the copy has $n line records for jit_beta, the dump had 4"
grep -q "^code 4889f831d24801c248ffc875f84889d0c3$" "$copy" || fail "the copy has not jit_beta's code bytes: $(grep '^code' "$copy")"
ls db/jit/perf-"$pid"-*.map >/dev/null 2>&1 || fail "no copy of the perf map in the database"
note "copy of the jitdump: $(grep -c '^func' "$copy") function(s), $n line records"

# jitdump lines through annotate: the loop is lines 11 and 12
"$TALLY" annotate -i db --samples jit_beta --asm --json >a.json 2>a.err || fail "annotate jit_beta failed: $(cat a.err)"
python3 - a.json <<'EOF' || fail "annotate jit_beta: see above; output: $(head -c 1500 a.json)"
import json, sys
f = json.load(open(sys.argv[1]))["functions"]
assert len(f) == 1, "expected one function, got %d" % len(f)
f = f[0]
s = f["samples"]
assert s > 100, "only %d samples in jit_beta" % s
loop = sum(l["samples"] for l in f["lines"] if l["file"] == "jitbeta.src" and l["line"] in (11, 12))
assert loop >= 0.9 * s, "lines 11-12 (the loop) hold %d of %d samples: %s" % (loop, s, f["lines"])
ins = f["instructions"]
assert [i["asm"].split()[0] for i in ins] == ["mov", "xor", "add", "dec", "jne", "mov", "ret"], [i["asm"] for i in ins]
assert sum(i["samples"] for i in ins) == s, "instructions hold %d of %d samples" % (sum(i["samples"] for i in ins), s)
assert all(i["file"] == "jitbeta.src" for i in ins)
assert [i["line"] for i in ins] == [10, 10, 11, 12, 12, 13, 13], [i["line"] for i in ins]
hot = sum(i["samples"] for i in ins if i["line"] in (11, 12))
assert hot >= 0.9 * s
print("ok: jit_beta: %d samples, %d on the loop lines" % (s, loop))
EOF

# in text: the source is not on this machine, which annotate says, and the
# disassembly follows anyway
"$TALLY" annotate -i db --samples jit_beta >a.txt 2>a.err || fail "annotate jit_beta (text) failed: $(cat a.err)"
grep -q "source 'jitbeta.src' not found" a.txt || fail "annotate does not say jitbeta.src was not found: $(head -5 a.txt)"
grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9a-f]+  dec rax$' a.txt || fail "annotate shows no samples on 'dec rax': $(cat a.txt)"
# with the source: its text next to the counts
mkdir src
printf 'l%d\n' 1 2 3 4 5 6 7 8 9 >src/jitbeta.src
printf 'setup;\nloop: sum += n;\nwhile (--n);\nreturn sum;\n' >>src/jitbeta.src
"$TALLY" annotate -i db --samples jit_beta --source-dir src >s.txt 2>s.err || fail "annotate --source-dir failed: $(cat s.err)"
grep -Eq '^ +[0-9]+ +[0-9.]+% +12  while \(--n\);$' s.txt || fail "annotate --source-dir: line 12 has no samples or text: $(cat s.txt)"

# the perf-map function: names, but no code or lines to show
"$TALLY" annotate -i db --samples jit_alpha >p.txt 2>p.err || fail "annotate jit_alpha failed: $(cat p.err)"
grep -q "perf map" p.txt || fail "annotate jit_alpha does not say a perf map has no code: $(cat p.txt)"
note "annotate: jit_beta lines and instructions, jit_alpha by address"

# report --lines: the jitdump's line records name jit_beta's loop lines
"$TALLY" report -i db --lines >l.txt 2>l.err || fail "report --lines failed: $(cat l.err)"
grep -Eq '^ +[0-9.]+ +[0-9.]+% +[0-9.]+% +jitbeta\.src:1[12] +jit_beta$' l.txt ||
	fail "report --lines has no jitbeta.src:11/12 row for jit_beta: $(cat l.txt)"
note "report --lines: jit_beta at $(grep -Eo 'jitbeta\.src:[0-9]+' l.txt | head -1)"
