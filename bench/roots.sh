#!/usr/bin/env bash
# bench/roots.sh [BUILD_DIR] [--hz HZ] [--only NAME] [--fp-size SIZE]
#
# The share of stacks that reached a root, tally beside perf, on real
# programs (docs/performance.md, "Stacks that reach a root"): python3 (a
# json and a regex workload), xz, sqlite3, perl, gcc, openssl speed, sort
# and gzip, each recorded four times: `tally record -g`, `tally record
# --call-graph dwarf`, `perf record -g`, `perf record --call-graph dwarf`
# (at --hz, default 499). A programme that is not installed is skipped and
# said so. --fp-size SIZE: tally's frame-pointer column with `--call-graph
# fp,SIZE` (a stack copy of SIZE bytes) instead of -g's default; perf's -g
# stays as it is.
#
# A stack reached a root when its outermost frame is one of: _start,
# __libc_start_main, __libc_start_call_main, main (the program's own, when
# libc's frames above it were not recovered), start_thread, clone, clone3,
# __clone, __clone3 (a thread's start), or an unnamed frame at the
# executable's ELF entry point (a stripped _start). The same rule for both profilers:
# tally's stacks from `tally export --format folded --samples`, perf's from
# `perf script` (the last frame of each sample). Samples without any user
# frame (in the kernel only) are left out of both counts.
#
# Needs: perf, root. Prints one Markdown table.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build hz=499 only= fpsize=
while [ $# -gt 0 ]; do
	case $1 in
	--hz) hz=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--fp-size) fpsize=$2; shift 2 ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
command -v perf >/dev/null || { echo "bench: perf is not installed (Debian package linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d /tmp/tally-bench-roots.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# the inputs: 16 MiB of text, and of binaries
seq 1 2000000 | awk '{ print ($1 * 7919) % 1000003, "line", $1 }' >"$tmp/text"
cat /usr/bin/* 2>/dev/null | head -c 16000000 >"$tmp/bin" || true
cat >"$tmp/wjson.py" <<'PY'
import json, time
t = time.process_time(); d = {"k%d" % i: [i, str(i), {"x": i * 0.5}] for i in range(2000)}
while time.process_time() - t < 3:
    json.loads(json.dumps(d))
PY
cat >"$tmp/wre.py" <<'PY'
import re, time
t = time.process_time(); s = " ".join("word%d foo@bar%d.example 12-34-%d" % (i, i, i) for i in range(3000))
r = re.compile(r"(\w+)@(\w+)\.example|(\d+)-(\d+)-(\d+)")
while time.process_time() - t < 3:
    r.findall(s)
PY
cat >"$tmp/gen.sql" <<'SQL'
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) INSERT INTO t SELECT x, hex(randomblob(16)) FROM c;
CREATE INDEX ta ON t(b);
SELECT count(*), sum(length(b)) FROM t a WHERE a.b > '8';
SQL
cp "$(dirname "$0")/../tests/workloads/fpchain.c" "$tmp/src.c" 2>/dev/null || echo 'int main(void){return 0;}' >"$tmp/src.c"

# name, needed program, command (run in $tmp)
work=(
	"python3-json|python3|python3 wjson.py"
	"python3-regex|python3|python3 wre.py"
	"xz|xz|xz -6 -T1 -c bin"
	"sqlite3|sqlite3|sqlite3 :memory: <gen.sql"
	"perl|perl|perl -e 'my \$s = 0; for my \$i (1 .. 3000000) { \$s += length(sprintf(\"%d-%s\", \$i, \"x\" x (\$i % 7))) if \"a\$i\" =~ /a(\\d+)7/ } print \$s, \"\\n\"'"
	"gcc|gcc|for i in 1 2 3 4 5 6; do gcc -O2 -c -I$(cd "$(dirname "$0")/.." && pwd)/tests/workloads src.c -o src.o; done"
	"openssl|openssl|openssl speed -seconds 2 sha256 aes-128-cbc"
	"sort|sort|sort -k1,1n text"
	"gzip|gzip|gzip -9 -c bin"
)

# the rule, once for both: the outermost frame is one of these, or the
# executable's entry point unnamed (a stripped _start)
roots_py=$(cat <<'PY'
import glob, os, re, struct, sys
root = re.compile(r"(_start|__libc_start_main|__libc_start_call_main|main|start_thread|clone3?|__clone3?)")
entries = {}
def entry(path):
    """the ELF entry point of path (a file or a basename under the usual
    directories), None when not found"""
    if path not in entries:
        cands = [path] if "/" in path else ["/usr/bin/" + path, "/bin/" + path] + glob.glob("/usr/lib/gcc/x86_64-linux-gnu/*/" + path)
        entries[path] = None
        for c in cands:
            try:
                with open(c, "rb") as f:
                    h = f.read(32)
                if h[:4] == b"\x7fELF":
                    entries[path] = struct.unpack_from("<Q", h, 24)[0]
                    break
            except OSError:
                pass
    return entries[path]
def at_entry(image, off):
    e = entry(image)
    return e is not None and 0 <= off - e < 0x40
PY
)

