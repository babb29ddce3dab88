#!/bin/bash
# `tally report --vmlinux FILE` with the recorded kernel's own image: kernel
# source lines and inlines, placed under KASLR. The machine has no vmlinux for
# its kernel, so the test links a small one (ET_EXEC at kernel addresses, a
# chosen build-id) and writes a database by hand whose kernel ran it shifted
# by $SHIFT. The expected file:line rows come from binutils' addr2line on the
# unshifted addresses, not from tally. A vmlinux whose symbols are at no
# consistent offset from the recorded kernel.syms gives no lines (never
# wrong ones), with a warning, and --explain kernel says why; a sampled static
# function whose name the vmlinux has twice does not spoil the placement.
# (tally annotate has no --vmlinux: kernel annotation is not tested here.)
. "$SRCDIR/tests/e2e/lib.sh"

for t in gcc ld nm objdump addr2line; do
	command -v $t >/dev/null || skip "no $t (the test builds a synthetic vmlinux with gcc and binutils)"
done

SHIFT=1e400000
BID=7a11e5ca1e0bad5eed00c0ffee0123456789abcd
mkdir src
cat >src/k.c <<'EOF'
/* a synthetic kernel image for tally's --vmlinux test (t0507) */
volatile unsigned long tk_sink;

__attribute__((noinline)) void tk_alpha(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += i * 3;
	tk_sink = s;
}

__attribute__((noinline)) void tk_beta(unsigned long n)
{
	unsigned long s = 1;
	for (unsigned long i = 0; i < n; i++) {
		s ^= i << 2;
		s += tk_sink;
	}
	tk_sink = s;
}

static inline __attribute__((always_inline)) unsigned long tk_helper(unsigned long x)
{
	unsigned long r = x;
	for (int i = 0; i < 8; i++)
		r = r * 7 + tk_sink;
	return r;
}

__attribute__((noinline)) void tk_gamma(unsigned long n)
{
	tk_sink = tk_helper(n) + 1;
}
EOF
# Two static functions of one name in two files, as a real kernel has many.
# ld lists a file's local symbols where the file's first code is, so k3.c's
# tk_dup comes first in .symtab (k3.c starts in .text.unlikely, placed first)
# although k2.c's tk_dup is at the lower address, first in kallsyms' order.
cat >src/k2.c <<'EOF'
volatile unsigned long tk_sink2;
static __attribute__((noipa)) void tk_dup(unsigned long n) { tk_sink2 = n * 5; }
void tk_k2(unsigned long n) { tk_dup(n); }
EOF
cat >src/k3.c <<'EOF'
volatile unsigned long tk_sink3;
static __attribute__((noipa)) void tk_dup(unsigned long n) { tk_sink3 = n * 9; }
__attribute__((section(".text.unlikely"))) void tk_k3(unsigned long n) { tk_sink3 = n; }
void tk_k3b(unsigned long n) { tk_dup(n); }
EOF
for c in k k2 k3; do
	(cd src && gcc -g -O2 -mcmodel=kernel -fno-pie -fno-pic -ffreestanding -fno-stack-protector -nostdlib \
		-fno-asynchronous-unwind-tables -c $c.c -o $c.o) >cc.log 2>&1 ||
		skip "gcc cannot build kernel-model code here: $(head -c 400 cc.log)"
done
ld -static -Ttext=0xffffffff81000000 --build-id=0x$BID -e tk_alpha -o vmlinux src/k2.o src/k.o src/k3.o >ld.log 2>&1 ||
	skip "ld cannot link an image at kernel addresses here: $(head -c 400 ld.log)"
[[ $(readelf -h vmlinux | awk '$1 == "Type:" { print $2 }') == EXEC ]] || fail "test setup: vmlinux is not ET_EXEC"
[[ $(readelf -n vmlinux | awk '/Build ID/ { print $3 }') == "$BID" ]] || fail "test setup: vmlinux lacks build-id $BID"

