#!/bin/bash
# An image map (tally scan -o) with a NUL byte inside a well-formed line: the
# reader split lines with strchr on the NUL-terminated text, so every line
# after the NUL was dropped without a word and the map "loaded".  It is
# refused as binary data with the file and the line, as the database reader
# does.
. "$SRCDIR/tests/e2e/lib.sh"

mkdir tree
cp "$WORKLOADS/split_funcs" tree/
tally_ok scan -o map tree
n=$(grep -vc '^#' map)
((n >= 1)) || fail "the scan mapped no file: $(cat map)"
tally_ok record -F 2000 -o db -- "$WORKLOADS/split_funcs" 100
tally_ok report -i db --symbols --mapfile map

# a NUL in the first mapped line's path, with the other lines after it
ln=$(grep -vn '^#' map | head -1 | cut -d: -f1)
python3 - map "$ln" <<'PY'
import sys
path, ln = sys.argv[1], int(sys.argv[2])
lines = open(path, "rb").read().split(b"\n")
lines[ln - 1] = lines[ln - 1][:-2] + b"\0" + lines[ln - 1][-2:]
open(path + ".bad", "wb").write(b"\n".join(lines))
PY
expect_fail_with "^tally: 'map\.bad' line $ln: binary data \(a NUL byte\) in a text file" \
	"$TALLY" report -i db --symbols --mapfile map.bad
