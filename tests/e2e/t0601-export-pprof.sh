#!/bin/bash
# export --format pprof, read by `go tool pprof` (offline): -top's total and
# leaf's flat samples equal `tally report`'s, caller_a/caller_b's cumulative
# split is the workload's; the cpu value is the report's period-weighted
# total (each sample's own period, never samples x one mean), and --samples
# leaves the samples type alone; -raw's samples add up, the main program's mapping carries its
# build-id and every location of leaf lies in leaf's symbol (nm) and in its
# mapping; -traces shows main -> caller_a -> leaf; -list caller_a agrees with
# -top and puts all of it but caller_a's own samples (-top's flat) on the
# source line that calls leaf; the pid and
# comm labels are the workload's; a database without stacks exports its flat
# profile, one sample type per event; --percent-limit keeps the total.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

W=$WORKLOADS/callsplit_fp
tally_ok record -g --per-pid -F 2000 -o cs.db -- "$W" 400
cp out cs.truth
pid=$(workload_pid cs.truth)
report_json cs.json -i cs.db --symbols
total=$(json_total cs.json)
leaf=$(tjson cs.json func leaf callsplit_fp)
((leaf > 0)) || fail "the report has no samples in leaf"

tally_ok export -i cs.db --format pprof
[[ -s tally.pb.gz ]] || fail "export --format pprof wrote no tally.pb.gz"
gzip -t tally.pb.gz || fail "tally.pb.gz is not gzip data"
# -top's row of a function: field 1 flat, 4 cum
row() { awk -v f="$1" '$NF == f && NF == 6 { print $'"$2"'; exit }' top.txt; }

# -top in samples: the total and leaf's flat count are the report's
pp_top() {
	need_tool go golang-go
	gopprof_ok top.txt -top -sample_index=samples -nodefraction=0 -edgefraction=0 -nodecount=100000 tally.pb.gz
read -r shown all < <(sed -nE 's/^Showing nodes accounting for ([0-9]+), [0-9.]+% of ([0-9]+) total$/\1 \2/p' top.txt)
[[ $all == "$total" ]] || fail "pprof -top: total '$all' samples, the report says $total: $(head -12 top.txt)"
[[ $shown == "$total" ]] || fail "pprof -top shows $shown of $all samples with -nodefraction=0"
[[ $(row leaf 1) == "$leaf" ]] || fail "pprof -top: leaf's flat is '$(row leaf 1)', the report says $leaf"
share_near "$(share "$(row caller_a 4)" "$(row caller_b 4)")" $(($(row caller_a 4) + $(row caller_b 4))) "$(truth caller_a cs.truth)" "pprof -top: caller_a's share of the callers' cum"
note "pprof -top: total $all, leaf flat $leaf"
}

# the default sample type: cpu time, the report's weight in nanoseconds
pp_cpu() {
	need_tool go golang-go
	gopprof_ok cpu.txt -top -unit=ns tally.pb.gz
grep -q '^Type: cpu$' cpu.txt || fail "pprof -top: the default sample type is not cpu: $(grep Type: cpu.txt)"
ns=$(sed -nE 's/.*Total samples = ([0-9.]+)ns.*/\1/p' cpu.txt)
want=$(json_value cs.json)
# pprof prints the total with 4 to 6 significant digits
awk -v ns="$ns" -v e="$want" 'BEGIN { exit !(ns > 0 && ns >= e * 0.999 - 1 && ns <= e * 1.001 + 1) }' ||
	fail "pprof: cpu total '$ns' ns, the report's weight is $want ns"
note "pprof: cpu total $ns ns = the report's $want ns"
# --samples: the samples type alone, the period 1
tally_ok export -i cs.db --format pprof --samples -o n.pb.gz
gopprof_ok n.txt -raw n.pb.gz
grep -q '^samples/count\[dflt\]$' n.txt || fail "--samples: pprof -raw's sample types: $(grep -A1 -i 'sample types\|^samples' n.txt | head -3)"
}

