#!/bin/bash
# An output path that is a device, a pipe or a socket (/dev/null, a FIFO,
# /dev/stdout) is written into, never replaced by a file: tally's writers
# write a temporary and rename it over the output, which, run as root with
# `-o /dev/null`, replaced the machine's /dev/null with a regular file. The
# test makes a null device node of its own (never touching /dev/null) and a
# FIFO, and writes every kind of output there.
. "$SRCDIR/tests/e2e/lib.sh"

((EUID == 0)) || skip "making a device node needs root"
mknod "$TMP/null" c 1 3 2>mknod.err || skip "cannot make a device node here: $(cat mknod.err)"
"$TALLY" record -g -o t.db -- "$WORKLOADS/split_funcs" 300 >/dev/null 2>rec.err || fail "record: $(cat rec.err)"

# still_null: $TMP/null is still the character device 1,3
still_null() {
	[[ -c $TMP/null ]] || fail "$1 replaced the device node with: $(stat -c %F "$TMP/null")"
	[[ $(stat -c %t,%T "$TMP/null") == 1,3 ]] || fail "$1 left another device there"
}

device() {
	local f
	for f in folded pprof callgrind speedscope svg gmon; do
		"$TALLY" export -i t.db --format $f -o "$TMP/null" >/dev/null 2>ex.err || fail "export --format $f -o a device: $(cat ex.err)"
		still_null "export --format $f"
	done
	"$TALLY" report -i t.db --html "$TMP/null" >/dev/null 2>html.err || fail "report --html a device: $(cat html.err)"
	still_null "report --html"
	ls -a "$TMP" | grep 'null.*tmp' >/dev/null && fail "a temporary was left beside the device: $(ls -a "$TMP")"
	note "exports and the HTML report write into a device node and leave it one"
}

fifo() {
	mkfifo "$TMP/pipe"
	cat "$TMP/pipe" >got.folded &
	local reader=$!
	"$TALLY" export -i t.db --format folded -o "$TMP/pipe" >/dev/null 2>ex.err || fail "export to a FIFO: $(cat ex.err)"
	wait $reader
	[[ -p $TMP/pipe ]] || fail "the FIFO was replaced by: $(stat -c %F "$TMP/pipe")"
	"$TALLY" export -i t.db --format folded -o want.folded 2>/dev/null || fail "export to a file"
	cmp -s got.folded want.folded || fail "what came through the FIFO is not the export ($(wc -c <got.folded) vs $(wc -c <want.folded) bytes)"
	grep -q work_a got.folded || fail "the export through the FIFO names no work_a"
	note "an export through a FIFO is the export, and the FIFO stays"
}

stdout_link() {
	# /dev/stdout is a symbolic link to the process's fd 1, here a regular
	# file: written through (the link was replaced by a file: the machine's
	# /dev/stdout gone). Skipped where /dev/stdout is not that link.
	[[ $(readlink /dev/stdout) == /proc/self/fd/1 ]] || skip "/dev/stdout is not a link to /proc/self/fd/1 here"
	"$TALLY" export -i t.db --format folded -o /dev/stdout 2>ex.err >out.folded || fail "export -o /dev/stdout: $(cat ex.err)"
	[[ -L /dev/stdout ]] || { rm -f /dev/stdout; ln -s /proc/self/fd/1 /dev/stdout; fail "/dev/stdout was replaced by a file (put back)"; }
	"$TALLY" export -i t.db --format folded -o want.folded 2>/dev/null
	cmp -s out.folded want.folded || fail "-o /dev/stdout did not write the export to stdout"
	"$TALLY" report -i t.db --html /dev/stdout 2>html.err >out.html || fail "report --html /dev/stdout: $(cat html.err)"
	[[ -L /dev/stdout ]] || { rm -f /dev/stdout; ln -s /proc/self/fd/1 /dev/stdout; fail "report --html replaced /dev/stdout (put back)"; }
	grep -q '<html' out.html || fail "report --html /dev/stdout wrote no page to stdout"
	note "-o /dev/stdout and --html /dev/stdout write to stdout"
}

# a link is never followed: one planted at the output name (pointing at a
# device, here the test's own null node) is replaced by the output file, and
# what it pointed at is untouched
planted_link() {
	ln -s "$TMP/null" "$TMP/link.folded"
	"$TALLY" export -i t.db --format folded -o "$TMP/link.folded" >/dev/null 2>ex.err || fail "export -o a link: $(cat ex.err)"
	[[ -f $TMP/link.folded && ! -L $TMP/link.folded ]] || fail "the link at the output name was followed: $(stat -c %F "$TMP/link.folded")"
	grep -q work_a "$TMP/link.folded" || fail "the output replacing the link is not the export"
	still_null "export -o a link to the device"
	note "a link to a device at the output name is replaced, the device untouched"
}

subtest "a device node" device
subtest "a link to a device" planted_link
subtest "a FIFO" fifo
subtest "/dev/stdout" stdout_link
