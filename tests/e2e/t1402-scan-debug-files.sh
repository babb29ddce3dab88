#!/bin/bash
# `tally scan` of a tree of separate debug files (dbg/.build-id/xx/rest.debug,
# as objcopy --only-keep-debug and distros make them) and `report --mapfile`:
# a debug-only file has the image's build-id but no code, so it is never taken
# for the image: the stripped binary (or, when it is gone, the debug file as
# debug info) names the functions in the workload's split. --explain says the
# debug file is not the image, and flags a file that was used but names none
# of the samples.
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir -p bin dbg
cp "$WORKLOADS/split_funcs" bin/sf
bid=$(readelf -n bin/sf | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
mkdir -p "dbg/.build-id/${bid:0:2}"
dbgf="$TMP/dbg/.build-id/${bid:0:2}/${bid:2}.debug"
objcopy --only-keep-debug bin/sf "$dbgf"
objcopy --strip-all bin/sf
tally_ok record -F 2000 -o db -- ./bin/sf 900
cp out truth.txt
tally_ok scan -o m.map dbg
grep -Fq "$dbgf" m.map || fail "the scan did not list the debug file: $(cat m.map)"

named() {
	local what=$1
	report_json "$what.json" -i db --symbols --mapfile m.map
	check_split func "$what.json" truth.txt work_a work_b work_c
	[[ $(tjson "$what.json" func '[unknown]') == 0 ]] || fail "$what: samples left [unknown]: $(head -c 1500 "$what.json")"
	report_text "$what.ex" -i db --explain sf --mapfile m.map
	grep -Fq "image file '$dbgf' (--mapfile): build-id $bid matches, but it is a separate debug file (its code sections are empty): not the image" "$what.ex" ||
		fail "$what: --explain does not say the debug file is not the image: $(cat "$what.ex")"
	grep -Eq "in a named function [0-9]+ \(100\.00%\)" "$what.ex" || fail "$what: --explain: not every sample named: $(cat "$what.ex")"
	! grep -q "used but nothing named" "$what.ex" || fail "$what: --explain flags a file that names the samples: $(cat "$what.ex")"
}
subtest "the stripped binary in place: the map's debug file gives its names, never its place" named with-binary

gone() {
	mv bin/sf bin/sf.away
	at_exit "mv '$TMP/bin/sf.away' '$TMP/bin/sf'"
	named without-binary
	grep -Fq "debug file '$dbgf' (--mapfile): build-id $bid matches: used" without-binary.ex ||
		fail "without the binary, the debug file is not used as debug info: $(cat without-binary.ex)"
}
subtest "the binary gone: the map's debug file names the samples as debug info" gone

flagged() {
	# the stripped binary alone: it is used, and names nothing
	report_text plain.ex -i db --explain sf
	grep -Fq "used but nothing named: file '$TMP/bin/sf' was used, and none of the" plain.ex ||
		fail "--explain does not flag the stripped file that names nothing: $(cat plain.ex)"
	report_json plain.json -i db --explain sf
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d["images"][0].get("used_but_nothing_named") is True else 1)' plain.json ||
		fail "--explain --json has no \"used_but_nothing_named\": true: $(head -c 800 plain.json)"
}
subtest "--explain flags a file used but naming nothing" flagged
