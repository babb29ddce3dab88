#!/bin/bash
# A merge of archives keeps what they hold: the archived binaries (and debug
# files) go into the build-id cache as the merge reads them, so the merged
# database is reported with its functions named (each run's through --label,
# as its own archive names them) after the binaries are gone, and archived
# again with them (tally archive finds them; the new archive names them with
# the cache off). Without a cache to keep them in, the merge says so.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"

# recorded and archived with no cache: the archives alone hold the binaries
mkdir app
cp "$WORKLOADS/split_images" "$WORKLOADS/libtallywork.so" app/
TALLY_BUILDID_CACHE=off tally_ok record -F 999 -o a.db -- app/split_images 300
TALLY_BUILDID_CACHE=off tally_ok record -F 999 -o b.db -- "$WORKLOADS/split_funcs" 300
TALLY_BUILDID_CACHE=off tally_ok archive -i a.db -o a.tar.zst
TALLY_BUILDID_CACHE=off tally_ok archive -i b.db -o b.tar
exe_id=$(build_id app/split_images)
rm -r app
use_cache

merged() {
	tally_ok merge -o m.db a.tar.zst b.tar
	cached "$exe_id" || fail "the merge did not keep split_images ($exe_id) in the build-id cache: $("$TALLY" cache list 2>&1)"
	report_json ra.json -i m.db --symbols --label run=a.tar.zst
	for f in own_work lib_work; do
		n=$(tjson ra.json func "$f")
		((n > 0)) || fail "--label run=a.tar.zst: $f is not named: $(tjson ra.json funcs | head -20 | tr '\n' ' ')"
	done
	# as the archive itself names them
	report_json aa.json -i a.tar.zst --symbols
	[[ $(tjson ra.json func own_work) == "$(tjson aa.json func own_work)" ]] ||
		fail "own_work: $(tjson ra.json func own_work) samples in the merge, $(tjson aa.json func own_work) in its archive"
	report_json rb.json -i m.db --symbols --label run=b.tar
	(($(tjson rb.json func work_a) > 0)) || fail "--label run=b.tar: work_a is not named"
}

archived_again() {
	tally_ok archive -i m.db --list
	grep -q "images/$exe_id/split_images" "$TMP/out" || fail "tally archive of the merge would not take split_images: $(cat "$TMP/out")"
	tally_ok archive -i m.db -o m2.tar
	! grep -q "is not archived" "$TMP/err" || fail "tally archive of the merge left images out: $(cat "$TMP/err")"
	TALLY_BUILDID_CACHE=off report_json r2.json -i m2.tar --symbols
	(($(tjson r2.json func own_work) > 0)) || fail "the archive of the merge does not name own_work"
}

no_cache() {
	TALLY_BUILDID_CACHE=off tally_ok merge -o n.db a.tar.zst b.tar
	grep -q "^tally: warning: the binaries of 'a\.tar\.zst' are not kept: the build-id cache is off" "$TMP/err" ||
		fail "a merge of archives with the cache off does not say the binaries are not kept: $(cat "$TMP/err")"
}

subtest "the merge of archives names their code" merged
subtest "the merge archived again, with the binaries" archived_again
subtest "no cache: said" no_cache
