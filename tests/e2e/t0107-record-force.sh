#!/bin/bash
# an existing database is never overwritten silently: a second record -o DB
# fails with a one-line error pointing at --force and leaves DB alone; with
# --force the new recording replaces (not merges into) the old one; a path
# taken during the recording sends the data next to it, and says so.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 2000 -o db -- "$WORKLOADS/split_funcs" 200
snapshot() { (cd db && find . -type f -exec md5sum {} + | sort -k2); }
before=$(snapshot)

expect_fail_with "--force" "$TALLY" record -F 2000 -o db -- "$WORKLOADS/exitcode" 0
after=$(snapshot)
[[ $before == "$after" ]] || fail "the failed record changed the existing database: before: $before; after: $after"
note "existing database untouched"

tally_ok record --force -F 4000 -o db -- "$WORKLOADS/split_images" 200
report_json sym.json -i db --symbols
n=$(tjson sym.json func own_work)
((n > 0)) || fail "after record --force the database has no samples in own_work (the new command)"
old=$(tjson sym.json func work_a)
((old == 0)) || fail "after record --force the database still has $old samples in work_a from the old recording (replaced, not merged, expected)"
note "--force replaced the database: own_work $n samples, work_a 0"

# the database's path taken while recording (here by the command itself):
# nothing of theirs is touched, the data goes to DB.PID, and what tally says
# it wrote, and where it tells the user to look, is that directory
tally_ok record -F 2000 -o late -- sh -c 'mkdir late && echo theirs >late/file && exec "$0" 100' "$WORKLOADS/split_funcs"
[[ $(cat late/file) == theirs && ! -e late/session ]] || fail "the recording wrote into the directory that appeared meanwhile: $(ls late)"
alt=$(sed -n "s/^tally: wrote '\([^']*\)'.*/\1/p" "$TMP/err")
[[ $alt =~ ^late\.[0-9]+$ ]] || fail "record said it wrote '$alt', expected late.PID: $(cat "$TMP/err")"
[[ -f $alt/session ]] || fail "'$alt', which record says it wrote, is no database"
grep -q "see 'tally report -i $alt'" "$TMP/err" || fail "record points at another directory than the one it wrote: $(cat "$TMP/err")"
grep -q "^tally: warning: 'late' appeared while recording; wrote '$alt' instead" "$TMP/err" ||
	fail "record did not say why it wrote '$alt': $(cat "$TMP/err")"
note "a path taken meanwhile: $(grep wrote "$TMP/err" | tr '\n' ';')"
