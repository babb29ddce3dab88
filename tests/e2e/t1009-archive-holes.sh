#!/bin/bash
# An archive's author cannot make a reader hash what the archive does not
# hold. A 70 KiB tarball with a 4 TiB sparse member (GNU tar --sparse, pax
# and gnu formats), before its MANIFEST or listed in a MANIFEST as 4 TiB,
# and a directory archive with a 4 TiB sparse file its MANIFEST lists, are
# refused with one line naming the member before any of its holes is read
# (the old reader hashed them: hours); so is a .tar.zst of 70 KiB whose
# member unpacks to 2 GiB of zeros. Nothing is left in TMPDIR. A tarball
# whose member has a few real holes (a program's zero-filled data, dug out
# with fallocate) still reads, as does its directory.
. "$SRCDIR/tests/e2e/lib.sh"

need_tool truncate coreutils
tally_ok record -F 1000 -o db -- "$WORKLOADS/split_funcs" 200
tally_ok archive -i db -x -o good
mkdir tmpdir

# refused MSG-REGEX ARCHIVE: one line naming the member, soon, and nothing left
refused() {
	local rc=0
	TMPDIR=$TMP/tmpdir timeout 120 "$TALLY" report -i "$2" >rep.out 2>rep.err || rc=$?
	((rc != 124)) || fail "'$2': still reading after 120 s (hashing the holes?)"
	((rc != 0)) || fail "'$2' was read: $(head -3 rep.out)"
	[[ $(wc -l <rep.err) == 1 ]] || fail "'$2': not one line: $(cat rep.err)"
	grep -Eq "$1" rep.err || fail "'$2': not refused as expected: $(cat rep.err)"
	[[ -z $(ls -A tmpdir) ]] || fail "'$2' left $(ls -A tmpdir) in TMPDIR"
	note "$(cat rep.err)"
}

# a directory for tar: the good archive and a 4 TiB file of holes, db/huge
mkdir t
cp -r good/. t/
truncate -s 4T t/db/huge 2>trunc.err || skip "this filesystem has no 4 TiB sparse file: $(cat trunc.err)"

sparse_first() {
	(cd t && tar --sparse --format="$1" -cf "../first-$1.tar" db/huge MANIFEST db images)
	tar tvf "first-$1.tar" >list.txt
	grep -q ' 4398046511104 .*db/huge' list.txt || fail "test setup: tar did not store db/huge as 4 TiB: $(head -3 list.txt)"
	refused "member 'db/huge' is 4\.0 TiB with 4\.0 TiB of holes \(sparse\): more than the 1\.0 GiB" "first-$1.tar"
}
subtest "a 4 TiB sparse member before the MANIFEST (pax)" sparse_first pax
subtest "a 4 TiB sparse member before the MANIFEST (gnu)" sparse_first gnu

# the MANIFEST lists it as 4 TiB: whoever writes the archive writes its MANIFEST
listed() {
	mkdir -p l
	cp -r t/. l/
	python3 - l/MANIFEST <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().splitlines()
n = int(lines[-1].split()[1])
lines[-1:] = ["db 4398046511104 00000000000000000000000000000000 db/huge", "end: %d files" % (n + 1)]
open(p, "w").write("\n".join(lines) + "\n")
PY
	(cd l && tar --sparse --format=pax -cf ../listed.tar MANIFEST db/huge db images)
	refused "member 'db/huge' is 4\.0 TiB with 4\.0 TiB of holes" listed.tar
	# and a directory archive holding the file
	refused "member 'db/huge' is 4\.0 TiB with 4\.0 TiB of holes" archive:l
}
subtest "a 4 TiB sparse member the MANIFEST lists, tarball and directory" listed

bomb() {
	need_tool zstd zstd
	# the tar stream: db/bomb's header, 2 GiB of zeros, then the good archive's
	# members; compressed piece by piece (zstd frames follow one another), the
	# zeros as one 16 MiB frame 128 times
	python3 - <<'PY'
import io, tarfile
ti = tarfile.TarInfo("db/bomb"); ti.size = 2 << 30; ti.mode = 0o600
open("head.tar", "wb").write(ti.tobuf(tarfile.PAX_FORMAT))
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    t.add("good", arcname=".")
open("tail.tar", "wb").write(buf.getvalue())
PY
	head -c $((16 << 20)) /dev/zero | zstd -q -19 >zeros.zst
	zstd -q head.tar -o head.zst
	zstd -q tail.tar -o tail.zst
	{
		cat head.zst
		for _ in $(seq 128); do cat zeros.zst; done
		cat tail.zst
	} >bomb.tar.zst
	(($(stat -c %s bomb.tar.zst) < 200000)) || fail "test setup: the bomb is $(stat -c %s bomb.tar.zst) bytes"
	refused "member 'db/bomb' unpacks past 1\.0 GiB from [0-9.]+ KiB of the archive, more than 1024 times as much" bomb.tar.zst
}
subtest "a .tar.zst of 70 KiB whose member unpacks to 2 GiB of zeros" bomb

real_holes() {
	need_tool cc gcc
	need_tool fallocate util-linux
	# a program with 256 KiB of zeros in its file
	cat >zeros.c <<'C'
#include <stdio.h>
#include <stdlib.h>
static volatile char pad[256 << 10] = { 1 }; /* in .data: in the file */
int main(int argc, char **argv)
{
	volatile unsigned long x = 0;
	long n = argc > 1 ? atol(argv[1]) : 200;
	for (long i = 0; i < n * 200000; i++)
		x += pad[i & 0xffff] + (unsigned long)i;
	printf("%lu\n", (unsigned long)x);
	return 0;
}
C
	cc -O1 -g -o zeros zeros.c 2>cc.err || skip "cannot build a test program: $(head -3 cc.err)"
	tally_ok record -F 1000 -o zdb -- ./zeros 300
	tally_ok archive -i zdb -x -o zarch
	local img
	img=$(find zarch/images -name zeros -type f)
	[[ -n $img ]] || fail "test setup: no image of zeros in the archive"
	fallocate -d "$img"
	local holes=$(($(stat -c %s "$img") - $(stat -c %b "$img") * 512))
	((holes >= 65536)) || skip "this filesystem dug no holes in the program's zeros ($holes bytes)"
	(cd zarch && tar --sparse --format=pax -cf ../zholes.tar images MANIFEST db)
	python3 -c 'import sys, tarfile; m = tarfile.open(sys.argv[1]).getmember(sys.argv[2]); sys.exit(0 if m.issparse() else 1)' \
		zholes.tar "${img#zarch/}" || fail "test setup: tar did not store the program as a sparse member"
	TMPDIR=$TMP/tmpdir tally_ok report -i zholes.tar --symbols
	grep -q main out || fail "the tarball with a sparse member gives no main: $(cat out)"
	TMPDIR=$TMP/tmpdir tally_ok report -i archive:zarch --symbols
	grep -q main out || fail "the directory with a sparse file gives no main: $(cat out)"
	[[ -z $(ls -A tmpdir) ]] || fail "reading left $(ls -A tmpdir) in TMPDIR"
	note "a member with $holes bytes of real holes reads, from the tarball and the directory"
}
subtest "a member with a few real holes still reads" real_holes