# The samples: tk_alpha 60 (40 + 20 on two instructions of different lines),
# tk_beta 30, tk_gamma 10 on an instruction of the inlined tk_helper; with
# `dup`, 15 more in the tk_dup that comes second in .symtab. plan.py writes
# the database DB (addresses shifted by SHIFT; kernel.syms holds the sampled
# functions, as recording keeps) and what addr2line says: DB.lines (file,
# line, function, inlined, samples), DB.syms (function, inlined, samples).
cat >plan.py <<'EOF'
import os, re, subprocess, sys
vm, shift, bid, db = sys.argv[1], int(sys.argv[2], 16), sys.argv[3], sys.argv[4]
dup = sys.argv[5:] == ["dup"]
funcs = []  # (name, address, size) in .symtab order (nm -p)
for l in subprocess.check_output(["nm", "-S", "-p", vm], text=True).splitlines():
    p = l.split()
    if len(p) == 4 and p[2] in "Tt" and p[3].startswith("tk_"):
        funcs.append((p[3], int(p[0], 16), int(p[1], 16)))
names = sorted(f[0] for f in funcs)
if names != ["tk_alpha", "tk_beta", "tk_dup", "tk_dup", "tk_gamma", "tk_k2", "tk_k3", "tk_k3b"]:
    sys.exit("nm -S names %s, expected tk_alpha, tk_beta, tk_gamma, tk_dup twice, tk_k2, tk_k3, tk_k3b" % names)
want = ["tk_alpha", "tk_beta", "tk_gamma"]
byname = {f[0]: f for f in funcs if f[0] in want}
sampled = [byname[n] for n in want]
dups = [f for f in funcs if f[0] == "tk_dup"]
if dup:
    sampled.append(dups[1])
    print("tk_dup at %x first in .symtab, at %x second%s" % (dups[0][1], dups[1][1],
          "" if dups[1][1] < dups[0][1] else " (not below the first: this ld lays .symtab out otherwise)"))
insns = {f: [] for f in sampled}
for l in subprocess.check_output(["objdump", "-d", "--no-show-raw-insn", vm], text=True).splitlines():
    m = re.match(r"^\s*([0-9a-f]+):\s+\S", l)
    if m:
        a = int(m.group(1), 16)
        for f in sampled:
            if f[1] <= a < f[1] + f[2]:
                insns[f].append(a)
every = [a for f in insns for a in insns[f]]
# addr2line -a -f -i: the address, then (function, file:line) innermost first
chain, cur = {}, None
for l in subprocess.check_output(["addr2line", "-a", "-f", "-i", "-e", vm] + ["%x" % a for a in every],
                                 text=True).splitlines():
    if re.fullmatch(r"0x[0-9a-f]+", l):
        cur = int(l, 16)
        chain[cur] = []
    elif chain[cur] and len(chain[cur][-1]) == 1:
        chain[cur][-1].append(re.sub(r" \(discriminator \d+\)$", "", l))
    else:
        chain[cur].append([l])
def key(a):
    fn, fl = chain[a][0]
    file, line = fl.rsplit(":", 1)
    return (file, int(line), fn, len(chain[a]) > 1)
