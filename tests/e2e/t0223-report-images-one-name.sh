#!/bin/bash
# Two files of one name (a whole-host profile of a job's host sees the host's
# libc.so.6 and the copy tally installed beside its agent) are two rows of the
# views that can be told apart: each with its directory after the name, or,
# for two images at one path (two containers' copies), its id. The database
# keeps the plain names (merges match images by them), and --image NAME still
# selects every image of that file name.
. "$SRCDIR/tests/e2e/lib.sh"

mkdir a b
cp "$WORKLOADS/split_funcs" a/
cp "$WORKLOADS/split_funcs" b/
printf 'x' >>b/split_funcs # another file: another content hash, were build-ids off

two_dirs() {
	tally_ok record -o two.db -- sh -c './a/split_funcs 200 & ./b/split_funcs 200; wait'
	tally_ok report -i two.db --samples
	local rows
	rows=$(grep -v '^#' "$TMP/out" | grep -c 'split_funcs') || true
	[[ $rows == 2 ]] || fail "expected two split_funcs rows: $(cat "$TMP/out")"
	grep -q "split_funcs ($TMP/a)\$" "$TMP/out" || fail "no row names a/'s copy by its directory: $(cat "$TMP/out")"
	grep -q "split_funcs ($TMP/b)\$" "$TMP/out" || fail "no row names b/'s copy by its directory: $(cat "$TMP/out")"
	# the stored names are the file's own
	[[ $(awk -F'\t' '$6 == "split_funcs"' two.db/images | wc -l) == 2 ]] ||
		fail "the images file should keep the name 'split_funcs' for both: $(cat two.db/images)"
	# --image with the file name still selects both
	tally_ok report -i two.db --samples --image split_funcs
	[[ $(grep -v '^#' "$TMP/out" | grep -c 'split_funcs (') == 2 ]] || fail "--image split_funcs lost one: $(cat "$TMP/out")"
	# the JSON and the functions view say the same
	tally_ok report -i two.db --symbols --json
	grep -q "\"split_funcs ($TMP/a)\"" "$TMP/out" || fail "the JSON report does not tell them apart"
}
subtest "two files of one name: each row with its directory" two_dirs

one_name_alone() {
	tally_ok record -o one.db -- ./a/split_funcs 100
	tally_ok report -i one.db --samples
	grep -q 'split_funcs$' "$TMP/out" || fail "a file alone of its name keeps its plain name: $(cat "$TMP/out")"
	grep -q 'split_funcs (' "$TMP/out" && fail "a file alone of its name got a directory: $(cat "$TMP/out")"
	true
}
subtest "a file alone of its name keeps its plain name" one_name_alone
