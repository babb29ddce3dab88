#!/bin/bash
# The header of a label's report counts that label's samples and time, not
# the whole merge's: report --label host=h1 and each section of --by-label
# host say the recording's own command, start, duration (its session's) and
# samples ("N samples in host=h1, of M in all"), and JSON has them in
# "selection". A label that is not a source label (comm) takes the
# recordings its samples came from; a label inside a merge of merges, its
# own recording; without a label, the whole merge as before.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 999 -o h1.db -- "$WORKLOADS/split_funcs" 300
tally_ok record -F 999 -o h2.db -- "$WORKLOADS/inline_chain" 600
tally_ok merge -o all.db --label host=h1 h1.db --label host=h2 h2.db

# header_of FILE: the first line and the samples of the values line
check_header() {
	local file=$1 db=$2 what=$3 n
	n=$(session_key "$db" samples)
	grep -qxF "# all.db [$what]: $(session_key "$db" command), $(session_key "$db" start-time), $(session_key "$db" duration) s" "$file" ||
		fail "the header of $what does not give $db's command, start and duration ($(session_key "$db" duration) s): $(head -1 "$file")"
	grep -Eq "^# values: .*; $n samples in $what, of $(session_key all.db samples) in all\)" "$file" ||
		fail "the values line of $what does not count its $n samples: $(sed -n 3p "$file")"
}

one_label() {
	report_text h1.txt -i all.db --label host=h1
	check_header h1.txt h1.db host=h1
	report_text h2.txt -i all.db --label host=h2 --symbols
	check_header h2.txt h2.db host=h2
	# the whole merge, as before: the summed duration and every sample
	report_text all.txt -i all.db
	grep -Eq "^# all\.db: .*, $(session_key all.db duration) s$" all.txt || fail "the whole merge's header changed: $(head -1 all.txt)"
	grep -q "; $(session_key all.db samples) samples in all)" all.txt || fail "the whole merge's values line: $(sed -n 3p all.txt)"
}

by_label() {
	tally_ok report -i all.db --by-label host
	awk '/^## host=h1$/ { on = 1; next } /^## / { on = 0 } on' "$TMP/out" >s1.txt
	awk '/^## host=h2$/ { on = 1; next } /^## / { on = 0 } on' "$TMP/out" >s2.txt
	check_header s1.txt h1.db host=h1
	check_header s2.txt h2.db host=h2
}

json() {
	report_json h1.json -i all.db --label host=h1
	python3 - h1.json "$(session_key h1.db duration)" "$(session_key h1.db samples)" "$(session_key h1.db start-time)" <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
s = d["selection"]
assert s["labels"] == "host=h1", s
assert s["recordings"] == 1, s
assert abs(s["duration"] - float(sys.argv[2])) < 0.0005, s
assert s["start_time"] == sys.argv[4], s
assert d["events"][0]["samples"] == int(sys.argv[3]), d["events"][0]["samples"]
PY
		fail "the JSON selection is not h1's: $(head -c 600 h1.json)"
}

comm_label() {
	# comm is not a source label: the recordings its samples came from
	report_text c.txt -i all.db --label comm=inline_chain
	grep -q "^# all.db \[comm=inline_chain\]: $(session_key h2.db command), .*, $(session_key h2.db duration) s$" c.txt ||
		fail "--label comm=inline_chain does not take h2.db's recording: $(head -1 c.txt)"
}

nested() {
	tally_ok record -F 999 -o h3.db -- "$WORKLOADS/split_funcs" 200
	tally_ok merge -o outer.db all.db --label host=h3 h3.db
	report_text n.txt -i outer.db --label run=h2.db
	grep -q "^# outer.db \[run=h2.db\]: $(session_key h2.db command), .*, $(session_key h2.db duration) s$" n.txt ||
		fail "run=h2.db inside a merge of merges is not its own recording: $(head -1 n.txt)"
	report_text n3.txt -i outer.db --label host=h3
	grep -q ", $(session_key h3.db duration) s$" n3.txt || fail "host=h3 of the outer merge: $(head -1 n3.txt)"
}

subtest "report --label counts its own samples and time" one_label
subtest "each --by-label section counts its own" by_label
subtest "JSON: the selection's times and samples" json
subtest "a label that is not a source's: the recordings of its samples" comm_label
subtest "a label inside a merge of merges" nested
