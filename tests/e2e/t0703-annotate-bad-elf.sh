#!/bin/bash
# annotate on an executable damaged after recording: garbage in its code
# (instructions that do not decode show as "(bad)"), garbage in its DWARF (no
# lines, the disassembly instead), a file cut short (one-line error saying why),
# and another file in its place (refused: another build-id). Never a crash.
. "$SRCDIR/tests/e2e/lib.sh"

command -v readelf >/dev/null || skip "no readelf (binutils)"
cp "$WORKLOADS/annot" annot
cp annot annot.orig
tally_ok record -F 2000 -o db -- ./annot 400

# section_off NAME: the file offset of section NAME
section_off() {
	local h
	h=$(readelf -S -W annot.orig | awk -v s="$1" '{ for (i = 1; i <= NF; i++) if ($i == s && !h) h = $(i + 3) } END { print h }')
	[[ -n $h ]] && echo $((16#$h))
}
fn=$(readelf -s -W annot.orig | awk '$8 == "hot_function" && !h { h = $2 } END { print h }')
text_addr=$(readelf -S -W annot.orig | awk '{ for (i = 1; i <= NF; i++) if ($i == ".text" && !h) h = $(i + 2) } END { print h }')
text_off=$(section_off .text)
[[ -n $fn && -n $text_off && -n $text_addr ]] || fail "test setup: cannot find hot_function or .text in annot"
fn=$((16#$fn))
text_addr=$((16#$text_addr))

# annotate_ok NAME ARGS...: annotate exits 0 (no crash), output in NAME.txt
annotate_ok() {
	local name=$1 rc=0
	shift
	"$TALLY" annotate -i db --samples hot_function "$@" >"$name.txt" 2>"$name.err" || rc=$?
	((rc == 0)) || fail "$name: annotate exited $rc: $(head -c 800 "$name.err")"
}

# garbage instead of the function's code (the build-id note is intact)
cp annot.orig annot
printf '\xff\xff\xff\xff\x0f\x0f\x0f\xc4\xc4\xff\xff' | dd of=annot bs=1 seek=$((fn - text_addr + text_off + 8)) conv=notrunc 2>/dev/null
annotate_ok code --asm
grep -q '(bad)' code.txt || fail "garbage code: no '(bad)' instruction shown: $(head -c 1500 code.txt)"
grep -q '# source: ' code.txt || fail "garbage code: the source lines are gone too: $(head -5 code.txt)"
note "garbage code: $(grep -c '(bad)' code.txt) undecodable byte(s) shown"

# garbage instead of the DWARF
cp annot.orig annot
info_off=$(section_off .debug_info)
[[ -n $info_off ]] || fail "test setup: annot has no .debug_info"
head -c 2000 /dev/urandom | dd of=annot bs=1 seek="$info_off" conv=notrunc 2>/dev/null
annotate_ok dwarf
grep -q '^# no source lines: ' dwarf.txt || fail "garbage DWARF: annotate does not say the lines are missing: $(head -5 dwarf.txt)"
grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9a-f]+  [a-z]' dwarf.txt || fail "garbage DWARF: no disassembly with samples instead: $(cat dwarf.txt)"
note "garbage DWARF: $(grep '^# no source lines' dwarf.txt)"

# cut short: the symbol table is gone, and the error says the file is truncated
cp annot.orig annot
truncate -s $((text_off + 64)) annot
expect_fail_with "^tally: no function 'hot_function' in image 'annot' of 'db': '.*annot' .*truncated" \
	"$TALLY" annotate -i db --samples hot_function --image annot
truncate -s 100 annot
expect_fail_with "^tally: no function 'hot_function' in image 'annot' of 'db': .*annot" \
	"$TALLY" annotate -i db --samples hot_function --image annot

# another program in its place: another build-id, never used
cp "$WORKLOADS/jitter" annot
expect_fail_with "^tally: no function 'hot_function' in image 'annot' of 'db': '.*annot' is not the file that was recorded \(build-id [0-9a-f]+\): not symbolized" \
	"$TALLY" annotate -i db --samples hot_function --image annot