# rooted_folded FILE: "PCT N" of tally's folded stacks (root first)
rooted_folded() {
	python3 - "$1" <<PY
$roots_py
n = r = 0
for line in open(sys.argv[1], errors="replace"):
    stack, _, c = line.rstrip("\n").rpartition(" ")
    if not stack:
        continue
    frames = stack.split(";")
    if all(f.endswith("[kernel]") or f.startswith("[kernel") for f in frames):
        continue
    c = int(c); n += c
    f = frames[0].strip()
    m = re.fullmatch(r"(\S+)\+0x([0-9a-f]+)", f)
    if root.fullmatch(f) or (m and at_entry(m.group(1), int(m.group(2), 16))):
        r += c
print("%.1f %d" % (100.0 * r / n if n else 0, n))
PY
}

# rooted_perf FILE: the same of `perf script` output (innermost first)
rooted_perf() {
	python3 - "$1" <<PY
$roots_py
n = r = 0
frames = []
def done():
    global n, r
    user = [f for f in frames if not f[2].startswith("([kernel")]
    if user:
        n += 1
        ip, sym, dso = user[-1]
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        if root.fullmatch(sym) or (sym == "[unknown]" and at_entry(dso.strip("()"), int(ip, 16))):
            r += 1
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\n")
    if not line.strip():
        if frames:
            done()
        frames = []
        continue
    if line.startswith("\t") or line.startswith(" "):
        p = line.split()
        if len(p) >= 2:
            frames.append((p[0], p[1], p[-1]))
if frames:
    done()
print("%.1f %d" % (100.0 * r / n if n else 0, n))
PY
}

fpcol=-g
[ -n "$fpsize" ] && fpcol=fp,$fpsize
echo "| program | tally $fpcol | perf -g | tally dwarf | perf dwarf |"
echo "|---|---|---|---|---|"
for w in "${work[@]}"; do
	IFS='|' read -r name prog cmd <<<"$w"
	[ -n "$only" ] && [ "$only" != "$name" ] && continue
	if ! command -v "$prog" >/dev/null; then
		echo "| $name | not installed | | | |"
		continue
	fi
	printf '%s\n' "$cmd" >"$tmp/run.sh"
	row="| $name"
	for cg in fp dwarf; do
		tcg=-g pcg=-g
		[ -n "$fpsize" ] && tcg="--call-graph fp,$fpsize"
		[ $cg = dwarf ] && tcg="--call-graph dwarf" pcg="--call-graph dwarf"
		(cd "$tmp" && rm -rf t.db && "$tally" record -F "$hz" $tcg -o t.db -- sh run.sh >/dev/null 2>"$tmp/t.err") ||
			{ echo "bench: tally record $tcg of $name failed: $(head -c 300 "$tmp/t.err")" >&2; }
		"$tally" export -i "$tmp/t.db" --format folded --samples -o "$tmp/t.folded" 2>/dev/null || : >"$tmp/t.folded"
		read -r tp tn < <(rooted_folded "$tmp/t.folded")
		(cd "$tmp" && rm -f p.data && perf record -q -F "$hz" $pcg -o p.data -- sh run.sh >/dev/null 2>"$tmp/p.err") ||
			{ echo "bench: perf record $pcg of $name failed: $(head -c 300 "$tmp/p.err")" >&2; }
		perf script -i "$tmp/p.data" -F ip,sym,dso >"$tmp/p.txt" 2>/dev/null || : >"$tmp/p.txt"
		read -r pp pn < <(rooted_perf "$tmp/p.txt")
		row="$row | $tp% of $tn | $pp% of $pn"
		echo "$name $cg: tally $tp% of $tn, perf $pp% of $pn" >&2
	done
	# columns: tally -g, perf -g, tally dwarf, perf dwarf
	echo "$row |"
done