# -raw: samples add up; the mapping of the program; leaf's addresses are leaf's
pp_raw() {
	local bid lo sz msg
	need_tool go golang-go
	need_tool nm binutils
	gopprof_ok raw.txt -raw tally.pb.gz
bid=$(python3 -c 'import json,sys; print([i["id"] for e in json.load(open(sys.argv[1]))["events"] for i in e["images"] if i["name"] == "callsplit_fp"][0])' cs.json)
read -r lo sz < <(nm -S "$W" | awk '$4 == "leaf" { print $1, $2 }')
[[ -n $lo ]] || fail "nm found no leaf in $W"
msg=$(python3 - raw.txt "$total" "$W" "$bid" "$lo" "$sz" <<'EOF'
import re, sys
raw, total, path, bid, lo, sz = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5], 16), int(sys.argv[6], 16)
sec, samples, maps, locs = None, [], {}, {}
for l in open(raw):
    l = l.rstrip("\n")
    if l in ("Samples:", "Locations", "Mappings"):
        sec = l
        continue
    if sec == "Samples:":
        m = re.match(r"^\s+(\d+)\s+(\d+):", l)
        if m:
            samples.append(int(m.group(1)))
    elif sec == "Locations":
        m = re.match(r"^\s+(\d+): 0x([0-9a-f]+) M=(\d+) (\S+)", l)
        if m:
            locs[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3)), m.group(4))
    elif sec == "Mappings":
        m = re.match(r"^(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)(?: (\S+))?", l)
        if m:
            maps[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16), m.group(5), m.group(6))
errs = []
if sum(samples) != total:
    errs.append("the samples add up to %d, the report says %d" % (sum(samples), total))
prog = [k for k, v in maps.items() if v[3] == path]
if not prog:
    errs.append("no mapping of %s: %s" % (path, list(maps.values())))
elif maps[prog[0]][4] != bid:
    errs.append("the mapping of %s has build-id %s, the database %s" % (path, maps[prog[0]][4], bid))
if prog and prog[0] != 1:
    errs.append("the main program's mapping is not the first")
nleaf = 0
for i, (a, m, fn) in locs.items():
    if m not in maps:
        errs.append("location %d names mapping %d, which is not there" % (i, m))
        continue
    if not maps[m][0] <= a < maps[m][1]:
        errs.append("location %d at 0x%x is outside its mapping %x-%x" % (i, a, maps[m][0], maps[m][1]))
    if fn == "leaf":
        nleaf += 1
        if not lo <= a < lo + sz:
            errs.append("leaf's location %d at 0x%x is outside leaf (0x%x, size 0x%x by nm)" % (i, a, lo, sz))
if not nleaf:
    errs.append("no location in leaf")
if errs:
    print("; ".join(errs[:6]))
    sys.exit(1)
print("ok: pprof -raw: %d samples, %d locations (%d in leaf, inside nm's leaf), mapping 1 is %s with its build-id" % (sum(samples), len(locs), nleaf, path))
EOF
) || fail "pprof -raw: $msg"
echo "$msg"
}

# -traces: main -> caller_a -> leaf
pp_traces() {
	need_tool go golang-go
	gopprof_ok traces.txt -traces tally.pb.gz
	awk '/^-+\+-+$/ { n = 0; next } { n++; f[n] = $NF; if (n >= 3 && f[n - 2] == "leaf" && f[n - 1] == "caller_a" && f[n] == "main") ok = 1 } END { exit !ok }' traces.txt ||
		fail "pprof -traces: no trace leaf, caller_a, main: $(head -30 traces.txt)"
}

# -list caller_a: the routine with the cumulative figure of -top, its source
# found (the profile names the file, -source_path the tree it is in), and on
# the line that calls leaf all of that figure but caller_a's own samples
# (-top's flat: a sample now and then lands in caller_a's few instructions
# around the call, on that line or another), and those on its lines
pp_list() {
	local cum want call flat lines
	need_tool go golang-go
	gopprof_ok top.txt -top -sample_index=samples -nodefraction=0 -edgefraction=0 -nodecount=100000 tally.pb.gz
	want=$(row caller_a 4)
	flat=$(row caller_a 1)
	gopprof_ok list.txt -list '^caller_a$' -sample_index=samples -source_path "$SRCDIR/tests/workloads" tally.pb.gz
	grep -Eq '^ROUTINE =+ caller_a in (.*/)?callsplit\.c$' list.txt || fail "pprof -list caller_a: no ROUTINE line naming callsplit.c: $(head -10 list.txt)"
	cum=$(awk '/^ROUTINE/ { getline; print $2; exit }' list.txt)
	[[ $cum == "$want" ]] || fail "pprof -list caller_a: cum '$cum', -top says $want: $(head -5 list.txt)"
	! grep -q 'could not find file' list.txt || fail "pprof -list caller_a: the source was not found: $(head -10 list.txt)"
	call=$(awk '/leaf\(acc/ { print $2; exit }' list.txt)
	[[ -n $call ]] || fail "pprof -list caller_a: no source line calling leaf: $(head -30 list.txt)"
	((call >= want - flat && call <= want)) ||
		fail "pprof -list caller_a: the line calling leaf has cum '$call'; caller_a's cum is $want, $flat of them its own: expected $((want - flat)) to $want: $(head -30 list.txt)"
	# the source lines' flat figures: caller_a's own samples, on whichever lines
	lines=$(awk '/^ROUTINE/ { r = 1; getline; next } r && $1 ~ /^[0-9]+$/ { s += $1 } END { print s + 0 }' list.txt)
	[[ $lines == "$flat" ]] || fail "pprof -list caller_a: its lines' flat figures add up to $lines, -top's flat is $flat: $(head -30 list.txt)"
	note "pprof -list caller_a: $call of its $want samples on the line calling leaf, its own $flat on its lines"
}

