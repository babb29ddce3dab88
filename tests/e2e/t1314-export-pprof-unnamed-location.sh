#!/bin/bash
# export --format pprof: one location of an image that no symbol names (here
# a PLT stub of split_funcs, added to a recording of it) stays an
# address and leaves the mapping's has_functions set, so go tool pprof keeps
# tally's names for the rest of the image instead of symbolizing it again;
# the split of work_a, work_b and work_c still reads as the workload measured.
. "$SRCDIR/tests/e2e/lib.sh"
need_tool go golang-go
need_tool readelf binutils

"$TALLY" record -o pp.db -- "$WORKLOADS/split_funcs" 800 >out 2>rec.err || fail "record: $(cat rec.err)"
prof=$(ls pp.db/split_funcs-*.prof)
# 5 samples in the .plt section (in the code's segment, in no function)
plt=$(readelf -SW "$WORKLOADS/split_funcs" | awk '$2 == ".plt" { print $5 }')
[[ -n $plt ]] || skip "split_funcs has no .plt section"
python3 - "$prof" pp.db/session "$plt" <<'PY'
import re, sys
prof, session, plt = sys.argv[1:4]
off = int(plt, 16) + 0x10
t = open(prof).read()
head, body = t.split("\n\n", 1)
head = re.sub(r"^samples: (\d+)$", lambda m: "samples: %d" % (int(m.group(1)) + 5), head, flags=re.M)
# format 3: each of the 5 samples weighs 1 ms (the weights' sums say so too)
head = re.sub(r"^weights: (\d+)$", lambda m: "weights: %d" % (int(m.group(1)) + 5000000), head, flags=re.M)
lines = [l for l in body.split("\n") if l]
lines.append("%x 5 5000000" % off)
lines.sort(key=lambda l: int(l.split()[0], 16))
open(prof, "w").write(head + "\n\n" + "\n".join(lines) + "\n")
s = open(session).read()
s = re.sub(r"^samples: (\d+)$", lambda m: "samples: %d" % (int(m.group(1)) + 5), s, count=1, flags=re.M)
s = re.sub(r"^weight-total: (\d+)$", lambda m: "weight-total: %d" % (int(m.group(1)) + 5000000), s, count=1, flags=re.M)
open(session, "w").write(s)
PY
"$TALLY" report -i pp.db >/dev/null 2>err || fail "the edited database does not read: $(cat err)"
"$TALLY" export -i pp.db --format pprof -o pp.pb.gz 2>err || fail "export: $(cat err)"
# the mapping of split_funcs as written: [FN] (has_functions) in pprof's raw dump (-symbolize=none:
# pprof shows the flags it reads, not those it sets after symbolizing itself)
go tool pprof -symbolize=none -raw pp.pb.gz >raw.txt 2>raw.err || fail "go tool pprof -raw: $(cat raw.err)"
line=$(sed -n '/^Mappings/,$p' raw.txt | grep -E '^ *[0-9]+: 0x[0-9a-f]+/.*split_funcs' | head -1)
[[ -n $line ]] || fail "no split_funcs mapping in pprof's dump: $(grep -A5 Mappings raw.txt)"
[[ $line == *"[FN]"* ]] || fail "the split_funcs mapping lacks has_functions: $line"
note "mapping: $line"
# pprof's own view keeps tally's function names
go tool pprof -top -nodecount=20 pp.pb.gz >top.txt 2>top.err || fail "go tool pprof -top: $(cat top.err)"
for f in work_a work_b work_c; do
	grep -q " $f\$" top.txt || fail "pprof -top has no $f: $(head -20 top.txt)"
done
