#!/bin/bash
# Long work says what it does on a terminal and nothing elsewhere: `tally
# export` and `tally report --html` with stderr a terminal (script(1)) show
# one progress line, "tally: writing the FORMAT export ... N s", erased
# before the `wrote` line; with stderr a file, stderr is the `wrote` line
# alone; a quick command on a terminal shows nothing in its first half
# second.  (TALLY_PROGRESS_AFTER=0 stands for work that takes long: the
# line then shows at once.)
. "$SRCDIR/tests/e2e/lib.sh"

command -v script >/dev/null || skip "no 'script' (util-linux) to give tally a terminal"
python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big.db 3000 >gen.out || fail "gen-bigdb.py: $(cat gen.out)"

# on_tty OUT CMD: CMD with a terminal as stdout and stderr, all it wrote in OUT
on_tty() {
	local out=$1
	shift
	script -qec "$*" /dev/null >"$out" 2>&1 </dev/null || fail "'$*' on a terminal failed: $(cat -v "$out")"
}

# check FILE PHASE WROTE: the progress line of PHASE, erased, then the wrote line
check_tty() {
	python3 - "$@" <<'PY' || fail "the terminal's output (above)"
import re, sys
t = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
phase, wrote = sys.argv[2], sys.argv[3]
m = re.search(r"\r\x1b\[Ktally: %s \.\.\. \d+ s\r\x1b\[Ktally: wrote '%s'" % (re.escape(phase), re.escape(wrote)), t)
if not m:
    sys.exit("no progress line %r erased before the wrote line: %r" % (phase, t[:400]))
print("ok: %r" % t[m.start():m.end()])
PY
}

export_tty() {
	local f
	for f in pprof svg; do
		TALLY_PROGRESS_AFTER=0 on_tty tty.$f "'$TALLY' export -i big.db --format $f -o x.$f"
		check_tty tty.$f "writing the $f export" "x.$f"
	done
	TALLY_PROGRESS_AFTER=0 on_tty tty.html "'$TALLY' report -i big.db --html x.html"
	check_tty tty.html "writing the HTML report" "x.html"
}

not_tty() {
	TALLY_PROGRESS_AFTER=0 "$TALLY" export -i big.db --format pprof -o y.pprof 2>err.txt || fail "export failed: $(cat err.txt)"
	[[ $(cat err.txt) == "tally: wrote 'y.pprof' (pprof, "*" bytes)" ]] || fail "export with stderr a file wrote: $(cat -v err.txt)"
	TALLY_PROGRESS_AFTER=0 "$TALLY" report -i big.db --html y.html 2>err.txt || fail "report --html failed: $(cat err.txt)"
	[[ $(cat err.txt) == "tally: wrote 'y.html' (HTML report, "*" bytes)" ]] || fail "report --html with stderr a file wrote: $(cat -v err.txt)"
}

quick() {
	on_tty q.out "'$TALLY' export -i big.db --format folded -o q.folded"
	local t
	t=$(tr -d '\r' <q.out)
	# (a loaded machine may take longer than half a second: then the line is right to show)
	if grep -q "writing the folded export" <<<"$t"; then
		note "the export took more than half a second here: its line showed"
	else
		[[ $t == "tally: wrote 'q.folded' (folded, "*" bytes)" ]] || fail "a quick export on a terminal wrote: $(cat -v q.out)"
	fi
}

subtest "export and report --html on a terminal: a progress line, erased" export_tty
subtest "stderr a file: the wrote line alone" not_tty
subtest "a quick command on a terminal: nothing in its first half second" quick
