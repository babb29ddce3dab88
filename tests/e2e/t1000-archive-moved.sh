#!/bin/bash
# tally archive, then the archive moved to another directory, the recorded
# binary replaced by another program and then removed: report --symbols,
# --lines and --children and annotate --asm read from the archive (a
# directory with and without 'archive:', .tar, .tar.gz, .tar.zst, and a
# tarball of the directory made with tar) give the
# same rows as the database gave before, while the database itself, which
# looks at the recorded path, no longer can. Reading a tarball leaves nothing
# in TMPDIR.
. "$SRCDIR/tests/e2e/lib.sh"

mkdir bin arch
cp "$WORKLOADS/inline_chain" bin/inline_chain
tally_ok record -g -F 2000 -o db -- ./bin/inline_chain 600

# rows WHAT INPUT: a report's rows (header lines, which name the input, left out)
rows() {
	local what=$1 in=$2
	case $what in
	annotate)
		"$TALLY" annotate -i "$in" hot_loop --asm --json 2>"$TMP/rows.err" |
			python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("database",None); print(json.dumps(d,sort_keys=True))' ;;
	*)
		"$TALLY" report -i "$in" "$what" 2>"$TMP/rows.err" | grep -v '^#' ;;
	esac
}
for w in --symbols --lines --children annotate; do
	rows "$w" db >"ref$w.txt" || fail "report $w of the database failed: $(cat rows.err)"
done
grep -q 'leaf_mix (inlined)' ref--symbols.txt || fail "the reference names no leaf_mix: $(cat ref--symbols.txt)"
grep -q 'inline_chain.c:19' ref--lines.txt || fail "the reference has no inline_chain.c:19 line: $(cat ref--lines.txt)"

for out in dir out.tar out.tar.gz out.tar.zst; do
	tally_ok archive -i db -o "arch/$out"
done
[[ -f arch/dir/MANIFEST && -d arch/dir/db && -d arch/dir/images ]] || fail "the directory archive lacks MANIFEST, db/ or images/: $(ls arch/dir)"
mv arch moved
# a tarball made by hand from the directory (MANIFEST not first) reads too
tar czf moved/hand.tar.gz -C moved/dir .

check_all() { # check_all WHEN: every archive form gives the reference rows
	local in w
	mkdir -p tmpdir
	for in in archive:moved/dir moved/dir moved/out.tar moved/out.tar.gz moved/out.tar.zst moved/hand.tar.gz; do
		for w in --symbols --lines --children annotate; do
			TMPDIR=$TMP/tmpdir rows "$w" "$in" >got.txt || fail "$1: '$w' from '$in' failed: $(cat rows.err)"
			diff "ref$w.txt" got.txt >/dev/null ||
				fail "$1: '$w' from '$in' differs from the database's before: $(diff "ref$w.txt" got.txt | head -10)"
			[[ -z $(ls -A tmpdir) ]] || fail "$1: reading '$in' left $(ls -A tmpdir) in TMPDIR"
		done
	done
	note "$1: --symbols, --lines, --children and annotate from 6 archive forms equal the database's before"
}

# another program at the recorded path: the archive still has the one that ran
cp "$WORKLOADS/split_funcs" bin/inline_chain
rows --symbols db >now.txt || true
! diff -q ref--symbols.txt now.txt >/dev/null || fail "test setup: the database's report did not change with the binary"
check_all "binary replaced"
rm -rf bin
check_all "binary removed"

# an archive of an archive is the same archive (its files come from inside)
tally_ok archive -i moved/out.tar.zst -o again
diff <(grep -v '^#' again/MANIFEST) <(grep -v '^#' moved/dir/MANIFEST) >/dev/null ||
	fail "archiving the archive gives another MANIFEST: $(diff again/MANIFEST moved/dir/MANIFEST | head)"
note "archive of the archive: the same MANIFEST"
