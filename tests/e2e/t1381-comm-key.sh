#!/bin/bash
# Which program used the CPU, without --per-pid (issue 12, item 6): every
# recording keeps the process's command name (comm) in its key, as a label
# (comm=NAME, docs/format.md). Two copies of split_funcs under other names,
# alpha and beta, use about 3:1 of CPU time (each measured by the shell's
# `time`, from the kernel); `report --sort comm` splits the samples as the
# kernel does, `--comm NAME` selects one program's samples (its functions
# keep split_funcs' 6:3:1), `--sort comm,image,function` is one table,
# `--sort pid` needs --per-pid, a merge keeps the names beside its own labels.
. "$SRCDIR/tests/e2e/lib.sh"

cp "$WORKLOADS/split_funcs" alpha
cp "$WORKLOADS/split_funcs" beta
cat >both.sh <<'SH'
TIMEFORMAT='%3U %3S'
{ time ./alpha 900 >alpha.out; } 2>alpha.time &
{ time ./beta 300 >beta.out; } 2>beta.time &
wait
SH
"$TALLY" record -o c.db -- bash both.sh >rec.out 2>rec.err || fail "record: $(cat rec.err)"
cpu() { awk '{ printf "%.3f", $1 + $2 }' "$1"; }
a_cpu=$(cpu alpha.time)
b_cpu=$(cpu beta.time)
truth_alpha=$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')
note "CPU time from the kernel: alpha $a_cpu s, beta $b_cpu s (alpha $truth_alpha% of the two)"

# share COMM FILE: the % column of COMM's row in a --sort comm table
share() { awk -v c="$1" '$3 == c { sub("%", "", $2); print $2 }' "$2"; }
samples_of() { awk -v c="$1" '$3 == c { print $1 }' "$2"; }

# (the tables whose figures are compared with the session's samples and with
# each other are asked for in samples, --samples)
by_comm() {
	grep -q '^per-pid: no$' c.db/session || fail "the recording was per-pid"
	grep -qP '^\d+\tcomm=alpha$' c.db/labels || fail "no comm=alpha label set: $(cat c.db/labels 2>&1)"
	"$TALLY" report -i c.db --sort comm --samples >comm.txt 2>comm.err || fail "--sort comm: $(cat comm.err)"
	local a b
	a=$(samples_of alpha comm.txt)
	b=$(samples_of beta comm.txt)
	[[ -n $a && -n $b ]] || fail "--sort comm has no alpha or beta row: $(cat comm.txt)"
	share_near "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')" $((a + b)) "$truth_alpha" "alpha's share of alpha and beta by --sort comm"
	# the rows add up to the database's samples
	local total sum
	total=$(awk '$NF == "Total" { print $1 }' comm.txt)
	sum=$(awk '$2 ~ /%$/ { s += $1 } END { print s }' comm.txt)
	[[ $sum == "$total" ]] || fail "--sort comm rows sum to $sum, Total says $total"
	[[ $total == $(session_key c.db samples) ]] || fail "--sort comm Total $total is not the session's samples"
}

comm_filter() {
	"$TALLY" report -i c.db --comm alpha --symbols --image alpha >a.txt 2>a.err || fail "--comm alpha: $(cat a.err)"
	local wa
	wa=$(awk '$NF == "work_a" { sub("%", "", $2); print $2 }' a.txt)
	[[ -n $wa ]] || fail "--comm alpha --symbols has no work_a: $(head -c 1000 a.txt)"
	report_json a.json -i c.db --comm alpha --symbols --image alpha
	tjson a.json shares func work_a work_b work_c >a.shares
	share_near "$(awk '$1 == "work_a" { print $2 }' a.shares)" "$(awk '{ s += $3 } END { print s }' a.shares)" "$(truth work_a alpha.out)" \
		"work_a's share of alpha's work functions (--comm alpha, no --per-pid)"
	# beta's samples are not in alpha's report
	local an bn
	an=$("$TALLY" report -i c.db --comm alpha --samples | awk '$NF == "Total" { print $1 }')
	bn=$("$TALLY" report -i c.db --comm beta --samples | awk '$NF == "Total" { print $1 }')
	[[ $an == $(samples_of alpha comm.txt) ]] || fail "--comm alpha has $an samples, --sort comm says $(samples_of alpha comm.txt)"
	[[ $bn == $(samples_of beta comm.txt) ]] || fail "--comm beta has $bn samples, --sort comm says $(samples_of beta comm.txt)"
	"$TALLY" export -i c.db --comm beta --format callgrind -o beta.cg 2>/dev/null || fail "export --comm beta"
	grep -q '^fn=.*work_a' beta.cg || fail "export --comm beta has no work_a"
}

