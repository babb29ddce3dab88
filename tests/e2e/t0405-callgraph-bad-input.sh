#!/bin/bash
# call-graph input errors are one line on stderr and a non-zero exit: unknown
# --call-graph modes and DWARF stack sizes that are not numbers or out of
# range (64..65528; the bounds themselves are accepted), and frame-pointer
# stack copy sizes (fp,SIZE: 0, or 8..65528); call-graph reports of
# a database recorded without -g (telling to record with -g); a `stacks` file
# with a garbage line or an image index out of range (naming the file and the
# line); --callers/--callees of a function that is not in the stacks is a
# one-line warning naming it and its event, an exit 0 and an empty tree (text
# and JSON), where a function that is there gets its tree and no warning.
. "$SRCDIR/tests/e2e/lib.sh"

W=$WORKLOADS/callsplit_fp

modes() {
	local mode size
	for mode in nope "" fp,abc fp, fp,-8 fp,1 fp,7 fp,65529 fp2 dwarf,abc dwarf, dwarf,0 dwarf,63 dwarf,65529 dwarf,99999999 dwarf,-8 "dwarf,64 "; do
		expect_fail_with "^tally: .*(call-graph|stack size|dwarf)" "$TALLY" record --call-graph "$mode" -o "bad.db" -- "$W" 10
		[[ ! -e bad.db ]] || fail "--call-graph '$mode' was refused but left a database behind"
	done

	# the bounds are accepted
	for size in 64 65528; do
		tally_ok record --call-graph "dwarf,$size" -F 500 -o "ok$size" -- "$W" 50
		[[ $(session_key "ok$size" stack-size) == "$size" ]] || fail "--call-graph dwarf,$size: session stack-size is '$(session_key "ok$size" stack-size)'"
	done
	note "dwarf,64 and dwarf,65528 accepted"
	for size in 0 65528; do
		tally_ok record --call-graph "fp,$size" -F 500 -o "fp$size" -- "$W" 50
	done
	[[ $(session_key fp65528 fp-leaf-stack) == 65528 ]] || fail "--call-graph fp,65528: session fp-leaf-stack is '$(session_key fp65528 fp-leaf-stack)'"
	[[ -z $(session_key fp0 fp-leaf-stack) ]] || fail "--call-graph fp,0 copies no stack, yet the session says fp-leaf-stack '$(session_key fp0 fp-leaf-stack)'"
	note "fp,0 and fp,65528 accepted"
}

# call-graph reports need stacks
nostacks() {
	local q o
	tally_ok record -F 2000 -o plain -- "$W" 100
	for q in --children --callgraph --tree "--callers leaf" "--callees main"; do
		read -ra o <<<"$q"
		expect_fail_with "^tally: .*plain.*(-g|--call-graph)" "$TALLY" report -i plain "${o[@]}"
		expect_fail_with "^tally: .*plain.*(-g|--call-graph)" "$TALLY" report -i plain "${o[@]}" --json
	done
}

# a damaged stacks file
tally_ok record -g -F 2000 -o good -- "$W" 200
[[ -s good/stacks ]] || fail "record -g wrote no 'stacks' file"
report_text good.txt -i good --tree
# the 1-based number of the first stack line (after the comment) of the
# stacks as text (a binary stacks file, format version 4, is made text before
# its lines are damaged: tally reads text stacks in any version)
stacks_text good >good.stacks.txt
first=$(awk '!/^#/ && NF { print NR; exit }' good.stacks.txt)
[[ -n $first ]] || fail "good/stacks has no stack lines: $(head -c 500 good.stacks.txt)"

