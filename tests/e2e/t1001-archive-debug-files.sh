#!/bin/bash
# Separate debug files go into the archive: a stripped binary whose debug file
# was found by build-id (--debug-dir when archiving), and one without a
# build-id whose debug file was found by its .gnu_debuglink (and CRC). With
# the binaries and the debug directory gone, the archive gives the same
# --lines and --symbols rows as the database gave with them; --no-debug
# leaves the debug files out (no line rows then).
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
command -v cc >/dev/null || skip "no C compiler to build a binary without a build-id"
mkdir bin dbg
cp "$WORKLOADS/inline_chain" full
bid=$(readelf -n full | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
objcopy --only-keep-debug full ic.debug
objcopy --strip-debug --strip-unneeded full bin/inline_chain
mkdir -p "dbg/.build-id/${bid:0:2}"
mv ic.debug "dbg/.build-id/${bid:0:2}/${bid:2}.debug"
# the same program without a build-id, stripped, with its debug file next to it by debuglink
cc -O2 -g -fno-omit-frame-pointer -Wl,--build-id=none -I"$SRCDIR/tests/workloads" \
	-o nobid "$SRCDIR/tests/workloads/inline_chain.c" 2>cc.err || skip "cannot build the workload: $(head -3 cc.err)"
[[ $(readelf -n nobid) != *"Build ID"* ]] || fail "test setup: -Wl,--build-id=none left a build-id"
objcopy --only-keep-debug nobid bin/nobid.debug
objcopy --strip-debug --strip-unneeded --add-gnu-debuglink=bin/nobid.debug nobid bin/nobid
rm nobid full

tally_ok record -F 2000 -o db -- ./bin/inline_chain 500
tally_ok record -F 2000 -o db2 -- ./bin/nobid 500

rows() { # rows INPUT WHAT [ARGS]: the rows of the two inline_chain builds
	local in=$1
	shift
	"$TALLY" report -i "$in" "$@" 2>"$TMP/rows.err" | grep -v '^#' || fail "report -i $in $* failed: $(cat "$TMP/rows.err")"
}
rows db --lines --debug-dir dbg >ref1.txt
rows db --symbols --debug-dir dbg >ref1s.txt
rows db2 --lines >ref2.txt
grep -q 'inline_chain.c:19 *leaf_mix (inlined)' ref1.txt || fail "no leaf_mix line row with the build-id debug file: $(cat ref1.txt)"
grep -q 'inline_chain.c:19 *leaf_mix (inlined)' ref2.txt || fail "no leaf_mix line row with the debuglink file: $(cat ref2.txt)"

tally_ok archive -i db -o a1.tar.zst --debug-dir dbg
tally_ok archive -i db2 -o a2
tally_ok archive -i db --list --debug-dir dbg
[[ -n $(awk -v m="debug/.build-id/${bid:0:2}/${bid:2}.debug" '$2 == "debug" && $3 == m' out) ]] ||
	fail "--list names no debug/.build-id member for $bid: $(cat out)"
grep -Eq '^debug [0-9]+ [0-9a-f]{32} images/[0-9a-f]+/nobid.debug$' a2/MANIFEST ||
	fail "the archive of the build-id-less binary has no images/ID/nobid.debug: $(cat a2/MANIFEST)"
tally_ok archive -i db -o nodebug.tar --debug-dir dbg --no-debug
# a debug file an earlier --debuginfod report left in libdebuginfod's cache
# goes in by itself (no network is asked: DEBUGINFOD_URLS is empty)
mkdir -p "dfd/$bid"
cp "dbg/.build-id/${bid:0:2}/${bid:2}.debug" "dfd/$bid/debuginfo"
DEBUGINFOD_CACHE_PATH=$TMP/dfd DEBUGINFOD_URLS= tally_ok archive -i db -o cached.tar.zst
tar tf cached.tar.zst >members.txt
grep -qx "debug/.build-id/${bid:0:2}/${bid:2}.debug" members.txt ||
	fail "the debuginfod cache's debug file is not in the archive: $(cat members.txt)"
tally_ok archive -i db --list
! grep -q "dfd/$bid" out || fail "--list without the cache named it: $(cat out)"
rm -rf dfd
mkdir elsewhere && mv a1.tar.zst a2 nodebug.tar cached.tar.zst elsewhere/
rm -rf bin dbg

diff ref1.txt <(rows elsewhere/a1.tar.zst --lines) >/dev/null ||
	fail "build-id debug file: --lines from the archive differ: $(diff ref1.txt <(rows elsewhere/a1.tar.zst --lines) | head)"
diff ref1s.txt <(rows elsewhere/a1.tar.zst --symbols) >/dev/null ||
	fail "build-id debug file: --symbols from the archive differ: $(diff ref1s.txt <(rows elsewhere/a1.tar.zst --symbols) | head)"
diff ref2.txt <(rows archive:elsewhere/a2 --lines) >/dev/null ||
	fail "debuglink debug file: --lines from the archive differ: $(diff ref2.txt <(rows archive:elsewhere/a2 --lines) | head)"
diff ref1.txt <(rows elsewhere/cached.tar.zst --lines) >/dev/null ||
	fail "debuginfod cache: --lines from the archive differ: $(diff ref1.txt <(rows elsewhere/cached.tar.zst --lines) | head)"
note "stripped binaries: lines and functions from the archived debug files (--debug-dir, debuglink, debuginfod's cache), originals gone"

rows elsewhere/nodebug.tar --lines >nd.txt
! grep -q 'leaf_mix' nd.txt || fail "--no-debug: the archive still names leaf_mix: $(cat nd.txt)"
tar tf elsewhere/nodebug.tar >members.txt
! grep -q '^debug/' members.txt || fail "--no-debug: the tarball holds $(grep '^debug/' members.txt | head -3)"
note "--no-debug: no debug files, no line rows"