sort_table() {
	"$TALLY" report -i c.db --sort comm,image,function --samples >t.txt 2>t.err || fail "--sort comm,image,function: $(cat t.err)"
	head -2 t.txt | tail -1 | grep -Eq '^ +samples +% +comm +image +function$' || fail "header: $(head -2 t.txt)"
	grep -Eq '^ +[0-9]+ +[0-9.]+% +alpha +alpha +work_a$' t.txt || fail "no alpha alpha work_a row: $(cat t.txt)"
	grep -Eq '^ +[0-9]+ +[0-9.]+% +beta +beta +work_a$' t.txt || fail "no beta beta work_a row: $(cat t.txt)"
	"$TALLY" report -i c.db --sort comm,function --json --samples >t.json || fail "--sort --json"
	python3 - <<'PY' || fail "--sort --json (above)"
import json
d = json.load(open("t.json"))
assert d["sort"] == ["comm", "function"], d["sort"]
assert sum(r["samples"] for r in d["rows"]) == d["samples"], "rows do not add up"
assert any(r["comm"] == "alpha" and r["function"] == "work_b" for r in d["rows"])
PY
	expect_fail_with "^tally: --sort pid: 'c.db' was recorded without --per-pid" "$TALLY" report -i c.db --sort pid
	expect_fail_with "^tally: --sort: unknown key 'cpu'" "$TALLY" report -i c.db --sort comm,cpu
	((LAST_RC == 2)) || fail "an unknown --sort key: exit $LAST_RC, expected 2"
	expect_fail_with "^tally: --sort makes a table of its own" "$TALLY" report -i c.db --sort comm --symbols
	expect_fail_with "^tally: --sort: key 'image' given twice" "$TALLY" report -i c.db --sort image,dso
	# --wall needs the off-CPU time of a --off-cpu recording
	expect_fail_with "^tally: 'c\.db' has no off-CPU time for --wall \(record with --off-cpu" "$TALLY" report -i c.db --wall
	# weighted by period by default: msec, and the JSON's values beside the samples
	"$TALLY" report -i c.db --sort comm >w.txt || fail "--sort comm (weighted)"
	grep -Eq '^ +msec +% +comm$' w.txt || fail "--sort comm: no msec column: $(head -3 w.txt)"
	"$TALLY" report -i c.db --sort comm --json >w.json || fail "--sort comm --json (weighted)"
	python3 - <<'PY' || fail "--sort --json, weighted (above)"
import json
d = json.load(open("w.json"))
assert d["unit"] == "ns", d.get("unit")
assert sum(r["value"] for r in d["rows"]) == d["value"], "values do not add up"
assert sum(r["samples"] for r in d["rows"]) == d["samples"], "samples do not add up"
v = [r["value"] for r in d["rows"]]
assert v == sorted(v, reverse=True), "rows not by value"
PY
}

per_pid() {
	"$TALLY" record --per-pid -o p.db -- bash both.sh >/dev/null 2>rec2.err || fail "record --per-pid: $(cat rec2.err)"
	"$TALLY" report -i p.db --sort comm,pid --samples >pp.txt || fail "--sort comm,pid"
	grep -Eq '^ +[0-9]+ +[0-9.]+% +alpha +[0-9]+$' pp.txt || fail "no alpha row with its pid: $(cat pp.txt)"
	# without pid among the keys, a program's processes are one row: two alphas
	"$TALLY" record --per-pid -o p2.db -- bash -c './alpha 300 & ./alpha 300; wait' >/dev/null 2>rec3.err ||
		fail "record --per-pid of two alphas: $(cat rec3.err)"
	"$TALLY" report -i p2.db --sort comm,pid --samples >p2pid.txt || fail "--sort comm,pid of two alphas"
	(($(awk '$3 == "alpha"' p2pid.txt | wc -l) == 2)) || fail "two alpha processes are not two rows by pid: $(cat p2pid.txt)"
	"$TALLY" report -i p2.db --sort comm --samples >pc.txt || fail "--sort comm on a --per-pid database"
	(($(awk '$3 == "alpha"' pc.txt | wc -l) == 1)) || fail "--sort comm lists alpha more than once: $(cat pc.txt)"
	[[ $(awk '$NF == "Total" { print $1 }' pc.txt) == $(session_key p2.db samples | cut -d, -f1) ]] ||
		fail "--sort comm rows of a --per-pid database do not add up to its samples: $(cat pc.txt)"
}

merged() {
	# a second recording of the same programs (a copy of c.db is refused:
	# its samples would count twice)
	"$TALLY" record -o c2.db -- bash both.sh >rec2.out 2>rec2.err || fail "record: $(cat rec2.err)"
	"$TALLY" report -i c2.db --sort comm --samples >comm2.txt || fail "--sort comm of c2.db"
	"$TALLY" merge -o m.db c.db c2.db >/dev/null 2>m.err || fail "merge: $(cat m.err)"
	"$TALLY" report -i m.db --sort comm --samples >mc.txt || fail "--sort comm of a merge"
	local a want
	a=$(samples_of alpha mc.txt)
	want=$(($(samples_of alpha comm.txt) + $(samples_of alpha comm2.txt)))
	[[ $a == "$want" ]] || fail "the merge of two recordings has $a alpha samples, not their $want"
	"$TALLY" report -i m.db --comm beta >/dev/null || fail "--comm on a merge"
	# beside the merge's own labels
	"$TALLY" report -i m.db --sort comm --label run=c2.db --samples >m2.txt || fail "--sort comm --label run=c2.db"
	[[ $(samples_of alpha m2.txt) == $(samples_of alpha comm2.txt) ]] || fail "run=c2.db's alpha samples: $(cat m2.txt)"
}

subtest "report --sort comm splits as the kernel did" by_comm
subtest "--comm without --per-pid" comm_filter
subtest "--sort with several keys, JSON, refusals" sort_table
subtest "--sort comm,pid with --per-pid" per_pid
subtest "merges keep the names" merged
