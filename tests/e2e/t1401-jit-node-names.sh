#!/bin/bash
# node names its JIT code after the script's file, and this one's name holds an
# escape sequence, a control byte and a newline. Recorded with -g and
# --perf-prof (a jitdump) or --perf-basic-prof (a perf map, which node creates
# after the first anonymous addresses a call-graph recording meets): the hot
# function is named, every view prints the name escaped (\x1b, \n: never raw
# control bytes to a terminal or an SVG), and the perf map line the newline
# broke in two costs its second half only, with a warning that says what was
# wrong with it.
. "$SRCDIR/tests/e2e/lib.sh"

command -v node >/dev/null || skip "node is not installed (Debian's nodejs package; scripts/deps.sh installs it)"
opts=$(node --v8-options 2>/dev/null) || skip "node --v8-options failed"
for f in --perf-prof --perf-basic-prof; do
	grep -Eq -- "^ *$f( |$)" <<<"$opts" || skip "this node ($(node --version)) has no $f"
done

script=$'odd\x1b[31m\x01\nnext.js'
cat >"$script" <<'EOF'
function hot(n) { return n < 2 ? n : hot(n - 1) + hot(n - 2); }
console.log("pid " + process.pid);
let s = 0; const t = Date.now(); while (Date.now() - t < 1200) s += hot(22);
console.log(s > 0 ? "done" : "?");
EOF

# no_raw FILE WHAT: FILE has no control byte but newline and tab
no_raw() {
	python3 - "$1" <<'PY' || fail "$2: raw control bytes in the output: $(head -c 300 "$1" | od -c | head -5)"
import sys
data = open(sys.argv[1], "rb").read()
bad = sorted(set(b for b in data if (b < 0x20 and b not in (0x09, 0x0a)) or b == 0x7f))
sys.exit(1 if bad else 0)
PY
}

run() {
	local name=$1 rc=0
	shift
	"$TALLY" record -g -F 999 -o "$name.db" -- node "$@" "./$script" >"$name.out" 2>"$name.err" || rc=$?
	rm -f "/tmp/perf-$(workload_pid "$name.out").map" jit-*.dump
	((rc == 0)) || fail "record node $* exited $rc: $(head -c 1000 "$name.err")"
	grep -q '^done$' "$name.out" || fail "$name: the script did not finish: $(cat "$name.out")"
	no_raw "$name.err" "record's stderr"
	report_text "$name.txt" -i "$name.db" --symbols --image jit --samples
	no_raw "$name.txt" "report --symbols"
	no_raw "$name.txt.err" "report --symbols's warnings"
	# the function is named, escaped, with most of the JIT image's samples
	python3 - "$name.txt" <<'PY' >"$name.share" || fail "$name: $(cat "$name.share")"
import re, sys
rows = [l for l in open(sys.argv[1], encoding="utf-8") if re.match(r"^ +[0-9]+ ", l) and not l.rstrip().endswith("Total")]
tot = sum(int(l.split()[0]) for l in rows)
hot = sum(int(l.split()[0]) for l in rows if re.search(r"JS:\*hot .*odd\\x1b\[31m\\x01", l))
print("%d of the JIT image's %d samples in 'JS:*hot .../odd\\x1b[31m\\x01...'" % (hot, tot))
sys.exit(0 if hot >= 10 and 2 * hot >= tot else 1)
PY
	note "$name: $(cat "$name.share")"
	report_json "$name.json" -i "$name.db" --symbols --image jit
	tally_ok export -i "$name.db" --format svg -o "$name.svg"
	python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$name.svg" 2>"$name.xml.err" ||
		fail "$name: the SVG is not well-formed XML: $(tail -1 "$name.xml.err")"
	grep -Fq 'odd\x1b[31m\x01' "$name.svg" || fail "$name: the SVG does not name .../odd\\x1b[31m\\x01..."
}

prof() {
	run prof --perf-prof
	[[ ! -s prof.txt.err ]] || fail "--perf-prof: the report warned: $(cat prof.txt.err)"
	grep -Fq 'odd\x1b[31m\x01\nnext.js' prof.txt || fail "--perf-prof: the name is not the whole escaped file name 'odd\\x1b[31m\\x01\\nnext.js': $(grep -F 'hot' prof.txt | head -3)"
}
subtest "--perf-prof: a file name with control bytes and a newline, escaped in text and SVG" prof

basic() {
	run basic --perf-basic-prof
	local pid n
	pid=$(workload_pid basic.out)
	# the newline ended the map's line: its second half is malformed, and only it is skipped
	n=$(grep -Ec "^tally: warning: image 'jit': the JIT map of pid $pid had [0-9]+ malformed lines? \(skipped; the first: line [0-9]+: START is not a hex number of at most 16 digits, in 'next\.js:[0-9]+:[0-9]+' \(expected 'START SIZE NAME'\)\)$" basic.txt.err || true)
	((n == 1)) || fail "--perf-basic-prof: expected one warning saying which map line was malformed and why, got: $(cat basic.txt.err)"
}
subtest "--perf-basic-prof: the broken map line costs that line, and the warning says what was wrong" basic
