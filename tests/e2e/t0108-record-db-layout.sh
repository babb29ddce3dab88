#!/bin/bash
# the database layout: a directory of *-*.prof files (`key: value` headers,
# then `HEXOFFSET COUNT` lines) whose counts add up to the report's total;
# with --per-pid the files end in -PID.prof (or -PID-lN.prof, N the label set
# of the process's command name: docs/format.md) and report --pid works, and
# report --pid on a database without processes is a one-line error.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 2000 -o db -- "$WORKLOADS/split_funcs" 300
[[ -d db ]] || fail "record -o db did not create a directory"
mapfile -t profs < <(prof_files db)
((${#profs[@]} > 0)) || fail "no *-*.prof files in the database; it has: $(find db -type f | tr '\n' ' ')"
sum=$(prof_sum "${profs[@]}")
report_json all.json -i db
total=$(tjson all.json total)
[[ $sum == "$total" ]] || fail "the .prof files' counts add up to $sum but the report's total is $total"
note "${#profs[@]} .prof files, counts sum to the report total $total"

expect_fail_with "per-pid" "$TALLY" report -i db --pid 1

# --per-pid
tally_ok record --per-pid -F 2000 -o pp -- "$WORKLOADS/split_funcs" 300
pid=$(workload_pid out)
mapfile -t mine < <(prof_files pp | grep -E -- "-$pid(-l[0-9]+)?\.prof\$" || true)
((${#mine[@]} > 0)) || fail "--per-pid: no .prof file ends in -$pid.prof or -$pid-lN.prof (the workload's pid); files: $(prof_files pp | tr '\n' ' ')"
mapfile -t profs < <(prof_files pp)
for f in "${profs[@]}"; do
	[[ $f =~ -[0-9]+(-l[0-9]+)?\.prof$ ]] || fail "--per-pid: profile file $f does not end in -PID[-lN].prof"
done
sum=$(prof_sum "${profs[@]}")
report_json pp.json -i pp
total=$(tjson pp.json total)
[[ $sum == "$total" ]] || fail "--per-pid: the .prof files' counts add up to $sum but the report's total is $total"
mysum=$(prof_sum "${mine[@]}")

report_json pid.json -i pp --pid "$pid" --symbols
ptotal=$(tjson pid.json total)
[[ $ptotal == "$mysum" ]] || fail "report --pid $pid total is $ptotal but the -$pid.prof files hold $mysum"
n=$(tjson pid.json func work_a split_funcs)
((n > 0)) || fail "report --pid $pid shows no samples in work_a"
note "--per-pid: report --pid $pid total $ptotal = its .prof files, work_a $n"
