#!/bin/bash
# tally report --html refusals, each one line on stderr with no file left
# behind (and an existing page untouched): a missing directory, a directory as
# the file, an empty name, a missing value, --json, --lines or a call-graph view
# alongside, a damaged database, a selection the database cannot serve.  An
# empty profile (a period no run can reach: no sample, whatever the machine)
# still gets a page that says it has no samples.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 100

refusals() {
	expect_fail_with "^tally: cannot write 'nodir/r\.html': no directory 'nodir'$" "$TALLY" report -i cs.db --html nodir/r.html
	[[ ! -e nodir ]] || fail "a refused report made nodir"
	mkdir adir
	expect_fail_with "^tally: cannot write 'adir': it is a directory \(name a file\)$" "$TALLY" report -i cs.db --html adir
	[[ -z $(ls adir) ]] || fail "a refused report wrote into adir: $(ls adir)"
	expect_fail_with "^tally: no file name for the HTML report$" "$TALLY" report -i cs.db --html ''
	expect_fail_with "^tally: option '--html' needs a value" "$TALLY" report -i cs.db --html
	expect_fail_with "^tally: --html makes the whole report: leave out --json, --symbols, --lines, --explain and the call-graph views" \
		"$TALLY" report -i cs.db --html r.html --json
	((LAST_RC == 2)) || fail "--html with --json exited $LAST_RC, expected 2 (usage)"
	expect_fail_with "^tally: --html makes the whole report" "$TALLY" report -i cs.db --html r.html --children
	expect_fail_with "^tally: --html makes the whole report" "$TALLY" report -i cs.db --html r.html --callers leaf
	expect_fail_with "^tally: --html makes the whole report" "$TALLY" report -i cs.db --html r.html --lines
	expect_fail_with "^tally: invalid --percent-limit 'lots'" "$TALLY" report -i cs.db --html r.html --percent-limit lots
	[[ ! -e r.html ]] || fail "a refused report left r.html"
}

# an existing page stays as it was when the report fails
kept() {
	local leftover
	echo "old page" >r.html
	expect_fail_with "^tally: no database at 'missing\.db'" "$TALLY" report -i missing.db --html r.html
	cp -r cs.db bad.db
	# (a binary stacks file, format version 4, made text first: tally reads
	# either, and names the line of text that is damaged)
	stacks_to_text bad.db
	echo "garbage line" >>bad.db/stacks
	expect_fail_with "^tally: 'bad\.db/stacks' line [0-9]+: .*damaged" "$TALLY" report -i bad.db --html r.html
	expect_fail_with "^tally: 'cs\.db' was recorded without --per-pid, so it cannot be filtered by --pid" \
		"$TALLY" report -i cs.db --html r.html --pid 1
	expect_fail_with "^tally: event 'page-faults' is not in 'cs\.db'" "$TALLY" report -i cs.db --html r.html --event page-faults
	[[ $(cat r.html) == "old page" ]] || fail "a failed report changed r.html: $(head -c 200 r.html)"
	leftover=$(find . -maxdepth 1 -name '*.tmp*' | head -3)
	[[ -z $leftover ]] || fail "temporary files left behind: $leftover"
}

# the page replaces the old one whole
replaced() {
	echo "old page" >r2.html
	tally_ok report -i cs.db --html r2.html
	grep -q '^<!DOCTYPE html>' r2.html || fail "r2.html was not replaced by the report: $(head -c 200 r2.html)"
	grep -q '</html>' r2.html || fail "r2.html does not end with </html>"
}

# an empty profile: a page that says so.  One sample every 1000 s of CPU
# time: 'true' never reaches it.
empty() {
	tally_ok record -g -c 1000000000000 -o empty.db -- true
	[[ $(session_key empty.db samples) == 0 ]] || fail "'true' got $(session_key empty.db samples) samples at one per 1000 s of CPU"
	tally_ok report -i empty.db --html empty.html
	grep -q '^<!DOCTYPE html>' empty.html && grep -q '</html>' empty.html || fail "the page of an empty profile is not a whole page: $(head -c 300 empty.html)"
	grep -q 'class="warn nosamples"' empty.html || fail "the page of an empty profile does not say it has no samples"
	note "an empty profile gets a page saying it has no samples"
}

subtest "refusals: one line, no file" refusals
subtest "a failed report leaves the old page" kept
subtest "the page replaces the old one whole" replaced
subtest "an empty profile: a page that says so" empty
