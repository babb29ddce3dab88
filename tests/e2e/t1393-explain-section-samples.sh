#!/bin/bash
# --explain counts a sample in code of no function, which the report names by
# its section ([.plt], [.hotsec]), apart from the samples in a named function:
# the stripped `secspin` spends its time in a loop of its own section with no
# symbol left and no .eh_frame entry. Its samples are "in code of no function,
# named by its section", none "in a named function", and the stripped file is
# flagged as used but naming nothing, in text and JSON. (Counted as named, one
# such sample among thousands once hid that flag for a stripped binary.)
. "$SRCDIR/tests/e2e/lib.sh"

[[ -x $WORKLOADS/secspin ]] || skip "no secspin workload (its loop is x86-64 assembly)"
command -v strip >/dev/null || skip "no strip (binutils)"
mkdir -p bin
cp "$WORKLOADS/secspin" bin/ss
strip bin/ss
tally_ok record -F 2000 -o db -- ./bin/ss 1

counted() {
	report_text sym.txt -i db --symbols --image ss
	grep -Eq '  \[\.hotsec\]$' sym.txt || fail "--symbols has no [.hotsec] row: $(cat sym.txt)"
	report_text ex.txt -i db --explain ss
	local total named insec
	read -r total named < <(sed -nE 's/^  samples \([^)]*\): ([0-9]+), in a named function ([0-9]+) .*/\1 \2/p' ex.txt)
	insec=$(sed -nE 's/.*, in code of no function, named by its section \(\[\.plt\]\) ([0-9]+) .*/\1/p' ex.txt)
	[[ -n $total && -n $named ]] || fail "--explain gives no samples line: $(cat ex.txt)"
	[[ -n $insec ]] || fail "--explain does not count the samples in code of no function: $(cat ex.txt)"
	((named == 0)) || fail "--explain counts $named samples of the stripped binary as in a named function: $(cat ex.txt)"
	((insec * 100 >= total * 90)) || fail "only $insec of $total samples in the section's loop: $(cat ex.txt)"
	grep -Fq "used but nothing named: file '$TMP/bin/ss' was used, and none of the $total samples" ex.txt ||
		fail "--explain does not flag the stripped file that names nothing: $(cat ex.txt)"
	report_json ex.json -i db --explain ss
	python3 - ex.json "$total" "$insec" <<'PY' || fail "--explain --json disagrees with the text (above): $(head -c 800 ex.json)"
import json, sys
im = json.load(open(sys.argv[1]))["images"][0]
total, insec = int(sys.argv[2]), int(sys.argv[3])
if (im["samples"], im["named"], im["in_section"]) != (total, 0, insec) or im.get("used_but_nothing_named") is not True:
    sys.exit("json: samples %s named %s in_section %s used_but_nothing_named %s; text: %d, 0, %d, true"
             % (im["samples"], im["named"], im.get("in_section"), im.get("used_but_nothing_named"), total, insec))
PY
	note "$insec of $total samples in [.hotsec], none named; the stripped file flagged"
}
subtest "samples in a section of no function: not named, counted apart, the file flagged" counted
