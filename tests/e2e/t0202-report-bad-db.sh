#!/bin/bash
# report refuses what is not a readable database with one line on stderr
# and a non-zero exit: no database, a directory that is not one, a .prof
# file cut mid-line or holding garbage (the error names file and line), a
# session of an unknown format version.
. "$SRCDIR/tests/e2e/lib.sh"

expect_fail_with "nope\.db" "$TALLY" report -i nope.db
mkdir empty
(cd empty && expect_fail_with "tally\.db" "$TALLY" report)
mkdir notdb
echo hello >notdb/readme.txt
expect_fail_with "notdb" "$TALLY" report -i notdb
mkdir emptydb
expect_fail_with "emptydb" "$TALLY" report -i emptydb

tally_ok record -F 2000 -o good -- "$WORKLOADS/split_funcs" 200
report_json good.json -i good
mapfile -t profs < <(prof_files good)
((${#profs[@]} > 0)) || fail "no *-*.prof files in the database; it has: $(find good -type f | tr '\n' ' ')"
# the .prof file with the most lines
victim=$(wc -l "${profs[@]}" | sort -rn | awk '$2 != "total" { print $2; exit }')
victim=${victim#good/}

# spoil FILE MODE (truncate, garbage); prints the 1-based number of the spoiled line
spoil() {
	python3 - "$1" "$2" <<'PY'
import re, sys
path, mode = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
kv = re.compile(r"^[A-Za-z0-9_.-]+:( .*)?$")
data = [i for i, l in enumerate(lines) if l and not kv.match(l)]
if not data:
    sys.exit("no data lines in " + path)
if mode == "truncate":
    i = data[-1]
    off = lines[i].split()[0]
    text = "\n".join(lines[:i] + [off + " "])    # no count, no newline
else:
    i = data[0] + 1
    text = "\n".join(lines[:i] + ["this is not a sample line"] + lines[i:]) + "\n"
open(path, "w").write(text)
print(i + 1)
PY
}

for mode in truncate garbage; do
	cp -a good $mode.db
	line=$(spoil "$mode.db/$victim" $mode) || fail "could not spoil $victim"
	base=$(basename "$victim")
	re_base=$(sed 's/[.[\*^$+?(){}|]/\\&/g' <<<"$base")
	expect_fail_with "$re_base.*\<$line\>|\<$line\>.*$re_base" "$TALLY" report -i $mode.db
	note "$mode: $base line $line refused"
done

cp -a good v999.db
grep -q '^format-version:' v999.db/session ||
	fail "good/session has no 'format-version:' line: $(head -c 1000 good/session)"
sed -i 's/^format-version:.*/format-version: 999/' v999.db/session
expect_fail_with "999" "$TALLY" report -i v999.db

expect_fail_with "^tally: .*abc" "$TALLY" report -i good --top abc

# a damaged task list (it names the processes) is refused with its file and line
cp -a good tasks.db
[ -s tasks.db/tasks ] || fail "good/tasks is empty: nothing to damage"
printf 'x12\tcomm\t/bin/exe\n' >>tasks.db/tasks
n=$(wc -l <tasks.db/tasks)
expect_fail_with "^tally: 'tasks\.db/tasks' line $n: expected 'PID<tab>COMM<tab>EXE'" "$TALLY" report -i tasks.db
cp good/tasks tasks.db/tasks
printf '12\tno-exe-field\n' >>tasks.db/tasks
expect_fail_with "^tally: 'tasks\.db/tasks' line $n: expected" "$TALLY" report -i tasks.db

# a process id that is not one, in images or in a .prof header, is refused (it was read as 0)
cp -a good ipid.db
awk -F'\t' 'BEGIN { OFS = "\t" } $1 == "1" { $5 = "12x" } { print }' good/images >ipid.db/images
grep -qP '^1\t[^\t]*\t[^\t]*\t[^\t]*\t12x\t' ipid.db/images || fail "could not damage image 1's pid: $(head -3 good/images)"
ln=$(grep -n -P '^1\t' ipid.db/images | cut -d: -f1)
expect_fail_with "^tally: 'ipid\.db/images' line $ln: expected 'index kind id id-kind pid name path'" "$TALLY" report -i ipid.db
cp -a good ppid.db
sed -i 's/^pid:.*/pid: -5/;t;s/^index: \(.*\)/index: \1\npid: -5/' "ppid.db/$victim"
grep -q '^pid: -5$' "ppid.db/$victim" || fail "could not set a bad pid header in $victim"
expect_fail_with "header 'pid' is not a process id: '-5'" "$TALLY" report -i ppid.db