# labels
pp_tags() {
	need_tool go golang-go
	gopprof_ok tags.txt -tags tally.pb.gz
	grep -Eq "^ +[0-9.]+[a-z]* \( *100%\): $pid$" tags.txt || fail "pprof -tags: no pid $pid with 100%: $(cat tags.txt)"
	grep -Eq '^ +[0-9.]+[a-z]* \( *100%\): callsplit_fp$' tags.txt || fail "pprof -tags: no comm callsplit_fp with 100%: $(cat tags.txt)"
}

# --percent-limit: the same total, and an [other] frame for what was cut
pp_cut() {
	need_tool go golang-go
	tally_ok export -i cs.db --format pprof --percent-limit 5 -o cut.pb.gz
	gopprof_ok cut.txt -top -sample_index=samples -nodefraction=0 -nodecount=100000 cut.pb.gz
	grep -Eq "of $total total\$" cut.txt || fail "pprof of --percent-limit 5: the total is not $total: $(grep total cut.txt)"
}

# a flat database with two events: one sample type each, the split of work_a/b/c
pp_flat() {
	local ft fa fb fc f v
	need_tool go golang-go
	tally_ok record -e cpu-clock,page-faults -F 2000 -o flat.db -- "$WORKLOADS/split_funcs" 800
cp out flat.truth
report_json flat.json -i flat.db --symbols
tally_ok export -i flat.db --format pprof -o flat.pb.gz
gopprof_ok flatraw.txt -raw flat.pb.gz
grep -q '^cpu-clock-samples/count cpu-clock/nanoseconds\[dflt\] page-faults-samples/count page-faults/events$' flatraw.txt ||
	fail "pprof -raw of a two-event profile: sample types are $(sed -n '/^Samples:/{n;p}' flatraw.txt)"
gopprof_ok flattop.txt -top -sample_index=cpu-clock-samples -nodefraction=0 -nodecount=100000 flat.pb.gz
ft=$(sed -nE 's/^Showing nodes accounting for [0-9]+, [0-9.]+% of ([0-9]+) total$/\1/p' flattop.txt)
[[ $ft == "$(json_total flat.json cpu-clock)" ]] || fail "flat pprof: cpu-clock total '$ft', the report says $(json_total flat.json cpu-clock)"
fa=$(awk '$NF == "work_a" { print $1 }' flattop.txt)
fb=$(awk '$NF == "work_b" { print $1 }' flattop.txt)
fc=$(awk '$NF == "work_c" { print $1 }' flattop.txt)
for f in a b c; do
	v=f$f
	share_near "$(awk -v x="${!v}" -v s="$((fa + fb + fc))" 'BEGIN { printf "%.2f", 100 * x / s }')" $((fa + fb + fc)) "$(truth work_$f flat.truth)" "flat pprof: work_$f's share"
	[[ ${!v} == "$(tjson flat.json func work_$f split_funcs cpu-clock)" ]] ||
		fail "flat pprof: work_$f has ${!v} samples, the report $(tjson flat.json func work_$f split_funcs cpu-clock)"
done
}

subtest "-top: the report's total and leaf" pp_top
subtest "the cpu sample type: the report's weight, --samples: counts alone" pp_cpu
subtest "-raw: samples, mapping, leaf's locations" pp_raw
subtest "-traces: main, caller_a, leaf" pp_traces
subtest "-list caller_a: on the line that calls leaf" pp_list
subtest "-tags: pid and comm" pp_tags
subtest "--percent-limit keeps the total" pp_cut
subtest "a flat profile of two events" pp_flat
