#!/bin/bash
# A JIT workload's archive (its perf map and jitdump are copies inside the
# database, and the runtime's files are gone): moved elsewhere, report
# --symbols names jit_alpha and jit_beta as the database did, --lines gives
# jit_beta's loop lines and annotate --asm its instructions, from the tarball.
. "$SRCDIR/tests/e2e/lib.sh"

rc=0
"$TALLY" record -F 2000 -o db -- "$WORKLOADS/jitwork" 600 "$TMP" >"$TMP/out" 2>"$TMP/err" || rc=$?
grep -q '^skip:' "$TMP/out" && skip "$(grep '^skip:' "$TMP/out")"
((rc == 0)) || fail "tally record jitwork exited $rc: $(head -c 1000 "$TMP/err")"
pid=$(workload_pid)
rm -f "/tmp/perf-$pid.map" "$TMP"/jit-*.dump

rows() { "$TALLY" report -i "$1" "$2" 2>"$TMP/rows.err" | grep -v '^#' || fail "report -i $1 $2: $(cat "$TMP/rows.err")"; }
asm() {
	"$TALLY" annotate -i "$1" jit_beta --asm --json 2>"$TMP/asm.err" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("database",None); print(json.dumps(d,sort_keys=True))' ||
		fail "annotate -i $1 jit_beta: $(cat "$TMP/asm.err")"
}
rows db --symbols >ref.txt
rows db --lines >refl.txt
asm db >refa.txt
grep -q jit_alpha ref.txt && grep -q jit_beta ref.txt || fail "the database names no jit_alpha/jit_beta: $(cat ref.txt)"

tally_ok archive -i db -o j.tar.zst
mkdir moved && mv j.tar.zst moved/ && rm -rf db
diff ref.txt <(rows moved/j.tar.zst --symbols) >/dev/null || fail "--symbols differ: $(diff ref.txt <(rows moved/j.tar.zst --symbols) | head)"
diff refl.txt <(rows moved/j.tar.zst --lines) >/dev/null || fail "--lines differ: $(diff refl.txt <(rows moved/j.tar.zst --lines) | head)"
diff refa.txt <(asm moved/j.tar.zst) >/dev/null || fail "annotate --asm of jit_beta differs"
grep -q '"dec rax"\|dec rax' refa.txt || fail "test setup: annotate shows no 'dec rax' of jit_beta"
note "JIT names, lines and code from the archive"
