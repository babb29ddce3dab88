#!/bin/bash
# export --format folded: one `root;...;leaf COUNT` line per distinct stack,
# the counts adding up to the report's period-weighted total (nanoseconds of
# cpu-clock, page-faults events), and with --samples to its sample total; caller_a and caller_b of
# callsplit split leaf's samples as the workload measured; --comm-root puts
# the command name first; --percent-limit cuts small paths to [other] with the
# total unchanged; the selection (--pid, --comm, --image, --event) applies;
# `-o -` writes to stdout and the default file is tally.folded.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

tally_ok record -g --per-pid -e cpu-clock,page-faults -F 2000 -o cs.db -- "$WORKLOADS/callsplit_fp" 400
cp out cs.truth
pid=$(workload_pid cs.truth)
report_json cs.json -i cs.db
total=$(json_value cs.json cpu-clock)
pf_total=$(json_value cs.json page-faults)
nsamples=$(json_total cs.json cpu-clock)

# the default output file, the first event
tally_ok export -i cs.db --format folded
[[ -s tally.folded ]] || fail "export --format folded wrote no tally.folded"
grep -q "wrote 'tally.folded'" err || fail "export did not say what it wrote: $(cat err)"

check_lines() { # FILE: every line is `frames COUNT`, no empty frame
	awk '{ if ($NF !~ /^[0-9]+$/ || NF < 2) { print "line " NR ": " $0; exit 1 }
	       n = split(substr($0, 1, length($0) - length($NF) - 1), f, ";")
	       for (i = 1; i <= n; i++) if (f[i] == "") { print "line " NR " has an empty frame: " $0; exit 1 } }' "$1" ||
		fail "$1 is not in the folded format: $(awk '{ if ($NF !~ /^[0-9]+$/) { print; exit } }' "$1")"
}
sum() { awk '{ s += $NF } END { printf "%.0f\n", s }' "$1"; }
check_lines tally.folded
[[ $(sum tally.folded) == "$total" ]] || fail "folded counts add up to $(sum tally.folded), the report says $total samples"
note "folded: $(wc -l <tally.folded) stacks, $(sum tally.folded) ns = report total"
# --samples: the sample counts
tally_ok export -i cs.db --format folded --samples -o n.folded
check_lines n.folded
[[ $(sum n.folded) == "$nsamples" ]] || fail "--samples: folded counts add up to $(sum n.folded), the report says $nsamples samples"
(($(sum n.folded) < $(sum tally.folded))) || fail "--samples: the counts ($(sum n.folded)) are not fewer than the nanoseconds ($(sum tally.folded))"
# no duplicate stacks
[[ $(awk '{ $NF = ""; print }' tally.folded | sort | uniq -d | wc -l) == 0 ]] || fail "tally.folded repeats a stack"

# the split through caller_a and caller_b
a=$(awk '/(^|;)caller_a;(.*;)?leaf( |;)/ { s += $NF } END { print s + 0 }' tally.folded)
b=$(awk '/(^|;)caller_b;(.*;)?leaf( |;)/ { s += $NF } END { print s + 0 }' tally.folded)
# (the samples of those stacks, whose count the share's error is of)
nab=$(awk '/(^|;)caller_(a|b);(.*;)?leaf( |;)/ { s += $NF } END { print s + 0 }' n.folded)
share_near "$(share "$a" "$b")" "$nab" "$(truth caller_a cs.truth)" "folded: caller_a's share of leaf's stacks"
grep -Eq '^(.*;)?main;caller_a;leaf [0-9]+$' tally.folded || fail "no stack main;caller_a;leaf in tally.folded"

# stdout, and the second event
"$TALLY" export -i cs.db --format folded --event page-faults -o - >pf.folded 2>pf.err || fail "export -o - failed: $(cat pf.err)"
check_lines pf.folded
[[ $(sum pf.folded) == "$pf_total" ]] || fail "--event page-faults: folded counts add up to $(sum pf.folded), the report says $pf_total"

# --comm-root: the command name is every stack's root
tally_ok export -i cs.db --format folded --comm-root -o comm.folded
bad=$(grep -cv '^callsplit_fp;' comm.folded || true)
[[ $bad == 0 ]] || fail "--comm-root: $bad lines do not start with callsplit_fp;: $(grep -v '^callsplit_fp;' comm.folded | head -3)"
[[ $(sum comm.folded) == "$total" ]] || fail "--comm-root: the counts add up to $(sum comm.folded), not $total"

# --percent-limit: small paths become [other], nothing is lost
tally_ok export -i cs.db --format folded --percent-limit 10 -o cut.folded
check_lines cut.folded
[[ $(sum cut.folded) == "$total" ]] || fail "--percent-limit 10: the counts add up to $(sum cut.folded), not $total"
# a path kept whole carries at least 10% with the paths below it (a function's own
# samples, "main 1", stay beside its heavier callees: that is main's frame)
python3 - cut.folded "$total" <<'PY' || fail "--percent-limit 10: a path under 10% was kept whole"
import sys
lines = [l.rsplit(" ", 1) for l in open(sys.argv[1]).read().split("\n") if l]
total = int(sys.argv[2])
for path, n in lines:
    if path.split(";")[-1] == "[other]":
        continue
    below = sum(int(m) for p, m in lines if p == path or p.startswith(path + ";"))
    if below * 100 < 10 * total:
        print(f"'{path}' carries {below} of {total}", file=sys.stderr)
        sys.exit(1)
PY
(($(wc -l <cut.folded) <= $(wc -l <tally.folded))) || fail "--percent-limit 10 gave more lines than no limit"
a2=$(awk '/(^|;)caller_a;leaf( |;)/ { s += $NF } END { print s + 0 }' cut.folded)
b2=$(awk '/(^|;)caller_b;leaf( |;)/ { s += $NF } END { print s + 0 }' cut.folded)
share_near "$(share "$a2" "$b2")" "$nab" "$(truth caller_a cs.truth)" "folded --percent-limit 10: caller_a's share"

# the selection
tally_ok export -i cs.db --format folded --pid "$pid" -o pid.folded
[[ $(sum pid.folded) == "$total" ]] || fail "--pid $pid (the workload): $(sum pid.folded) samples, expected all $total"
tally_ok export -i cs.db --format folded --comm callsplit_fp -o comm2.folded
[[ $(sum comm2.folded) == "$total" ]] || fail "--comm callsplit_fp: $(sum comm2.folded) samples, expected all $total"
report_json img.json -i cs.db --image callsplit_fp
tally_ok export -i cs.db --format folded --image callsplit_fp -o img.folded
[[ $(sum img.folded) == "$(json_value img.json cpu-clock)" ]] ||
	fail "--image callsplit_fp: $(sum img.folded) ns, the report of that image says $(json_value img.json cpu-clock)"
expect_fail_with "^tally: nothing to export.*cs\.db" "$TALLY" export -i cs.db --format folded --comm nosuchcommand -o none.folded
[[ ! -e none.folded ]] || fail "an empty export left none.folded behind"
