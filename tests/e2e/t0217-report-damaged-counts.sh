#!/bin/bash
# Counts that wrap are damage, not data: a .prof (or stacks) file whose counts
# are changed to 2^64-1 and c+1 still "added up" to its header and to the
# session in 64-bit arithmetic, and report, annotate and every export then
# printed nonsense (a 6088034347758927872.00% line, a function above its
# total) or, for gmon, looped ~2.8e14 times.  Each command now refuses such a
# database with one line naming the file and the line.  A stacks pid past
# 2^31 (read as -1) is refused the same way, and a consistent but enormous
# count no longer makes gmon.out grow without bound.  The stacks are damaged
# as text (tally reads a text stacks file in any format version; the binary
# one of format version 4 is made text first, tests/e2e/stacks.py), and the
# same damage made binary again is refused too, naming the file.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o good -- "$WORKLOADS/split_funcs" 300
prof=$(cd good && ls split_funcs-*.prof | head -1)
[[ -n $prof ]] || fail "no split_funcs .prof in the database: $(ls good)"

# wrap FILE: the first two data lines' first count become 2^64-1 and c1+c2+1,
# so that the file's sum is unchanged modulo 2^64; prints the second line's number
wrap() {
	python3 - "$1" <<'PY'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
data = [i for i, l in enumerate(lines) if l and not l.startswith("#") and ":" not in l.split(" ")[0] and " " in l
        and not l.split(" ")[0].endswith(":")]
if path.endswith("stacks"):
    data = [i for i, l in enumerate(lines) if l and not l.startswith("#")]
if len(data) < 2:
    sys.exit("fewer than two data lines in " + path)
# text stacks (format 3, or 4 made text): COUNT:WEIGHT per event (the weight is kept)
def count(l):
    return int(l.split(" ")[1 if not path.endswith("stacks") else 0].split(",")[0].split(":")[0])
def setcount(l, c):
    f = l.split(" ")
    k = 0 if path.endswith("stacks") else 1
    first = f[k].split(",")[0]
    f[k] = ",".join([str(c) + first[len(first.split(":")[0]):]] + f[k].split(",")[1:])
    return " ".join(f)
a, b = data[0], data[1]
total = count(lines[a]) + count(lines[b])
lines[a] = setcount(lines[a], 2**64 - 1)
lines[b] = setcount(lines[b], total + 1)
open(path, "w").write("\n".join(lines))
print(b + 1)
PY
}

# every reading command, each refusing with one line naming FILE and line LN
# (or, given, matching RE)
all_refuse() {
	local db=$1 file=$2 ln=$3
	local re=${4:-"^tally: '$db/$file' line $ln: the counts add up past 18446744073709551615"}
	if [[ $file == stacks ]]; then
		# report reads the stacks only for the views that need them (t0670)
		expect_fail_with "$re" "$TALLY" report -i "$db" --children
		expect_fail_with "$re" "$TALLY" report -i "$db" --html "$TMP/out.html"
	else
		expect_fail_with "$re" "$TALLY" report -i "$db"
		expect_fail_with "$re" "$TALLY" report -i "$db" --symbols
	fi
	expect_fail_with "$re" "$TALLY" annotate -i "$db" work_a
	for fmt in folded pprof callgrind gmon; do
		expect_fail_with "$re" "$TALLY" export -i "$db" --format $fmt -o "$TMP/out.$fmt"
	done
}

cp -a good wrap.db
ln=$(wrap "wrap.db/$prof") || fail "could not damage $prof"
all_refuse wrap.db "$prof" "$ln"

cp -a good swrap.db
stacks_to_text swrap.db
ln=$(wrap swrap.db/stacks) || fail "could not damage the stacks"
all_refuse swrap.db stacks "$ln"
# the same counts in a binary stacks file
cp -a swrap.db swrapb.db
stacks_to_binary swrapb.db
[[ $(head -c 8 swrapb.db/stacks) == TALLYSTK ]] || fail "stacks.py to-binary did not make swrapb.db/stacks binary"
all_refuse swrapb.db stacks - "^tally: 'swrapb\.db/stacks'.*(add up past|wrap|overflow)"

# a pid past 2^31 in a stack
cp -a good spid.db
stacks_to_text spid.db
sed -i '0,/^\([0-9][0-9,:]*\) [0-9][0-9]* /s//\1 4294967295 /' spid.db/stacks
ln=$(grep -n ' 4294967295 ' spid.db/stacks | cut -d: -f1)
[[ -n $ln ]] || fail "could not set a stack's pid: $(head -3 spid.db/stacks)"
expect_fail_with "^tally: 'spid\.db/stacks' line $ln: pid 4294967295 is not a process id" "$TALLY" report -i spid.db --tree
cp -a spid.db spidb.db
stacks_to_binary spidb.db
expect_fail_with "^tally: 'spidb\.db/stacks'.*pid" "$TALLY" report -i spidb.db --tree

# a consistent database with one enormous count (2^62 samples at one address):
# gmon.out's 16-bit bins would need 7e13 records of the histogram; refused at
# once instead of writing until memory runs out
cp -a good huge.db
rm huge.db/stacks
python3 - huge.db "$prof" <<'PY' || fail "could not make huge.db"
import re, sys
db, prof = sys.argv[1], sys.argv[2]
add = 2**62
text = open(f"{db}/{prof}").read()
head, body = text.split("\n\n", 1)
lines = body.split("\n")
f = lines[0].split(" ")
f[1] = str(int(f[1]) + add)
# a database with weights (format 3): as enormous a weight (2^62 ns)
weighted = re.search(r"^weights: ", head, flags=re.M) is not None
if weighted:
    f[2] = str(int(f[2]) + add)
    head = re.sub(r"^weights: (\d+)", lambda m: "weights: %d" % (int(m.group(1)) + add), head, flags=re.M)
lines[0] = " ".join(f)
head = re.sub(r"^samples: (\d+)", lambda m: "samples: %d" % (int(m.group(1)) + add), head, flags=re.M)
open(f"{db}/{prof}", "w").write(head + "\n\n" + "\n".join(lines))
s = open(f"{db}/session").read()
s = re.sub(r"^samples: (\d+)", lambda m: "samples: %d" % (int(m.group(1)) + add), s, flags=re.M)
if weighted:
    s = re.sub(r"^weight-total: (\d+)", lambda m: "weight-total: %d" % (int(m.group(1)) + add), s, flags=re.M)
s = re.sub(r"^call-graph: .*", "call-graph: none", s, flags=re.M)
open(f"{db}/session", "w").write(s)
PY
tally_ok report -i huge.db
expect_fail_with "^tally: a gmon\.out histogram of 'split_funcs' would take [0-9]+ records .* more than 256 MiB \(use --format pprof or callgrind, or --samples\)" \
	timeout 30 "$TALLY" export -i huge.db --format gmon -o "$TMP/huge.gmon"
[[ ! -e "$TMP/huge.gmon" ]] || fail "a refused gmon.out was written anyway"
# the sample counts alone are as huge
expect_fail_with "^tally: a gmon\.out histogram of 'split_funcs' would take [0-9]+ records .* more than 256 MiB \(use --format pprof or callgrind\)" \
	timeout 30 "$TALLY" export -i huge.db --format gmon --samples -o "$TMP/huge.gmon"
[[ ! -e "$TMP/huge.gmon" ]] || fail "a refused gmon.out (--samples) was written anyway"