damaged() {
	local line nimages
	cp -a good garbage.db
	stacks_to_text garbage.db
	sed -i "${first}a this is not a stack line" garbage.db/stacks
	line=$((first + 1))
	expect_fail_with "garbage\.db/stacks.*\<$line\>|\<$line\>.*garbage\.db/stacks" "$TALLY" report -i garbage.db --tree

	nimages=$(grep -vc '^#' good/images)
	cp -a good index.db
	stacks_to_text index.db
	# the first frame of the first stack: an image index past the registry
	sed -i -E "${first}s/^([0-9:,]+ [0-9]+ [0-9]+) [0-9]+:/\\1 $((nimages + 5)):/" index.db/stacks
	grep -Eq "^[0-9:,]+ [0-9]+ [0-9]+ $((nimages + 5)):" <(sed -n "${first}p" index.db/stacks) ||
		fail "could not change the image index in line $first of index.db/stacks: $(sed -n "${first}p" index.db/stacks)"
	expect_fail_with "index\.db/stacks.*\<$first\>|\<$first\>.*index\.db/stacks" "$TALLY" report -i index.db --tree
	expect_fail_with "index\.db/stacks.*\<$first\>|\<$first\>.*index\.db/stacks" "$TALLY" report -i index.db --children --json

	cp -a good noframes.db
	stacks_to_text noframes.db
	sed -i -E "${first}s/^([0-9:,]+ [0-9]+ [0-9]+) .*/\\1/" noframes.db/stacks
	expect_fail_with "noframes\.db/stacks.*\<$first\>|\<$first\>.*noframes\.db/stacks" "$TALLY" report -i noframes.db --tree
}

# a function that is not in the stacks: exit 0, one warning naming it and
# the event, the report's frame (header, unwind and lost lines) around an
# empty tree; JSON: the event with an empty tree
nosuch() {
	local q json rc warn rows
	warn="^tally: warning: no function 'NOSUCH' in the stacks of event 'cpu-clock'\$"
	for q in --callers --callees; do
		for json in "" --json; do
			rc=0
			"$TALLY" report -i good $q NOSUCH $json >nosuch.out 2>nosuch.err || rc=$?
			((rc == 0)) || fail "'tally report $q NOSUCH $json' exited $rc, expected 0 with a warning; stderr: $(head -c 500 nosuch.err)"
			[[ $(awk 'END { print NR }' nosuch.err) == 1 ]] && grep -Eq "$warn" nosuch.err ||
				fail "'tally report $q NOSUCH $json': stderr is not the one line /$warn/: $(head -c 500 nosuch.err)"
			if [[ -n $json ]]; then
				python3 - nosuch.out <<'PY' || fail "'tally report $q NOSUCH --json': $(head -c 500 nosuch.out)"
import json, sys
evs = json.load(open(sys.argv[1]))["events"]
if len(evs) != 1 or evs[0]["name"] != "cpu-clock":
    sys.exit("expected the one event cpu-clock: %s" % [e.get("name") for e in evs])
if evs[0].get("tree") != []:
    sys.exit("the tree of a function that is not there is not empty: %r" % evs[0].get("tree"))
PY
			else
				grep -q '^# event: cpu-clock' nosuch.out || fail "'tally report $q NOSUCH': no event header: $(head -c 500 nosuch.out)"
				grep -q '^unwind: ' nosuch.out && grep -q '^lost: ' nosuch.out ||
					fail "'tally report $q NOSUCH': no unwind and lost lines: $(head -c 500 nosuch.out)"
				rows=$(grep -Ec '^ +[0-9.]+% +[0-9.]+  ' nosuch.out || true)
				((rows == 0)) || fail "'tally report $q NOSUCH': $rows tree rows for a function that is not there: $(head -c 800 nosuch.out)"
			fi
			note "$q NOSUCH $json: exit 0, $(cat nosuch.err)"
		done
	done
	# the contrast: a function that is there has a tree and no warning
	report_text leaf.txt -i good --callers leaf
	[[ ! -s leaf.txt.err ]] || fail "--callers leaf warned: $(cat leaf.txt.err)"
	grep -Eq '^ +100\.00% +[0-9.]+  leaf  \[callsplit_fp\]$' leaf.txt || fail "--callers leaf: no tree rooted at leaf: $(head -c 800 leaf.txt)"
}

subtest "--call-graph and stack-size values" modes
subtest "call-graph views of a database without stacks" nostacks
subtest "damaged stacks files" damaged
subtest "--callers/--callees of a function not in the stacks" nosuch
