#!/bin/bash
# Labels of a merge, selected and grouped: `tally merge --label KEY=VALUE`
# labels the inputs that follow it (and KEY= drops a key, the defaults
# included); `report --label` selects (several values of a key: either;
# KEY=: the samples without it), `report --by-label` gives one report per
# value (text and JSON) equal to the report of its inputs alone; `export
# --label` selects too (folded stacks equal the input's own); a label key
# the database lacks is one line of error. Merging with `--label run=`
# sums the runs of a host into one label set.  The text report and the folded
# stacks are compared in samples (--samples): a merge keeps no period of its
# inputs' until the database holds weights (format 3 and later).
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 999 -o a.db -- "$WORKLOADS/split_funcs" 250
tally_ok record -g -F 999 -o b.db -- "$WORKLOADS/callsplit_fp" 250
tally_ok record -g -F 999 -o c.db -- "$WORKLOADS/split_funcs" 250

tally_ok merge -o m.db --label host=alpha a.db --label host=beta --label team=x b.db c.db
python3 - m.db/labels <<'PY' || fail "labels (above)"
import sys
# the command names each recording kept (comm=NAME) ride along: set aside here
sets = sorted(set(tuple(x for x in l.rstrip("\n").split("\t")[1:] if not x.startswith("comm="))
                  for l in open(sys.argv[1]) if not l.startswith("#")))
want = sorted([("host=alpha", "run=a.db"), ("host=beta", "run=b.db", "team=x"), ("host=beta", "run=c.db", "team=x")])
if sets != want:
    sys.exit("label sets %s, expected %s" % (sets, want))
print("ok: --label applies to the inputs after it:", sets)
PY

total() { tjson "$1" total; }
report_json al.json -i m.db --label host=alpha
report_json a.json -i a.db
[[ $(total al.json) == "$(total a.json)" ]] || fail "--label host=alpha: $(total al.json) samples, a.db $(total a.json)"
report_json bc.json -i m.db --label host=beta
report_json b.json -i b.db
report_json c.json -i c.db
[[ $(total bc.json) == $(($(total b.json) + $(total c.json))) ]] || fail "--label host=beta: $(total bc.json), b and c $(total b.json) + $(total c.json)"
report_json ab.json -i m.db --label run=a.db --label run=b.db
[[ $(total ab.json) == $(($(total a.json) + $(total b.json))) ]] || fail "--label run=a.db --label run=b.db: $(total ab.json) samples"
report_json none.json -i m.db --label team=
[[ $(total none.json) == "$(total a.json)" ]] || fail "--label team= (no team): $(total none.json) samples, a.db $(total a.json)"
report_json both.json -i m.db --label host=beta --label run=c.db
[[ $(total both.json) == "$(total c.json)" ]] || fail "--label host=beta --label run=c.db: $(total both.json), c.db $(total c.json)"
note "--label selects: alpha $(total al.json), beta $(total bc.json), no team $(total none.json)"

# --by-label: a report per value, each the inputs' own
report_text by.txt -i m.db --by-label host --samples
[[ $(grep -c '^## ' by.txt) == 2 ]] || fail "--by-label host: $(grep '^## ' by.txt)"
[[ $(grep '^## ' by.txt | tr '\n' ' ') == "## host=alpha ## host=beta " ]] || fail "--by-label host headings: $(grep '^## ' by.txt)"
awk '/^## host=alpha/ { on = 1; next } /^## / { on = 0 } on' by.txt >alpha.txt
report_text a.txt -i a.db --samples
diff <(grep -Ev '^(#|$)' alpha.txt) <(grep -Ev '^(#|$)' a.txt) >d.out || fail "--by-label host: alpha's table differs from a.db's: $(cat d.out)"
"$TALLY" report -i m.db --by-label run --json >by.json || fail "--by-label run --json failed"
python3 - by.json a.json b.json c.json <<'PY' || fail "--by-label --json (above)"
import json, sys
d = json.load(open(sys.argv[1]))
vals = [g["value"] for g in d["groups"]]
if d["by_label"] != "run" or vals != ["a.db", "b.db", "c.db"]:
    sys.exit("groups %s" % vals)
for g, path in zip(d["groups"], sys.argv[2:]):
    own = json.load(open(path))
    if [e["samples"] for e in g["report"]["events"]] != [e["samples"] for e in own["events"]]:
        sys.exit("%s: %s samples, its own report %s" % (g["value"], g["report"]["events"][0]["samples"], own["events"][0]["samples"]))
print("ok: --by-label run --json: one report per run, each the run's own")
PY
report_text byc.txt -i m.db --by-label host --children
grep -q "caller_a" <(awk '/^## host=beta/ { on = 1; next } /^## / { on = 0 } on' byc.txt) || fail "--by-label --children: beta has no caller_a"
! grep -q "caller_a" <(awk '/^## host=alpha/ { on = 1; next } /^## / { on = 0 } on' byc.txt) || fail "--by-label --children: alpha has callsplit's caller_a"

# export selects by label too
tally_ok export -i m.db --label run=b.db --format folded --samples -o mb.folded
tally_ok export -i b.db --format folded --samples -o b.folded
diff mb.folded b.folded >d.out || fail "export --label run=b.db differs from b.db's own export: $(head -c 800 d.out)"

# a key the database lacks; a database without labels
expect_fail_with "^tally: --label zone: 'm\.db' has no label 'zone' \(its labels: comm, host, run, team\)$" "$TALLY" report -i m.db --label zone=1
expect_fail_with "^tally: --by-label zone: 'm\.db' has no label 'zone' \(its labels: comm, host, run, team\)$" "$TALLY" report -i m.db --by-label zone
expect_fail_with "^tally: --label host: 'a\.db' has no label 'host' \(its labels: comm\)$" "$TALLY" report -i a.db --label host=x
expect_fail_with "^tally: --by-label groups the text and JSON reports" "$TALLY" report -i m.db --by-label host --html x.html
# a value no sample has: the selection is empty, which is the error (t1342)
expect_fail_with "^tally: nothing to report: 'm\.db' has no samples in the selection: no samples have the --label values asked \(the values with samples: host=alpha, host=beta\)$" \
	"$TALLY" report -i m.db --label host=gamma

# --label run= at merge time: the runs of a host add up in one label set
tally_ok merge -o hosts.db --label host=h --label run= a.db c.db
[[ $(grep -v '^#' hosts.db/labels | sed -E 's/\tcomm=[^\t]*//' | cut -f2- | sort -u) == host=h ]] ||
	fail "--label run=: label sets $(cat hosts.db/labels)"
report_json h.json -i hosts.db --symbols
report_json a2.json -i a.db --symbols
report_json c2.json -i c.db --symbols
[[ $(tjson h.json func work_a) == $(($(tjson a2.json func work_a) + $(tjson c2.json func work_a))) ]] || fail "--label run=: work_a does not add up"
[[ $(find hosts.db -name '*.prof' | wc -l) -le $(find a.db c.db -name '*.prof' | wc -l) ]] || fail "--label run=: more profiles than the inputs"
# and with no merge labels at all: format version 4 (weights, binary stacks), the labels only
# the command names the recordings kept
tally_ok merge -o plain.db --label host= --label run= a.db c.db
grep -qx 'format-version: 4' plain.db/session || fail "a merge without labels is not version 4: $(head -1 plain.db/session)"
[[ -z $(grep -v '^#' plain.db/labels | cut -f2- | grep -vP '^comm=[^\t]*$') ]] || fail "a merge with host= and run= keeps labels: $(cat plain.db/labels)"
