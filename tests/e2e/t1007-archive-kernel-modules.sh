#!/bin/bash
# The kernel in an archive: a sampled module's .ko (found under --image-path
# when archiving) goes in as kernel/modules/NAME.ko with the database's
# kernel.syms; with the module directory gone, the archive gives the module's
# source lines and inlined frames exactly as the report with --image-path did,
# and never looks at /lib/modules. --no-debug and --exclude-dependent leave the
# .ko out (functions then from kernel.syms only).
#
# As in t0508, the module is built here as the kernel builds one and the
# database is written by hand (tests/e2e/lib-kmod.sh: this machine's kernel
# has no modules).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-kmod.sh"
write_db db "$ID"

mkdir -p mods/kernel/drivers/misc
cp src/tallymod.ko mods/kernel/drivers/misc/
rows() { "$TALLY" report -i "$1" --lines "${@:2}" 2>"$TMP/rows.err" | grep -v '^#' || fail "report -i $1: $(cat "$TMP/rows.err")"; }
rows db --image-path mods >ref.txt
grep -q 'mix \[tallymod\] (inlined)\|mix \[tallymod\]' ref.txt || fail "test setup: no line of the inlined mix with --image-path: $(cat ref.txt)"
rows db >none.txt
! diff -q ref.txt none.txt >/dev/null || fail "test setup: the module's lines do not depend on finding its .ko"

tally_ok archive -i db -o k.tar.zst --image-path mods
tar tf k.tar.zst >members.txt
grep -qx 'kernel/modules/tallymod.ko' members.txt || fail "the archive has no kernel/modules/tallymod.ko: $(cat members.txt)"
tally_ok archive -i db -o nodebug.tar --image-path mods --no-debug
tally_ok archive -i db -o x.tar --image-path mods -x
rm -rf mods src
mkdir moved && mv k.tar.zst nodebug.tar x.tar moved/
diff ref.txt <(rows moved/k.tar.zst) >/dev/null || fail "the archive gives other kernel lines: $(diff ref.txt <(rows moved/k.tar.zst) | head)"
note "module lines from the archive's .ko, the module directory gone"
for a in nodebug.tar x.tar; do
	tar tf "moved/$a" >members.txt
	! grep -q '^kernel/' members.txt || fail "$a holds $(grep '^kernel/' members.txt)"
	diff none.txt <(rows "moved/$a") >/dev/null || fail "$a: other rows than without the .ko: $(diff none.txt <(rows "moved/$a") | head)"
done
note "--no-debug and -x: no kernel files, kernel.syms names the functions"
