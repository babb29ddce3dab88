#!/bin/bash
# node with --perf-prof --perf-prof-unwinding-info (a jitdump with the JIT
# code's CFI), two seconds of its CPU in JavaScript (a numeric loop, JSON):
# `record --call-graph dwarf` unwinds through the JIT frames to a process
# root (_start, a thread start) in at least 97% of the samples (issue 32).
# With -g (frame pointers with CFI at the top of the stack) the figure is
# noted: node's own C++ has no frame pointers (Debian's build), so its
# start-up's stacks stop early whatever is done at their top.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-jit.sh"

command -v node >/dev/null || skip "node is not installed (Debian's nodejs package; scripts/deps.sh installs it)"
opts=$(node --v8-options 2>/dev/null) || skip "node --v8-options failed"
for f in --perf-prof --perf-prof-unwinding-info; do
	grep -Eq -- "^ *$f( |$)" <<<"$opts" || skip "this node ($(node --version)) has no $f"
done

cat >app.js <<'JS'
function hotLoop(n) { let s = 0; for (let i = 0; i < n; i++) { s += Math.sqrt(i) * (i & 7); } return s; }
function warmUp(n) { let x = 0; for (let k = 0; k < n; k++) x += hotLoop(20000); return x; }
function parseWork() { let t = 0; for (let k = 0; k < 200; k++) t += JSON.parse(JSON.stringify({ a: [1, 2, 3, k], b: "x" + k })).a[3]; return t; }
console.log("pid " + process.pid);
const c0 = process.cpuUsage(); let r = 0;
while (process.cpuUsage(c0).user < 2e6) { r += warmUp(10); r += parseWork(); }
console.log(r > 0 ? "done" : "?");
JS

# run NAME CALLGRAPH...: records node into NAME.db, its rooted share in NAME.sh
run() {
	local name=$1 rc=0
	shift
	"$TALLY" record -F 499 "$@" -o "$name.db" -- node --perf-prof --perf-prof-unwinding-info app.js \
		>"$name.out" 2>"$name.err" || rc=$?
	jit_cleanup "$(workload_pid "$name.out" 2>/dev/null || true)"
	rm -f jit-*.dump isolate-*.log
	((rc == 0)) || fail "record $* of node exited $rc: $(head -c 1000 "$name.err")"
	grep -q '^done$' "$name.out" || fail "$name: the script did not finish: $(cat "$name.out")"
	stack_shares "$name.db" >"$name.sh"
}

dwarf() {
	run dwarf --call-graph dwarf
	local rooted
	rooted=$(share_of rooted dwarf.sh)
	fcmp "$rooted" ">=" 97 ||
		fail "--call-graph dwarf: $rooted% of node's samples reached a root, expected >= 97 ($(share_of reasons dwarf.sh))"
	note "--call-graph dwarf: $rooted% of $(share_of samples dwarf.sh) samples reached a root"
}

fp() {
	run fp -g
	note "-g: $(share_of rooted fp.sh)% of $(share_of samples fp.sh) samples reached a root"
}

subtest "--call-graph dwarf reaches a root" dwarf
subtest "-g, noted" fp
