#!/bin/bash
# A failed archive leaves nothing: writing into a read-only filesystem, and
# into a 1 MiB tmpfs that fills up halfway (ENOSPC), as a directory and as a
# tarball, fails with one line naming the target and the cause, and the
# filesystem is empty afterwards (no half archive, no staging files). The
# same archive written where there is room reads back.
. "$SRCDIR/tests/e2e/lib.sh"

((EUID == 0)) || skip "mounting a small tmpfs needs root"
mkdir small ro
mount -t tmpfs -o size=1m,mode=700 tmpfs small 2>mount.err || skip "cannot mount a tmpfs: $(cat mount.err)"
trap 'umount -l "$TMP/small" 2>/dev/null; umount -l "$TMP/ro" 2>/dev/null; cleanup' EXIT
mount -t tmpfs -o ro,size=1m tmpfs ro 2>mount.err || skip "cannot mount a read-only tmpfs: $(cat mount.err)"

tally_ok record -F 1000 -o db -- "$WORKLOADS/split_images" 200
tally_ok archive -i db --list
total=$(awk '$2 == "total" { print $1 }' out)
((total > 2 * 1024 * 1024)) || skip "the archive would be only $total bytes: it would not fill 1 MiB"

for out in a a.tar a.tar.zst; do
	expect_fail_with "cannot (write|create) 'small/$out'.*(No space left on device|no space)" "$TALLY" archive -i db -o "small/$out"
	[[ -z $(ls -A small) ]] || fail "ENOSPC: '$out' left $(ls -A small)"
	expect_fail_with "cannot create 'ro/$out'.*Read-only file system" "$TALLY" archive -i db -o "ro/$out"
done
note "a failed archive leaves nothing (ENOSPC and a read-only filesystem; directory, .tar, .tar.zst)"

tally_ok archive -i db -o ok.tar.zst
tally_ok report -i ok.tar.zst --symbols
grep -q own_work out || fail "the archive written with room gives no own_work: $(cat out)"
