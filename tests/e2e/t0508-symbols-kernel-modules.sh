#!/bin/bash
# Kernel modules: a module's functions get source lines and inline frames from
# its .ko, found under --image-path (recursively, compressed or not, '-' for
# '_') or under /lib/modules/RELEASE, verified by the recorded build-id (or,
# without one, by the kernel release and the functions' layout), placed by the
# recorded kernel.syms. A .ko of another build, or one whose functions do not
# fit the recording, is never used: no lines rather than wrong ones.
#
# This machine's kernel has no loadable modules (no /proc/modules), so the
# module is built here as the kernel builds one (gcc -c, ld -r --build-id) and
# the database is written by hand in the documented format (docs/format.md).
# The expected lines come from binutils' addr2line on the .ko, not from tally.
. "$SRCDIR/tests/e2e/lib.sh"

command -v addr2line >/dev/null || skip "addr2line (binutils) is not installed"
REL=tally-test-$$
ID=5e1f00d0c0ffee0123456789abcdef0123456789
KID=1111111111111111111111111111111111111111

mkdir src
cat >src/tallymod.c <<EOF
static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	x ^= x >> 7;
	x *= 2654435761u;
	return x ^ (x >> 13);
}
__attribute__((noinline)) unsigned long hot_a(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += mix(i);
	return s;
}
__attribute__((noinline)) unsigned long hot_b(unsigned long n)
{
	unsigned long s = 1;
	for (unsigned long i = 0; i < n; i++)
		s = s * 31 + i;
	return s;
}
__attribute__((noinline, section(".text.unlikely"))) unsigned long cold_c(unsigned long n)
{
	return n * 3 + 1;
}
__attribute__((section(".modinfo"), used)) static const char vermagic[] = "vermagic=$REL SMP preempt mod_unload";
EOF
build_ko() { # OUT BUILD-ID
	gcc -g -O2 -mcmodel=kernel -fno-pie -fno-pic -ffreestanding -fno-stack-protector -nostdlib \
		-fno-asynchronous-unwind-tables -c src/tallymod.c -o src/tallymod.o &&
		ld -r --build-id=0x"$2" src/tallymod.o -o "$1"
}
build_ko src/tallymod.ko "$ID" 2>build.err || skip "cannot build a kernel-style module here: $(head -c 300 build.err)"

