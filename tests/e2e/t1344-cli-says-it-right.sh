#!/bin/bash
# What a new user reads, said right: a usage error ends in one parenthesis,
# not two in a row (`--epoch 2026`); a database or a file in /proc is refused
# as a virtual directory, not "No such file or directory"; one lost sample
# and one throttling are singular in the report and the HTML page; a
# callgrind export of a build whose debug info holds a relative compilation
# directory (-fdebug-prefix-map, as Debian builds) names its source once
# relative, not with the directory twice; the README's daemon example
# records the stacks its folded export needs.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 1000 -o r.db -- "$WORKLOADS/split_funcs" 150

one_paren() {
	expect_fail_with "^tally: invalid --epoch '2026': an epoch is named YYYYMMDDHHMM\[-N\] \(see 'tally ctl status' or the database directory, or 'tally report --help'\)$" \
		"$TALLY" report -i r.db --epoch 2026
	expect_fail_with "^tally: option '--s' is ambiguous \(--symbols, --sort, --samples, --since; see 'tally report --help'\)$" "$TALLY" report --s
	# a message without its own parenthesis keeps the pointer as it was
	expect_fail_with "^tally: option '--top' needs a value \(see 'tally report --help'\)$" "$TALLY" report -i r.db --top
}

proc_dir() {
	[[ -d /proc/self ]] || skip "no /proc here"
	expect_fail_with "^tally: cannot create database '/proc/x\.db': directory '/proc' takes no new files \(a virtual file system such as /proc: choose another -o\)$" \
		"$TALLY" record -o /proc/x.db -- true
	expect_fail_with "^tally: cannot write '/proc/x\.pb\.gz': directory '/proc' takes no new files" \
		"$TALLY" export -i r.db --format pprof -o /proc/x.pb.gz
	expect_fail_with "^tally: cannot write '/proc/x\.html': directory '/proc' takes no new files" \
		"$TALLY" report -i r.db --html /proc/x.html
	# a directory that is not there is still called that
	expect_fail_with "^tally: cannot create database 'nodir/x\.db': directory 'nodir' does not exist" "$TALLY" record -o nodir/x.db -- true
}

singular() {
	cp -r r.db one.db
	sed -i -e 's/^lost: .*/lost: 1/' -e 's/^throttled: .*/throttled: 1/' one.db/session
	tally_ok report -i one.db
	grep -Eq "^lost: 1 sample \([0-9.]+%\), throttled: 1 time$" out || fail "report: $(grep '^lost' out)"
	tally_ok report -i one.db --html one.html
	grep -q 'Lost: <b>1</b> sample (' one.html && grep -q 'throttled: <b>1</b> time\.' one.html &&
		grep -q '>1 sample was lost while recording' one.html || fail "the page: $(grep -o '[^>]*<b>1</b>[^<]*' one.html | head -3)"
	! grep -q '\b1 samples\|\b1 times' out one.html || fail "'1 samples' or '1 times' left: $(grep -o '.\{20\}\b1 \(samples\|times\).\{10\}' out one.html | head -3)"
}

relative_compdir() {
	need_tool cc gcc
	mkdir -p tree/sub
	cat >tree/sub/prog.c <<'EOC'
#include <stdint.h>
#include <stdio.h>
__attribute__((noinline)) uint64_t hot_function(uint64_t n)
{
	uint64_t x = 1;
	for (uint64_t i = 0; i < n; i++)
		x = (x ^ (x >> 13)) * 0x9E3779B97F4A7C15ull + i;
	return x;
}
int main(void) { printf("%llu\n", (unsigned long long)hot_function(100000000ull)); return 0; }
EOC
	# built in its directory, the tree's path mapped to "." (DW_AT_comp_dir "./sub")
	(cd tree/sub && cc -O2 -g -fdebug-prefix-map="$TMP/tree=." -o ../../prog prog.c) || fail "cc failed"
	tally_ok record -g -F 2000 -o p.db -- ./prog
	tally_ok export -i p.db --format callgrind -o p.callgrind
	local fl
	fl=$(grep -E '^fl=\([0-9]+\) .*prog\.c$' p.callgrind | head -1)
	[[ $fl == *" sub/prog.c" ]] || fail "callgrind names the source '$fl', not 'sub/prog.c' (its directory once)"
	"$TALLY" annotate -i p.db hot_function >a.txt 2>&1 || fail "annotate: $(cat a.txt)"
	grep -q "^# source 'sub/prog.c' not found" a.txt || fail "annotate: $(head -3 a.txt)"
	# an absolute compilation directory still gives an absolute path
	tally_ok record -g -F 2000 -o abs.db -- "$WORKLOADS/inline_chain" 150
	tally_ok export -i abs.db --format callgrind -o abs.callgrind
	grep -Eq "^fl=\([0-9]+\) /.*/tests/workloads/inline_chain\.c$" abs.callgrind ||
		fail "callgrind: no absolute inline_chain.c: $(grep '^fl=(' abs.callgrind | head -3)"
}

readme_daemon() {
	python3 - "$SRCDIR/README.md" <<'PY' || fail "README (above)"
import re, sys
t = open(sys.argv[1]).read()
for block in re.findall(r"```sh\n(.*?)```", t, re.S):
    lines = block.splitlines()
    for i, l in enumerate(lines):
        m = re.match(r"\S*tally daemon --db (\S+)(.*)", l)
        if not m:
            continue
        db, args = m.group(1), m.group(2).split("#")[0].split()
        stacks = "-g" in args or "--call-graph" in args
        for later in lines[i + 1:]:
            if re.search(r"tally export -i %s\b.*--format (folded|svg|speedscope)" % re.escape(db), later) and not stacks:
                sys.exit("the daemon records %s without -g, then: %s" % (db, later.strip()))
        print("ok: the daemon example records with %s" % ("-g" if stacks else "no stacks and exports none"))
PY
}

subtest "usage errors end in one parenthesis" one_paren
subtest "/proc: a virtual directory, said so" proc_dir
subtest "one lost sample, one throttling: singular" singular
subtest "a relative compilation directory: the source named once" relative_compdir
subtest "the README's daemon records the stacks its export needs" readme_daemon
