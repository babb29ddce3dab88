#!/bin/bash
# Damaged JIT descriptions: a perf map with a malformed line, jitdumps with a
# bad magic, a wrong version or a truncated record, files owned by another
# user, a damaged copy in the database. Each time: no crash, a one-line
# warning naming the problem, and the report goes on with what it can name
# (what nothing names is nomap).
. "$SRCDIR/tests/e2e/lib.sh"

# warned WHAT FILE REGEX: FILE (stderr) has exactly one line matching REGEX
warned() {
	local n
	n=$(grep -Ec -- "$3" "$2" || true)
	((n == 1)) || fail "$1: expected one warning matching /$3/, got $n: $(head -c 1000 "$2")"
	note "$1: $(grep -E -- "$3" "$2")"
}

# --- a perf map with a malformed line (jitter writes one)
perf_map() {
	local pid
	tally_ok record -F 2000 -o map.db -- "$WORKLOADS/jitter" 500
	pid=$(workload_pid)
	rm -f "/tmp/perf-$pid.map"
	cp "$TMP/out" jitter.out
	report_json map.json -i map.db --symbols
	check_split func map.json jitter.out jit_spin native_spin
	warned "perf map with a malformed line" map.json.err "^tally: warning: image 'jit': the JIT map of pid $pid had 1 malformed line \(skipped; the first: line 2: START is not a hex number of at most 16 digits, in 'this line is malformed' \(expected 'START SIZE NAME'\)\)$"
}

# --- jitdumps that are damaged
run_jitwork() {
	local mode=$1 rc=0
	"$TALLY" record -F 2000 -o "$mode.db" -- "$WORKLOADS/jitwork" 500 "$TMP" "$mode" >"$mode.out" 2>"$mode.err" || rc=$?
	grep -q '^skip:' "$mode.out" && skip "$(grep '^skip:' "$mode.out")"
	((rc == 0)) || fail "record jitwork $mode exited $rc: $(head -c 1000 "$mode.err")"
	rm -f "/tmp/perf-$(workload_pid "$mode.out").map"
}

# bad_header MODE: a dump with a bad magic or version is not used at all
bad_header() {
	local mode=$1 pid why re a b nm share
	run_jitwork $mode
	pid=$(workload_pid $mode.out)
	case $mode in
	badmagic) why="bad magic 0x12345678 \(a jitdump starts with 'JiTD'\)" ;;
	badversion) why="jitdump version 99, and tally reads version 1" ;;
	esac
	re="^tally: warning: jitdump '$TMP/jit-$pid.dump' of pid $pid: $why: not used \(its code counts as nomap\)$"
	warned "record, jitdump with $mode" $mode.err "$re"
	report_json $mode.json -i $mode.db --symbols
	warned "report, jitdump with $mode" $mode.json.err "$re"
	# the map still names jit_alpha; jit_beta's time is nomap
	a=$(tjson $mode.json func jit_alpha)
	b=$(tjson $mode.json func jit_beta)
	((a > 0)) || fail "$mode: jit_alpha (named by the perf map) has no samples: $(tjson $mode.json funcs | tr '\n' ' ')"
	((b == 0)) || fail "$mode: jit_beta is named from an unusable jitdump ($b samples)"
	nm=$(tjson $mode.json image nomap)
	share=$(awk -v n="$nm" -v a="$a" 'BEGIN { printf "%.2f", 100 * n / (n + a) }')
	share_near "$share" $((nm + a)) "$(truth jit_beta $mode.out)" "$mode: nomap share (jit_beta's time)"
}

# a truncated dump: what came before the cut is kept
truncated() {
	local pid re
	run_jitwork truncated
	pid=$(workload_pid truncated.out)
	re="^tally: warning: jitdump '$TMP/jit-$pid.dump' of pid $pid: truncated record at byte [0-9]+: it claims 4096 bytes, the file has 24 left \(the rest is ignored\)$"
	warned "record, truncated jitdump" truncated.err "$re"
	report_json truncated.json -i truncated.db --symbols
	warned "report, truncated jitdump" truncated.json.err "$re"
	# what came before the cut still names jit_beta
	check_split func truncated.json truncated.out jit_alpha jit_beta
}

# --- files another user owns are not trusted
foreign() {
	local n
	(($(id -u) == 0)) || skip "not root: cannot hand files to another user"
	run_jitwork foreign
	report_json foreign.json -i foreign.db --symbols
	warned "report, another user's map and dump" foreign.json.err \
		"^tally: warning: 2 JIT map\(s\) or jitdump\(s\) belonged to another user than their process's: not trusted, that code counts as nomap$"
	n=$(tjson foreign.json funcs | grep -c '^jit_' || true)
	((n == 0)) || fail "functions named from untrusted files: $(tjson foreign.json funcs | tr '\n' ' ')"
	! ls foreign.db/jit 2>/dev/null || fail "the database copied untrusted JIT files: $(ls foreign.db/jit)"
}

# --- a damaged copy in the database: a damaged line costs what depends on it,
# the rest goes on, and the warning says which line and what was wrong
damaged_copy() {
	local copy a b
	run_jitwork ok
	copy=$(ls ok.db/jit/jitdump-*.txt)
	cp "$copy" copy.orig
	sed -i 's/^code \(.*\)$/code \1zz/' "$copy"
	report_json dmg.json -i ok.db --symbols
	warned "report, damaged code line" dmg.json.err "^tally: warning: image 'jit': '$copy' line [0-9]+: the code of the function at 0x[0-9a-f]+ has 36 hex digits, its size 0x11 needs 34: its code is dropped \(the rest of the copy is used; record again for a whole one\)$"
	a=$(tjson dmg.json func jit_alpha)
	((a > 0)) || fail "damaged jitdump copy: jit_alpha (from the map copy) is gone too"
	b=$(tjson dmg.json func jit_beta)
	((b > 0)) || fail "a damaged code line cost jit_beta its name too"
	# its lines are still there, its code is not
	"$TALLY" annotate -i ok.db --samples jit_beta --asm --json >dmg.a.json 2>dmg.a.err || fail "annotate jit_beta failed: $(cat dmg.a.err)"
	python3 - dmg.a.json <<'EOF' || fail "annotate jit_beta with a damaged code line: $(head -c 1500 dmg.a.json)"
import json, sys
f = json.load(open(sys.argv[1]))["functions"][0]
assert not f.get("instructions"), "instructions from a dropped code line: %s" % f.get("instructions")
assert any(l["file"] == "jitbeta.src" and l["samples"] for l in f["lines"]), f["lines"]
EOF
	# a damaged func line: that function is unnamed, the other stays
	sed 's/^func \([0-9a-f]*\) 11 /func \1 zz /' copy.orig >"$copy"
	report_json dmgf.json -i ok.db --symbols
	warned "report, damaged func line" dmgf.json.err "^tally: warning: image 'jit': '$copy' line [0-9]+: expected 'func ADDR SIZE INDEX NAME' .*: its function is skipped \(the rest of the copy is used; record again for a whole one\)$"
	a=$(tjson dmgf.json func jit_alpha)
	((a > 0)) || fail "damaged func line: jit_alpha (from the map copy) is gone too"
	b=$(tjson dmgf.json func jit_beta)
	((b == 0)) || fail "damaged func line: jit_beta still named ($b samples)"
}

subtest "a perf map with a malformed line" perf_map
subtest "a jitdump with a bad magic" bad_header badmagic
subtest "a jitdump of another version" bad_header badversion
subtest "a truncated jitdump" truncated
subtest "another user's map and dump are not trusted" foreign
subtest "a damaged jitdump copy in the database" damaged_copy
