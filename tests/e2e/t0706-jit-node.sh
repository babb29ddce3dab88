#!/bin/bash
# node, as the README's JIT example runs it: with --perf-prof (a jitdump) and
# with --perf-basic-prof (a perf map), the script's own functions are named in
# the report, from the database's copy, without a warning. V8 writes garbage
# file names (binary bytes, empty names) into the debug entries of its
# baseline code; --no-opt keeps the hot functions there, so the copy must hold
# them as escaped text and read back whole.
. "$SRCDIR/tests/e2e/lib.sh"

command -v node >/dev/null || skip "node is not installed (Debian's nodejs package; scripts/deps.sh installs it)"
opts=$(node --v8-options 2>/dev/null) || skip "node --v8-options failed"
for f in --perf-prof --perf-basic-prof; do
	grep -Eq -- "^ *$f( |$)" <<<"$opts" || skip "this node ($(node --version)) has no $f"
done
flags=()
grep -Eq -- '^ *--opt( |$)' <<<"$opts" && flags+=(--no-opt)
note "node $(node --version), extra flags: ${flags[*]:-none}"

cat >app.js <<'EOF'
function hotLoop(n) { let s = 0; for (let i = 0; i < n; i++) { s += Math.sqrt(i) * (i & 7); } return s; }
function warmUp(n) { let x = 0; for (let k = 0; k < n; k++) x += hotLoop(20000); return x; }
console.log("pid " + process.pid);
const c0 = process.cpuUsage(); let r = 0;
while (process.cpuUsage(c0).user < 1e6) r += warmUp(10);
console.log(r > 0 ? "done" : "?");
EOF
# (a second of node's CPU time, not of the clock: on a busy machine a second
# of the clock held less of the script than of node's start-up, and the
# script's functions came under half of the samples)

# check_node NAME PERCENT: the report of NAME.db names hotLoop and warmUp from
# the JIT image (most of its samples, at least PERCENT of all, and 10 at
# least), says nothing, and leaves little to nomap
check_node() {
	local name=$1 pct=$2
	grep -q '^done$' "$name.out" || fail "$name: the script did not finish: $(cat "$name.out")"
	! grep -qi warning "$name.err" || fail "$name: record warned: $(cat "$name.err")"
	report_json "$name.json" -i "$name.db" --symbols
	[[ ! -s $name.json.err ]] || fail "$name: the report warned: $(cat "$name.json.err")"
	python3 - "$name.json" "$pct" >"$name.names" <<'EOF' || fail "$name: $(cat "$name.names")"
import json, sys
rep = json.load(open(sys.argv[1]))
total = sum(e["samples"] for e in rep["events"])
imgs = [i for e in rep["events"] for i in e["images"] if i["name"] == "jit"]
jit = sum(i["samples"] for i in imgs)
funcs = [(f["name"], f["samples"]) for i in imgs for f in i.get("functions", [])]
js = sum(s for n, s in funcs if "hotLoop" in n or "warmUp" in n)
nomap = sum(i["samples"] for e in rep["events"] for i in e["images"] if i["name"] == "nomap")
print("total %d, JIT %d, hotLoop/warmUp %d, nomap %d; %s" % (total, jit, js, nomap, sorted(funcs, key=lambda x: -x[1])[:3]))
sys.exit(0 if js >= 10 and 2 * js >= jit and 100 * js >= int(sys.argv[2]) * total and nomap <= total // 10 else 1)
EOF
	note "$name: $(cat "$name.names")"
}

# --- --perf-prof: a jitdump in the working directory; with --no-opt too
# (baseline code, whose debug entries hold the garbage)
run_node() {
	local name=$1 rc=0
	shift
	"$TALLY" record -F 999 -o "$name.db" -- node "$@" app.js >"$name.out" 2>"$name.err" || rc=$?
	rm -f "/tmp/perf-$(workload_pid "$name.out").map" jit-*.dump
	((rc == 0)) || fail "record node $* exited $rc: $(head -c 1000 "$name.err")"
}
run_node prof --perf-prof
check_node prof 50
if ((${#flags[@]})); then
	run_node noopt --perf-prof "${flags[@]}"
	check_node noopt 0
	copy=$(ls noopt.db/jit/jitdump-*.txt 2>/dev/null | head -1)
	[[ -n $copy ]] || fail "no jitdump copy in noopt.db/jit: $(ls noopt.db/jit 2>&1)"
	python3 - "$copy" <<'EOF' || fail "the jitdump copy is not clean text (see above)"
import re, sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in set(data) if (b < 0x20 and b != 0x0a) or b == 0x7f]
if bad:
    print("control bytes in the copy: %s" % sorted(bad)); sys.exit(1)
try:
    data.decode("utf-8")
except UnicodeDecodeError as e:
    print("the copy is not UTF-8: %s" % e); sys.exit(1)
for no, l in enumerate(data.decode().split("\n"), 1):
    if l and not re.match(r"^(#|source: |elf-mach: |pid: |func [0-9a-f]+ [0-9a-f]+ [0-9]+ .|line [0-9a-f]+ [0-9]+ [0-9]+ .|code [0-9a-f]+$)", l):
        print("line %d is no known kind: %r" % (no, l[:80])); sys.exit(1)
print("ok: the copy is clean text: %d lines" % data.count(b"\n"))
EOF
fi

# --- --perf-basic-prof: /tmp/perf-PID.map
run_node basic --perf-basic-prof
ls basic.db/jit/perf-*.map >/dev/null 2>&1 || fail "no copy of the perf map in basic.db/jit"
check_node basic 50
