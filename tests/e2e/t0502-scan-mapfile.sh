#!/bin/bash
# tally scan maps image signatures to files; a profile of a stripped binary
# is symbolized through --mapfile with the unstripped copy the scan found.
# A symlink loop and a bind mount of a directory under the scanned tree are
# walked once (by device and inode) and reported; the map's format is
# docs/format.md's; a damaged map is refused with its line.
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir -p stripped tree/deep/er tree/junk
cp "$WORKLOADS/inline_chain" tree/deep/er/inline_chain
bid=$(readelf -n tree/deep/er/inline_chain | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
objcopy --strip-all tree/deep/er/inline_chain stripped/inline_chain
printf 'not an elf file at all, but long enough to be looked at ..........\n' >tree/junk/text
printf '\177ELF garbage that libelf refuses, and long enough to be read ..............\n' >tree/junk/bad.so
ln -s ../.. tree/deep/er/loop          # tree/deep/er/loop -> tree: a loop
ln -s /nonexistent tree/junk/dangling

tally_ok scan -o map tree
grep -Eq "directory already walked" err || fail "scan did not report the symlink loop: $(head -c 1000 err)"
head -1 map | grep -qx '# tally image map, format 1' || fail "the map's first line is not the format line: $(head -2 map)"
grep -Pq "^build-id\t$bid\tsd\t$TMP/tree/deep/er/inline_chain\$" map ||
	fail "the map has no 'build-id<TAB>$bid<TAB>sd<TAB>PATH' line for the unstripped copy: $(cat map)"
n=$(grep -c "$bid" map)
((n == 1)) || fail "the unstripped copy is in the map $n times (the loop was walked?): $(cat map)"
! grep -q junk/text map || fail "a text file is in the map"
grep -q "tree/junk/bad.so': not a readable ELF file" err || fail "scan did not say it skipped the damaged ELF file: $(head -c 1000 err)"
note "scan: $(grep -vc '^#' map) images, loop skipped"

# bind mount: the same directory reached twice is walked once
if unshare -m true 2>/dev/null; then
	mkdir tree/bound
	unshare -m bash -c "mount --bind '$TMP/tree/deep' '$TMP/tree/bound' && '$TALLY' scan -o '$TMP/map2' '$TMP/tree'" >bind.out 2>bind.err ||
		fail "scan with a bind mount failed: $(cat bind.err)"
	n=$(grep -c "$bid" map2)
	((n == 1)) || fail "with tree/deep bind-mounted at tree/bound, the copy is in the map $n times: $(cat map2)"
	grep -q "already walked" bind.err || fail "scan did not report the bind-mounted directory: $(cat bind.err)"
	note "bind mount: walked once"
else
	echo "note: unshare -m is not possible here: the bind-mount case is not tested"
fi

# a profile of the stripped binary: nothing named without the map, the hot loop with it
tally_ok record -F 2000 -o db -- ./stripped/inline_chain 600
report_json plain.json -i db --symbols
[[ $(tjson plain.json func hot_loop) == 0 ]] || fail "the stripped binary named hot_loop without the map"
report_json mapped.json -i db --symbols --mapfile map
n=$(tjson mapped.json func hot_loop inline_chain)
own=$(tjson mapped.json image inline_chain)
((n > 0)) || fail "--mapfile: no samples in hot_loop; functions: $(tjson mapped.json funcs | tr '\n' ' ')"
l=$(tjson mapped.json func leaf_mix inline_chain)
((l > own / 4)) || fail "--mapfile: leaf_mix (inlined, from the copy's DWARF) has $l of $own samples"
report_text ex.txt -i db --explain inline_chain --mapfile map
grep -q "(--mapfile): build-id $bid matches: used" ex.txt || fail "--explain does not say the map's copy was used: $(cat ex.txt)"
note "--mapfile: hot_loop $n, leaf_mix $l of $own samples"

# bad maps and directories: one line each
printf '# tally image map, format 1\nbuild-id\tzz\ts\t/x\n' >bad.map
expect_fail_with "'bad.map' line 2: bad id kind, id or path" "$TALLY" report -i db --mapfile bad.map
printf 'hello\n' >notmap
expect_fail_with "'notmap' is not a tally image map" "$TALLY" report -i db --mapfile notmap
expect_fail_with "cannot read map file 'nomap': No such file" "$TALLY" report -i db --mapfile nomap
expect_fail_with "cannot scan '$TMP/nodir': No such file or directory" "$TALLY" scan "$TMP/nodir"
expect_fail_with "cannot scan '$TMP/map': not a directory" "$TALLY" scan map
