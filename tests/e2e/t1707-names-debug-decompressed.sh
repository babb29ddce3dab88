#!/bin/bash
# libc with Debian's libc6-dbg, whose debug file's DWARF is compressed
# (SHF_COMPRESSED): the recording keeps it in the build-id cache with its
# sections decompressed, and reports use that copy (before /usr/lib/debug),
# reading only what they need of its DWARF instead of inflating all of it;
# what they say is the same, to the byte, as from the system's compressed
# file (report --symbols, --lines with memset's own source lines, --callers).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"
need_tool readelf binutils
use_cache

libc=$(ldd "$WORKLOADS/split_images" | awk '$1 ~ /^libc\.so/ { print $3 }')
[[ -n $libc ]] || skip "split_images links no libc.so here"
id=$(build_id "$libc")
sysdbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
[[ -f $sysdbg ]] || skip "no debug file for $libc in /usr/lib/debug (Debian package libc6-dbg; scripts/deps.sh --test installs it)"
readelf -SW "$sysdbg" 2>/dev/null | grep -E '\.debug_info' | grep -q ' C ' ||
	skip "$sysdbg's .debug_info is not compressed here: nothing to decompress"

tally_ok record -g -F 2000 -o db -- "$WORKLOADS/split_images" 600
wait_cached "$id"
kept=$TALLY_BUILDID_CACHE/$id/debug
for ((i = 0; i < 1200; i++)); do
	[[ -f $kept ]] && break
	sleep 0.05
done
[[ -f $kept ]] || fail "the cache has libc's image but not its debug file: $(ls -la "$TALLY_BUILDID_CACHE/$id")"

decompressed() {
	[[ $(build_id "$kept") == "$id" ]] || fail "the kept debug file has build-id $(build_id "$kept"), libc $id"
	! readelf -SW "$kept" 2>/dev/null | grep -E '\.debug_' | grep -q ' C ' ||
		fail "the kept debug file still has compressed sections: $(readelf -SW "$kept" 2>/dev/null | grep -E '\.debug_' | grep ' C ')"
	readelf -SW "$kept" 2>/dev/null | grep -q '\.debug_info' || fail "the kept debug file has no .debug_info"
	report_text ex.txt -i db --explain libc.so.6
	grep -qF "debug file '$kept' (the build-id cache): build-id $id matches: used" ex.txt ||
		fail "the report does not use the kept debug file: $(cat ex.txt)"
}

same_answers() {
	local v
	for v in --symbols --lines "--callers __memset_avx2_unaligned_erms"; do
		# shellcheck disable=SC2086
		"$TALLY" report -i db $v >kept.txt 2>kept.err || fail "report $v failed: $(cat kept.err)"
		# shellcheck disable=SC2086
		"$TALLY" report -i db $v --no-buildid-cache >sys.txt 2>sys.err || fail "report $v --no-buildid-cache failed: $(cat sys.err)"
		cmp -s kept.txt sys.txt || fail "report $v from the kept copy differs from the system's debug file: $(diff kept.txt sys.txt | head -20)"
	done
	# and libc's lines are there: its memset's source, from its DWARF
	"$TALLY" report -i db --lines >lines.txt 2>/dev/null
	grep -Eq '^ +[0-9.]+ +[0-9.]+% +[0-9.]+% +memset[a-z0-9_-]*\.S:[0-9]+ +__memset' lines.txt ||
		fail "--lines has no source line of libc's memset: $(grep -A5 libc.so.6 lines.txt)"
}

subtest "libc's debug file kept decompressed, and used" decompressed
subtest "the same answers from the kept copy and the system's" same_answers
