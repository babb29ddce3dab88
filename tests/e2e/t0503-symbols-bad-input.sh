#!/bin/bash
# Damaged input at report time: the recorded binary truncated after the
# recording, its debug file with damaged DWARF, and --debug-dir, --vmlinux and
# --debuginfod-timeout given wrong. The report goes on with what it can name
# and says (one warning, and in --explain) what it skipped.
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir bin dbg
cp "$WORKLOADS/inline_chain" bin/ic
bid=$(readelf -n bin/ic | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
tally_ok record -F 2000 -o db -- ./bin/ic 500
cp bin/ic ic.orig

# truncated image (its build-id note intact): skipped, said once, report goes on
size=$(stat -c %s bin/ic)
truncate -s $((size / 2)) bin/ic
report_text trunc.txt -i db --symbols
grep -q "image 'ic': '$TMP/bin/ic' build-id $bid matches, but truncated" trunc.txt.err ||
	fail "no warning naming the truncated file: $(cat trunc.txt.err)"
n=$(grep -c "truncated" trunc.txt.err)
((n == 1)) || fail "$n warnings about the truncated file, expected 1: $(cat trunc.txt.err)"
grep -q 'Total' trunc.txt || fail "no report after the truncated image: $(head -c 800 trunc.txt)"
report_text trunc-ex.txt -i db --explain ic
grep -q "truncated: .*: skipped" trunc-ex.txt || fail "--explain does not say the file was truncated: $(cat trunc-ex.txt)"
# its debug file still names the functions (by build-id, through --debug-dir)
mkdir -p "dbg/.build-id/${bid:0:2}"
objcopy --only-keep-debug ic.orig "dbg/.build-id/${bid:0:2}/${bid:2}.debug"
report_json trunc-dd.json -i db --symbols --debug-dir dbg
n=$(tjson trunc-dd.json func hot_loop ic)
((n > 0)) || fail "with the image truncated, its debug file did not name hot_loop: $(tjson trunc-dd.json funcs | tr '\n' ' ')"
note "truncated image: skipped with a warning; its debug file names hot_loop ($n samples)"

# damaged DWARF: names still come from the symbol table; lines skipped, said
cp ic.orig bin/ic
objcopy --strip-debug --strip-unneeded bin/ic
dfile="dbg/.build-id/${bid:0:2}/${bid:2}.debug"
python3 - "$dfile" <<'PY' || fail "test setup: cannot damage .debug_info"
import re, subprocess, sys
f = sys.argv[1]
for l in subprocess.check_output(["readelf", "-SW", f], stderr=subprocess.DEVNULL).decode().splitlines():
    m = re.search(r"\]\s+\.debug_info\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", l)
    if m:
        off, size = int(m.group(1), 16), int(m.group(2), 16)
        b = bytearray(open(f, "rb").read())
        for i in range(off + 11, off + size, 7):
            b[i] = (b[i] * 31 + 17) & 255
        open(f, "wb").write(b)
        sys.exit(0)
sys.exit(1)
PY
report_json bad-dwarf.json -i db --lines --debug-dir dbg
n=$(tjson bad-dwarf.json func hot_loop ic)
((n > 0)) || fail "damaged DWARF: hot_loop not named from .symtab: $(head -c 800 bad-dwarf.json)"
grep -q "image 'ic': its DWARF is damaged" bad-dwarf.json.err || fail "no warning about the damaged DWARF: $(cat bad-dwarf.json.err)"
note "damaged DWARF: names kept ($n samples in hot_loop), lines skipped with: $(head -1 bad-dwarf.json.err)"

# options given wrong
expect_fail_with "cannot read --vmlinux 'nonexistent': No such file" "$TALLY" report -i db --vmlinux nonexistent
expect_fail_with "invalid --debuginfod-timeout 'x'" "$TALLY" report -i db --debuginfod-timeout x
expect_fail_with "give one of --symbols, --lines, --explain" "$TALLY" report -i db --lines --symbols
expect_fail_with "no image 'nosuch' in 'db'" "$TALLY" report -i db --explain nosuch
# a --vmlinux with another build-id is not used; kernel functions still from kernel.syms
report_text vm.txt -i db --explain kernel --vmlinux ic.orig
grep -q -- "--vmlinux '$TMP/ic.orig'\|--vmlinux 'ic.orig'" vm.txt || fail "--explain kernel does not mention --vmlinux: $(cat vm.txt)"
grep -Eq "another file, not used|has no build-id" vm.txt || fail "--explain kernel does not say the --vmlinux is not the recorded kernel: $(cat vm.txt)"
note "--vmlinux of another build: not used, said in --explain"
