#!/bin/bash
# a database that does not fit on its filesystem (a small tmpfs, nearly full):
# record fails with one line naming the database and the fix, never the hidden
# staging directory it was writing, and leaves nothing behind; an existing
# database that --force was to replace stays whole.
. "$SRCDIR/tests/e2e/lib.sh"

((EUID == 0)) || skip "mounting a small tmpfs needs root"
mkdir small
mount -t tmpfs -o size=1m,mode=700 tmpfs small 2>mount.err || skip "cannot mount a tmpfs: $(cat mount.err)"
trap 'umount -l "$TMP/small" 2>/dev/null || true; cleanup' EXIT
shopt -s nullglob dotglob

tally_ok record -F 999 -o small/db -- "$WORKLOADS/split_funcs" 100
before=$(cd small/db && md5sum -- * | sort)
# room for a few small files, not for a database recorded with call graphs
avail=$(df -B1 --output=avail small | tail -1)
head -c $((avail - 8 * 1024)) /dev/zero >small/filler 2>/dev/null || true

for target in small/new small/db; do
	expect_fail_with "^tally: cannot (write|create) database '$target'.*No space left on device \(free some space\)$" \
		"$TALLY" record --force -F 999 -g -o "$target" -- "$WORKLOADS/split_funcs" 100
	[[ $LAST_ERR == *.tmp-* || $LAST_ERR == *"/."* ]] && fail "the error names a hidden directory: $LAST_ERR"
	left=(small/.*)
	((${#left[@]} == 0)) || fail "record into '$target' on a full filesystem left ${left[*]}"
done
[[ ! -e small/new ]] || fail "a database that could not be written exists: small/new"
after=$(cd small/db && md5sum -- * | sort)
[[ $before == "$after" ]] || fail "the database --force was to replace changed though the write failed"
tally_ok report -i small/db
note "a full filesystem: one line naming the database, nothing left behind, the old database whole"
