#!/bin/bash
# an existing database is never overwritten silently: a second record -o DB
# fails with a one-line error pointing at --force and leaves DB alone; with
# --force the new recording replaces (not merges into) the old one.
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