al = insns[byname["tk_alpha"]]
a1 = al[len(al) // 2]
a2 = [a for a in al if key(a)[1] != key(a1)[1]]
be = insns[byname["tk_beta"]]
g1 = [a for a in insns[byname["tk_gamma"]] if len(chain[a]) > 1 and chain[a][0][0] == "tk_helper"]
if not a2 or not g1:
    sys.exit("addr2line: tk_alpha has one line only, or no instruction of tk_gamma is in the inlined tk_helper: %s" % chain)
samples = {a1: 40, a2[0]: 20, be[len(be) // 2]: 30, g1[0]: 10}
if dup:
    samples[insns[dups[1]][0]] = 15
for a in samples:
    if not chain[a][0][1][0] == "/" or chain[a][0][1].startswith("??"):
        sys.exit("addr2line gives no file:line for %x: %s" % (a, chain[a]))
os.makedirs(db)
tot = sum(samples.values())
def w(name, text):
    open(os.path.join(db, name), "w").write(text)
w("session", "format-version: 1\ntool: tally 0.1.0\nhost: t0507\nkernel-release: 6.1.0-t0507\narch: x86_64\n"
  "target: system\nevents: cpu-clock\nsampling: frequency 999\nper-pid: no\ncall-graph: none\n"
  "samples: %d\nlost: 0\nthrottled: 0\nimages: 1\n" % tot)
w("images", "# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tkernel\t%s\tbuild-id\t0\tkernel\t[kernel]\n" % bid)
w("kernel-%s.prof" % bid, "format-version: 1\nimage: kernel\npath: [kernel]\nimage-id: %s\nid-kind: build-id\n"
  "kind: kernel\nindex: 0\nevents: cpu-clock\nsamples: %d\n\n" % (bid, tot) +
  "".join("%x %d\n" % (a + shift, samples[a]) for a in sorted(samples)))
w("kernel.syms", "# address size type name [module]\n" +
  "".join("%x %x %s %s\n" % (a + shift, n, "t" if f == "tk_dup" else "T", f)
          for f, a, n in sorted(sampled, key=lambda f: f[1])))
w("modules", "# name size address\n")
w("tasks", "# pid\tcomm\texe\n")
exp = {}
for a, n in samples.items():
    exp[key(a)] = exp.get(key(a), 0) + n
with open(db + ".lines", "w") as f:
    for (file, line, fn, inl), n in sorted(exp.items()):
        f.write("%s\t%d\t%s\t%d\t%d\n" % (file, line, fn, inl, n))
sym = {}
for a, n in samples.items():
    sym[(chain[a][0][0], len(chain[a]) > 1)] = sym.get((chain[a][0][0], len(chain[a]) > 1), 0) + n
with open(db + ".syms", "w") as f:
    for (fn, inl), n in sorted(sym.items()):
        f.write("%s\t%d\t%d\n" % (fn, inl, n))
for a in sorted(samples):
    print("%x %d %s" % (a, samples[a], " ".join("%s@%s" % tuple(c) for c in chain[a])))
EOF
python3 plan.py vmlinux "$SHIFT" "$BID" db >plan.log 2>&1 || fail "test setup: $(cat plan.log)"
note "samples (vmlinux address, count, addr2line): $(tr '\n' ';' <plan.log)"

# check_lines JSON EXPECTED: the kernel image's --lines rows are exactly EXPECTED
# (file, line, function, inlined, samples; tab-separated)
check_lines() {
	python3 - "$1" "$2" >lines.diff <<'PY' || fail "--lines --vmlinux: $(cat lines.diff)"
import json, sys
d = json.load(open(sys.argv[1]))
img = [i for e in d["events"] for i in e["images"] if i["name"] == "kernel"]
if len(img) != 1:
    print("no kernel image in the report"); sys.exit(1)
got = {}
for r in img[0]["lines"]:
    k = (r["file"], r["line"], r["function"], bool(r.get("inlined")))
    got[k] = got.get(k, 0) + r["samples"]
want = {}
for l in open(sys.argv[2]):
    f, ln, fn, inl, n = l.rstrip("\n").split("\t")
    want[(f, int(ln), fn, inl == "1")] = int(n)
if got != want:
    print("rows %s, addr2line says %s" % (sorted(got.items(), key=str), sorted(want.items(), key=str))); sys.exit(1)
if img[0].get("debug_info") is not True:
    print("debug_info is not true"); sys.exit(1)
PY
}

# 1. with the matching vmlinux: kernel source lines, where addr2line puts them
report_json lines.json -i db --lines --vmlinux vmlinux
check_lines lines.json db.lines
[[ ! -s lines.json.err ]] || fail "--lines --vmlinux warned: $(cat lines.json.err)"
note "--lines --vmlinux: the rows addr2line gives for the unshifted addresses: $(tr '\t\n' ' ;' <db.lines)"

report_text lines.txt -i db --lines --vmlinux vmlinux --samples
while IFS=$'\t' read -r file line fn inl n; do
	suf=; ((inl)) && suf=' (inlined)'
	awk -v n="$n" -v fl="$(basename "$file"):$line" -v fn="$fn$suf" '
		$1 == n && index($0, fl) && substr($0, length($0) - length(fn) + 1) == fn { found = 1 }
		END { exit !found }' lines.txt ||
		fail "text --lines --vmlinux: no row of $n samples at $(basename "$file"):$line $fn$suf: $(head -c 1500 lines.txt)"
done <db.lines
note "text --lines --vmlinux: the same rows"

# 2. --symbols: the inlined helper is its own frame, marked inlined
report_json sym.json -i db --symbols --vmlinux vmlinux
python3 - sym.json db.syms >sym.diff <<'PY' || fail "--symbols --vmlinux: $(cat sym.diff)"
import json, sys
d = json.load(open(sys.argv[1]))
got = {}
for e in d["events"]:
    for i in e["images"]:
        if i["name"] == "kernel":
            for f in i["functions"]:
                got[(f["name"], bool(f.get("inlined")))] = f["samples"]
want = {}
for l in open(sys.argv[2]):
    fn, inl, n = l.rstrip("\n").split("\t")
    want[(fn, inl == "1")] = int(n)
if ("tk_helper", True) not in want:
    print("test setup: addr2line does not show tk_helper inlined"); sys.exit(1)
if got != want:
    print("functions %s, addr2line says %s" % (sorted(got.items()), sorted(want.items()))); sys.exit(1)
PY
report_text sym.txt -i db --symbols --vmlinux vmlinux --samples
grep -Eq '^ *10 .* tk_helper \(inlined\)$' sym.txt || fail "text --symbols --vmlinux does not show tk_helper (inlined) with 10 samples: $(head -c 1500 sym.txt)"
note "--symbols --vmlinux: $(tr '\t\n' ' ;' <db.syms)"

# 3. without --vmlinux: functions from kernel.syms, no lines, --explain says to give it
report_json nolines.json -i db --lines
python3 - nolines.json >nol.diff <<'PY' || fail "--lines without --vmlinux: $(cat nol.diff)"
import json, sys
d = json.load(open(sys.argv[1]))
img = [i for e in d["events"] for i in e["images"] if i["name"] == "kernel"][0]
rows = sorted((r["function"], r["file"], r["line"], r["samples"]) for r in img["lines"])
if rows != [("tk_alpha", None, None, 60), ("tk_beta", None, None, 30), ("tk_gamma", None, None, 10)]:
    print("rows %s, expected tk_alpha 60, tk_beta 30, tk_gamma 10 with no file or line" % rows); sys.exit(1)
PY
report_text ex-none.txt -i db --explain kernel
grep -q "lines: none (give --vmlinux" ex-none.txt || fail "--explain kernel without --vmlinux does not say to give it: $(cat ex-none.txt)"
note "without --vmlinux: kernel.syms names, no lines; --explain says to give --vmlinux"

# 4. --explain kernel with it: placed at the shift chosen here
report_text ex.txt -i db --explain kernel --vmlinux vmlinux
grep -q "placed at +0x$SHIFT (" ex.txt || fail "--explain kernel --vmlinux does not say it was placed at +0x$SHIFT: $(cat ex.txt)"
grep -q "lines: from --vmlinux" ex.txt || fail "--explain kernel --vmlinux does not say lines come from it: $(cat ex.txt)"
note "--explain kernel: $(grep -o 'placed at [^,]*' ex.txt)"

# 5. the right build-id, but kernel.syms at no consistent offset from its
# symbols (the addresses rotated among the three functions): no lines at all,
# and --explain says why -- never lines read at a wrong offset
cp -r db dbx
python3 - dbx/kernel.syms <<'PY'
import sys
p = sys.argv[1]
ls = open(p).read().splitlines()
hdr, rows = ls[0], [l.split() for l in ls[1:]]
names = [r[3] for r in rows]
names = names[1:] + names[:1]
open(p, "w").write(hdr + "\n" + "".join("%s %s %s %s\n" % (r[0], r[1], r[2], n) for r, n in zip(rows, names)))
PY
report_json bad.json -i dbx --lines --vmlinux vmlinux
python3 - bad.json >bad.diff <<'PY' || fail "--lines --vmlinux, kernel.syms at no consistent offset: $(cat bad.diff)"
import json, sys
d = json.load(open(sys.argv[1]))
img = [i for e in d["events"] for i in e["images"] if i["name"] == "kernel"][0]
withline = [r for r in img["lines"] if r["file"] is not None or r["line"] is not None or r.get("inlined")]
if withline or img.get("debug_info") is not False:
    print("source lines %s (debug_info %s), expected none" % (withline, img.get("debug_info"))); sys.exit(1)
PY
grep -q "image 'kernel': --vmlinux 'vmlinux': its symbols are at no consistent offset from the recorded kernel.syms: no kernel source lines" bad.json.err ||
	fail "--lines --vmlinux, kernel.syms at no consistent offset: no warning saying so: $(cat bad.json.err)"
report_text bad-ex.txt -i dbx --explain kernel --vmlinux vmlinux
grep -q "no symbol of it is at a consistent offset from the recorded kernel.syms: lines not used" bad-ex.txt ||
	fail "--explain kernel does not say the --vmlinux is at no consistent offset: $(cat bad-ex.txt)"
if grep -q "placed at" bad-ex.txt; then fail "--explain kernel places a vmlinux at no consistent offset: $(cat bad-ex.txt)"; fi
grep -q "lines: none (the --vmlinux given was not used" bad-ex.txt ||
	fail "--explain kernel's verdict does not say the given --vmlinux was not used: $(cat bad-ex.txt)"
note "kernel.syms at no consistent offset: no lines; --explain: $(grep -o 'no symbol of it.*' bad-ex.txt)"

# 6. a sample in a static function whose name the vmlinux has twice, the copy
# that ran second in .symtab (kernel.syms, from kallsyms, has only that one):
# still placed at +SHIFT from the others, and every line where addr2line says
python3 plan.py vmlinux "$SHIFT" "$BID" dbd dup >plan-dup.log 2>&1 || fail "test setup: $(cat plan-dup.log)"
note "$(head -1 plan-dup.log)"
report_json dup.json -i dbd --lines --vmlinux vmlinux
check_lines dup.json dbd.lines
report_text dup-ex.txt -i dbd --explain kernel --vmlinux vmlinux
grep -q "placed at +0x$SHIFT (kernel address layout randomization), from 4 symbols" dup-ex.txt ||
	fail "--explain kernel, a sampled name twice in vmlinux: not placed at +0x$SHIFT from 4 symbols: $(cat dup-ex.txt)"
grep -q "1 other symbol of the same names .* at other offsets: not used" dup-ex.txt ||
	fail "--explain kernel does not say the other tk_dup was not used: $(cat dup-ex.txt)"
[[ ! -s dup.json.err ]] || fail "--lines --vmlinux, a sampled name twice in vmlinux, warned: $(cat dup.json.err)"
note "a sampled static name twice in vmlinux: $(tr '\t\n' ' ;' <dbd.lines)"

# 7. no --vmlinux, but the kernel's image where it is looked for by default: under
# a --debug-dir's build-id tree, and (as root) /usr/lib/debug/boot/vmlinux-RELEASE,
# where Debian's kernel debug package puts it; the same lines as with --vmlinux
mkdir -p "dbg/.build-id/${BID:0:2}"
cp vmlinux "dbg/.build-id/${BID:0:2}/${BID:2}.debug"
report_json auto.json -i db --lines --debug-dir dbg
check_lines auto.json db.lines
report_text auto-ex.txt -i db --explain kernel --debug-dir dbg
grep -q "lines: from 'dbg/.build-id/${BID:0:2}/${BID:2}.debug' (found by its build-id)" auto-ex.txt ||
	fail "--explain kernel does not say the lines come from the vmlinux found under --debug-dir: $(cat auto-ex.txt)"
# another kernel's image in the same place is looked at, never used
cp vmlinux other-vmlinux && objcopy --remove-section .note.gnu.build-id other-vmlinux 2>/dev/null &&
	cp other-vmlinux "dbg/.build-id/${BID:0:2}/${BID:2}.debug" &&
	{
		report_json auto-other.json -i db --lines --debug-dir dbg
		grep -q '"file":"' auto-other.json && fail "lines from a vmlinux without the recorded build-id: $(head -c 600 auto-other.json)"
		true
	}
boot=/usr/lib/debug/boot/vmlinux-6.1.0-t0507
made=
[[ -d /usr/lib/debug/boot ]] || made=1
if [[ $(id -u) = 0 && ! -e $boot ]] && mkdir -p /usr/lib/debug/boot 2>/dev/null; then
	trap 'rm -f "$boot"; { [[ -z $made ]] || rmdir /usr/lib/debug/boot 2>/dev/null; }; cleanup' EXIT
	cp vmlinux "$boot"
	report_json boot.json -i db --lines
	check_lines boot.json db.lines
	rm -f "$boot"
	[[ -z $made ]] || rmdir /usr/lib/debug/boot 2>/dev/null || true
	trap cleanup EXIT
	note "the vmlinux at $boot found without --vmlinux"
else
	note "SKIPPED PART: not root, or $boot exists: the default /usr/lib/debug/boot place is not tried"
fi
note "no --vmlinux: the kernel image found by build-id under --debug-dir gives the same lines"
