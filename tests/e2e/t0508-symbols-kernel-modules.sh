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
# the database is written by hand in the documented format (docs/format.md;
# tests/e2e/lib-kmod.sh). The expected lines come from binutils' addr2line on
# the .ko, not from tally.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-kmod.sh"
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
