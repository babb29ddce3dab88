#!/bin/bash
# A program and its library removed after the recording: report, --lines,
# --explain, annotate and export name their code from the copies tally
# record kept in the build-id cache, with the split the workload measured;
# --no-buildid-cache does not look there (the code is unnamed, and the report
# --explain says the file is gone). record -N keeps nothing; 'tally cache prune
# --max-size 0' empties the cache, and the names go with it.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"
use_cache

mkdir app
cp "$WORKLOADS/split_images" "$WORKLOADS/libtallywork.so" app/ # RUNPATH $ORIGIN
exe_id=$(build_id app/split_images)
lib_id=$(build_id app/libtallywork.so)
[[ -n $exe_id && -n $lib_id ]] || skip "the workloads have no GNU build-id"
tally_ok record -g -F 2000 -o db -- app/split_images 800
cp "$TMP/out" truth.txt
wait_cached "$exe_id"
wait_cached "$lib_id"
rm -r app

removed() {
	report_json r.json -i db --symbols
	for f in own_work lib_work; do
		n=$(tjson r.json func "$f")
		((n > 0)) || fail "$f is not named once its file is gone: $(tjson r.json funcs | head -20 | tr '\n' ' ')"
	done
	check_shares image r.json truth.txt 4 split_images libtallywork.so libc.so.6
	! grep -q "not on this machine" r.json.err || fail "the report says the files are gone but they were named: $(cat r.json.err)"
	report_text l.txt -i db --lines
	grep -Eq "split_images\.c:[0-9]+ +own_work" l.txt || fail "--lines has no split_images.c line of own_work: $(head -c 1500 l.txt)"
	report_text ex.txt -i db --explain split_images
	grep -q "/$exe_id/image' (the build-id cache): build-id $exe_id matches: used" ex.txt ||
		fail "--explain does not say the image came from the build-id cache: $(cat ex.txt)"
	tally_ok annotate -i db own_work --asm
	grep -q "own_work" "$TMP/out" && grep -Eq "^ +[0-9.]+ +[0-9.]+% +[0-9a-f]+  [a-z]" "$TMP/out" ||
		fail "annotate --asm of own_work from the cache's copy shows no instructions with samples: $(head -c 1500 "$TMP/out")"
	tally_ok export -i db --format folded -o out.folded
	grep -q "own_work" out.folded && grep -q "lib_work" out.folded ||
		fail "the folded export does not name own_work and lib_work: $(head -c 800 out.folded)"
}

no_cache() {
	report_json nc.json -i db --symbols --no-buildid-cache
	[[ $(tjson nc.json func own_work) == 0 ]] || fail "--no-buildid-cache still names own_work"
	report_text nc-ex.txt -i db --explain split_images --no-buildid-cache
	grep -q "app/split_images' (recorded path): not there" nc-ex.txt && ! grep -q "build-id cache" nc-ex.txt ||
		fail "--no-buildid-cache: --explain does not say the file is gone, or looked in the cache: $(cat nc-ex.txt)"
}

minus_n() {
	TALLY_BUILDID_CACHE="$TMP/cache-n" tally_ok record -N -F 999 -o dbn -- "$WORKLOADS/split_funcs" 100
	TALLY_BUILDID_CACHE="$TMP/cache-n" tally_ok cache list
	[[ ! -s "$TMP/out" ]] || fail "record -N put images in the cache: $(cat "$TMP/out")"
}

pruned() {
	tally_ok cache prune --max-size 0
	grep -Eq "^removed [1-9][0-9]* images? " "$TMP/out" || fail "prune --max-size 0 removed nothing: $(cat "$TMP/out")"
	! cached "$exe_id" || fail "prune --max-size 0 left $exe_id in the cache"
	report_json p.json -i db --symbols
	[[ $(tjson p.json func own_work) == 0 ]] || fail "own_work is still named once its copy was pruned"
}

subtest "a removed program and library named from the cache" removed
subtest "--no-buildid-cache never looks there" no_cache
subtest "record -N keeps nothing" minus_n
subtest "prune --max-size 0 empties the cache" pruned