# where each function is in the .ko: section-relative (ET_REL)
sym() { nm -S src/tallymod.ko | awk -v n="$1" '$4 == n { print $'"$2"' }'; }
A=$((16#$(sym hot_a 1))) AS=$((16#$(sym hot_a 2)))
B=$((16#$(sym hot_b 1))) BS=$((16#$(sym hot_b 2)))
C=$((16#$(sym cold_c 1))) CS=$((16#$(sym cold_c 2)))
# an instruction of hot_a inside the inlined mix (addr2line -i shows two frames)
a2l() { addr2line -f -i -j "$1" -e src/tallymod.ko "$(printf '0x%x' "$2")"; }
AOFF=
for ((o = A; o < A + AS; o++)); do
	if a2l .text "$o" | head -1 | grep -qx mix; then AOFF=$o; break; fi
done
[[ -n $AOFF ]] || skip "the compiler left no instruction of the inlined helper in hot_a"
BOFF=$((B + BS / 2)) COFF=$((C + CS / 2))
# a source line as addr2line gives it (innermost frame), discriminator cut
line_of() { a2l "$1" "$2" | sed -n 2p | sed 's/ (discriminator.*//'; }
LA=$(line_of .text "$AOFF") LB=$(line_of .text "$BOFF") LC=$(line_of .text.unlikely "$COFF")
LA_OUTER=$(a2l .text "$AOFF" | sed -n 4p | sed 's/ (discriminator.*//')
note "expected: hot_a+$((AOFF - A)) $LA (inlined mix, called at $LA_OUTER), hot_b $LB, cold_c $LC"

# the running kernel put .text and .text.unlikely apart
TEXT=$((16#ffffffffc0a04000)) UNLIKELY=$((16#ffffffffc0a09000))
hex() { printf '%x' "$1"; }
write_db() { # DIR MODULE-BUILD-ID ('-' for none) [B-SHIFT]
	local d=$1 bid=$2 shift=${3:-0}
	mkdir -p "$d"
	printf 'format-version: 1\ntool: tally 0.1.0\nkernel-release: %s\narch: x86_64\nevents: cpu-clock\nsampling: frequency 1000\nper-pid: no\ncall-graph: none\nsamples: 100\nlost: 0\n' "$REL" >"$d/session"
	printf '# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n0\tkernel\t%s\tbuild-id\t0\tkernel\t[kernel]\n' $KID >"$d/images"
	{
		printf 'format-version: 1\nimage: kernel\npath: [kernel]\nimage-id: %s\nid-kind: build-id\nkind: kernel\nindex: 0\nevents: cpu-clock\nsamples: 100\n\n' $KID
		printf '%s 50\n%s 30\n%s 20\n' "$(hex $((TEXT + AOFF)))" "$(hex $((TEXT + BOFF + shift)))" "$(hex $((UNLIKELY + COFF)))" | sort
	} >"$d/kernel-$KID.prof"
	{
		echo '# address size type name [module]'
		printf '%s %x t hot_a [tallymod]\n' "$(hex $((TEXT + A)))" "$AS"
		printf '%s %x t hot_b [tallymod]\n' "$(hex $((TEXT + B + shift)))" "$BS"
		printf '%s %x t cold_c [tallymod]\n' "$(hex $((UNLIKELY + C)))" "$CS"
	} | sort >"$d/kernel.syms"
	printf '# name size address build-id\ntallymod 16384 0x%s %s\n' "$(hex $TEXT)" "$bid" >"$d/modules"
	printf '# pid\tcomm\texe\n' >"$d/tasks"
}
write_db db "$ID"

# lines: JSON rows against addr2line
check_lines() { # JSON-FILE WHAT
	python3 - "$1" "$LA" "$LB" "$LC" <<'PY' || fail "$2: $(head -c 1500 "$1")"
import json, sys
d = json.load(open(sys.argv[1]))
img = [i for i in d["events"][0]["images"] if i["kind"] == "kernel"][0]
got = {(l["file"] + ":" + str(l["line"]), l["function"]): l["samples"] for l in img.get("lines", [])}
want = {(sys.argv[2], "mix [tallymod]"): 50, (sys.argv[3], "hot_b [tallymod]"): 30,
        (sys.argv[4], "cold_c [tallymod]"): 20}
if got != want:
    print("got", got, "want", want, file=sys.stderr)
    sys.exit(1)
if not img.get("debug_info"):
    print("debug_info is not true", file=sys.stderr)
    sys.exit(1)
PY
}
mkdir -p mods/kernel/drivers/misc
cp src/tallymod.ko mods/kernel/drivers/misc/
report_json l.json -i db --lines --image-path mods
check_lines l.json "--lines with the .ko under --image-path (a subdirectory)"

# the .ko as a symlink, beside a symlinked directory that loops: found, and the walk ends
mkdir -p lmods/extra
ln -s "$PWD/src/tallymod.ko" lmods/extra/tallymod.ko
ln -s .. lmods/extra/loop
report_json ll.json -i db --lines --image-path lmods
check_lines ll.json "--lines with the .ko a symlink beside a directory loop"

# without it: named from kernel.syms, no lines, and --explain says where it looked
report_json n.json -i db --lines
python3 - n.json <<'PY' || fail "without the .ko: $(head -c 800 n.json)"
import json, sys
img = json.load(open(sys.argv[1]))["events"][0]["images"][0]
assert not any(l.get("file") for l in img.get("lines", [])), img
assert {l["function"] for l in img["lines"]} == {"hot_a [tallymod]", "hot_b [tallymod]", "cold_c [tallymod]"}, img
PY
report_text ex0.txt -i db --explain kernel
grep -q "looked for tallymod.ko" ex0.txt || fail "--explain does not say where it looked: $(cat ex0.txt)"
grep -q "no file named so" ex0.txt || fail "--explain does not say no .ko was found: $(cat ex0.txt)"

# the inline chain in --symbols: mix as its own frame, marked inlined
report_json s.json -i db --symbols --image-path mods
python3 - s.json <<'PY' || fail "--symbols: the inlined helper is not its own frame: $(head -c 1500 s.json)"
import json, sys
img = json.load(open(sys.argv[1]))["events"][0]["images"][0]
f = {x["name"]: x for x in img["functions"]}
assert f["mix [tallymod]"]["samples"] == 50 and f["mix [tallymod]"].get("inlined"), f
assert f["hot_b [tallymod]"]["samples"] == 30 and f["cold_c [tallymod]"]["samples"] == 20, f
PY
report_text ex.txt -i db --explain kernel --image-path mods
grep -q "build-id $ID matches" ex.txt || fail "--explain does not show the verified build-id: $(cat ex.txt)"
grep -q "lines: from its .ko's DWARF" ex.txt || fail "--explain: $(cat ex.txt)"

# compressed modules, and a file name with '-' for the kernel's '_'
for z in xz zstd gzip; do
	command -v $z >/dev/null || { note "$z not installed: its .ko.$z not tried"; continue; }
	rm -rf cmods && mkdir -p cmods/extra
	cp src/tallymod.ko cmods/extra/tally-mod.ko && sed 's/tallymod/tally_mod/' -i db/kernel.syms db/modules
	$z -q cmods/extra/tally-mod.ko && rm -f cmods/extra/tally-mod.ko
	report_json z.json -i db --lines --image-path cmods
	sed 's/tally_mod/tallymod/' -i db/kernel.syms db/modules
	sed 's/tally_mod/tallymod/g' -i z.json
	check_lines z.json "--lines with $(ls cmods/extra)"
done

# the default place: /lib/modules/RELEASE of the recording
if [[ $(id -u) = 0 && -w /lib || -w /lib/modules ]]; then
	made_lib_modules=
	[[ -d /lib/modules ]] || made_lib_modules=1
	mkdir -p "/lib/modules/$REL/extra"
	trap 'rm -rf "/lib/modules/$REL"; [[ -n $made_lib_modules ]] && rmdir /lib/modules 2>/dev/null; cleanup' EXIT
	cp src/tallymod.ko "/lib/modules/$REL/extra/"
	report_json d.json -i db --lines
	check_lines d.json "--lines with the .ko in /lib/modules/$REL"
	rm -rf "/lib/modules/$REL"
	[[ -z $made_lib_modules ]] || rmdir /lib/modules 2>/dev/null || true
	trap cleanup EXIT
else
	note "SKIPPED PART: /lib/modules is not writable here, the default module directory is not tried"
fi

# a stripped .ko, its DWARF in a separate debug file under --debug-dir's build-id tree
mkdir -p smods dbg/.build-id/${ID:0:2}
cp src/tallymod.ko smods/tallymod.ko
strip --strip-debug smods/tallymod.ko
objcopy --only-keep-debug src/tallymod.ko "dbg/.build-id/${ID:0:2}/${ID:2}.debug"
report_json sd.json -i db --lines --image-path smods --debug-dir dbg
check_lines sd.json "--lines with a stripped .ko and --debug-dir"
report_json sn.json -i db --lines --image-path smods
grep -q '"file":"' sn.json && fail "a stripped .ko without its debug file still gave lines: $(head -c 800 sn.json)"

# another build of the module (another build-id): never used, and said so
mkdir -p omods
build_ko omods/tallymod.ko 0123456789012345678901234567890123456789 || fail "second build failed"
"$TALLY" report -i db --lines --image-path omods >o.txt 2>o.err || fail "report with another build exited $?: $(cat o.err)"
grep -q "tallymod.c:" o.txt && fail "lines from a .ko of another build: $(cat o.txt)"
grep -q "module tallymod: no file found fits the recording" o.err || fail "no warning about the other build: $(cat o.err)"
report_text oex.txt -i db --explain kernel --image-path omods
grep -q "another build, not used" oex.txt || fail "--explain does not say the .ko is another build: $(cat oex.txt)"

# no build-id recorded (an older recording): the kernel release and the layout decide
write_db nid -
report_json nid.json -i nid --lines --image-path mods
check_lines nid.json "--lines with no recorded module build-id"
sed "s/^kernel-release: .*/kernel-release: another-release/" -i nid/session
"$TALLY" report -i nid --lines --image-path mods >v.txt 2>v.err || fail "report exited $?: $(cat v.err)"
grep -q "tallymod.c:" v.txt && fail "lines from a .ko built for another kernel release: $(cat v.txt)"
report_text vex.txt -i nid --explain kernel --image-path mods
grep -q "built for kernel $REL, the recording ran another-release: not used" vex.txt ||
	fail "--explain does not name the release mismatch: $(cat vex.txt)"

# functions that do not fit the .ko (hot_b recorded 0x40 further from hot_a than
# in this file): the file is refused rather than giving hot_b another line
write_db shifted - $((16#40))
"$TALLY" report -i shifted --lines --image-path mods >sh.txt 2>sh.err || fail "report exited $?: $(cat sh.err)"
grep -q "tallymod.c:" sh.txt && fail "lines from a .ko whose layout does not fit the recording: $(cat sh.txt)"
report_text shex.txt -i shifted --explain kernel --image-path mods
grep -q "not where the other recorded functions of its section put it" shex.txt ||
	fail "--explain does not say the layout does not fit: $(cat shex.txt)"

# a damaged module list is refused with its file and line
echo "tallymod sixteen 0xffffffffc0a04000" >>db/modules
expect_fail_with "modules' line 3: expected 'NAME SIZE ADDRESS \[BUILD-ID\]'" "$TALLY" report -i db
note "module lines, inlines, compressed files, debug files and refusals checked"
