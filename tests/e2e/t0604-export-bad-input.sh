#!/bin/bash
# export refusals are one line on stderr, a non-zero exit and no file (nor a
# temporary) left behind: an unknown or missing --format (listing the known
# ones), an unwritable output (missing directory, a file as directory, a
# directory as the file, /proc), an empty selection, a stack-only format on a
# database without stacks (saying to record with -g), a binary format to
# stdout, --per-process without --per-pid, options of another format, a bad
# --percent-limit, a missing database, a stray argument. A failed export
# leaves an existing output file as it was.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

tally_ok record -g -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 100
tally_ok record -F 2000 --per-pid -o flat.db -- "$WORKLOADS/split_funcs" 100
mkdir outdir
echo not-a-directory >afile

no_leftovers() { # what was refused left no file and no temporary anywhere in $TMP
	local f
	for f in "$@"; do
		[[ ! -e $f ]] || fail "a refused export left '$f' behind"
	done
	local tmps
	tmps=$(find "$TMP" -name '*.tmp.*' | head -3)
	[[ -z $tmps ]] || fail "a refused export left temporaries: $tmps"
}

known='(pprof.*callgrind.*gmon.*folded|folded.*pprof)'
expect_fail_with "^tally: unknown export format 'svgz'.*$known" "$TALLY" export -i cs.db --format svgz -o x.out
((LAST_RC == 2)) || fail "an unknown format exited $LAST_RC, expected 2 (usage)"
no_leftovers x.out
expect_fail_with "^tally: give --format.*$known" "$TALLY" export -i cs.db -o x.out
no_leftovers x.out

for fmt in pprof callgrind gmon folded; do
	expect_fail_with "^tally: cannot write 'nodir/x': .*[Nn]o such file" "$TALLY" export -i cs.db --format $fmt -o nodir/x
	expect_fail_with "^tally: cannot write 'afile/x': .*[Nn]ot a directory" "$TALLY" export -i cs.db --format $fmt -o afile/x
	expect_fail_with "^tally: cannot write 'outdir'" "$TALLY" export -i cs.db --format $fmt -o outdir
	[[ -d outdir && -z $(ls outdir) ]] || fail "--format $fmt -o outdir changed the directory"
	expect_fail_with "^tally: cannot write '/proc/tally-export'" "$TALLY" export -i cs.db --format $fmt -o /proc/tally-export
	no_leftovers nodir afile/x
done

# nothing selected
for sel in "--comm nosuchcommand" "--image nosuch.so" "--pid 1 --comm nosuchcommand"; do
	read -ra o <<<"$sel"
	expect_fail_with "^tally: nothing to export: 'flat\.db' has no samples in the selection" \
		"$TALLY" export -i flat.db --format pprof "${o[@]}" -o empty.pb.gz
	no_leftovers empty.pb.gz
done
# a failed export leaves an existing file alone
echo precious >keep.pb.gz
expect_fail_with "^tally: nothing to export" "$TALLY" export -i flat.db --format pprof --comm nosuchcommand -o keep.pb.gz
[[ $(cat keep.pb.gz) == precious ]] || fail "a failed export changed the existing keep.pb.gz"

# stacks: folded needs them; the flat formats do not
expect_fail_with "^tally: 'flat\.db' has no call stacks.*folded.*(-g|--call-graph)" "$TALLY" export -i flat.db --format folded -o f.folded
no_leftovers f.folded
for fmt in pprof callgrind gmon; do
	tally_ok export -i flat.db --format $fmt -o "flat.$fmt"
	[[ -s flat.$fmt ]] || fail "--format $fmt of a database without stacks wrote nothing"
done

# stdout: text formats only
expect_fail_with "^tally: the pprof format is binary" "$TALLY" export -i cs.db --format pprof -o -
expect_fail_with "^tally: the gmon format is binary" "$TALLY" export -i cs.db --format gmon -o -
"$TALLY" export -i cs.db --format callgrind -o - >cg.out 2>cg.err || fail "callgrind to stdout failed: $(cat cg.err)"
grep -q '^# callgrind format' cg.out || fail "callgrind -o - printed no callgrind header"

# options of one format with another, --per-process without --per-pid
expect_fail_with "^tally: --per-process is for --format callgrind" "$TALLY" export -i cs.db --format pprof --per-process -o p.pb.gz
expect_fail_with "^tally: --comm-root is for --format folded" "$TALLY" export -i cs.db --format callgrind --comm-root -o c.cg
expect_fail_with "^tally: 'cs\.db' was recorded without --per-pid.*--per-process" "$TALLY" export -i cs.db --format callgrind --per-process -o pp.cg
expect_fail_with "^tally: --per-process writes one file per process" "$TALLY" export -i flat.db --format callgrind --per-process -o -
no_leftovers p.pb.gz c.cg pp.cg
[[ -z $(ls pp.cg.* 2>/dev/null) ]] || fail "a refused --per-process export left $(ls pp.cg.*)"

# usage errors
for v in abc -1 101 ""; do
	expect_fail_with "^tally: invalid --percent-limit" "$TALLY" export -i cs.db --format folded --percent-limit "$v" -o l.folded
done
expect_fail_with "^tally: unexpected argument 'stray'" "$TALLY" export -i cs.db --format folded stray
expect_fail_with "^tally: .*--nosuch" "$TALLY" export -i cs.db --format folded --nosuch
expect_fail_with "^tally: .*nosuch\.db" "$TALLY" export -i nosuch.db --format folded -o n.folded
expect_fail_with "^tally: event 'nosuch' is not in 'cs\.db'" "$TALLY" export -i cs.db --format folded --event nosuch -o n.folded
no_leftovers l.folded n.folded tally.folded
