#!/bin/bash
# Format version 4: record -g writes the session's `format-version: 4` and the
# `stacks` file binary (docs/format.md: the magic TALLYSTK, the frames, each
# once, the stacks, their counts and weights, the frame numbers),
# which tests/e2e/stacks.py reads on its own: the counts of each event add up
# to the session's samples and the weights to its weight-total, one event or
# two, and a merge writes the same.  tally reads the same stacks made text
# (stacks.py to-text; text stacks are read in any version) and made binary
# again from that text (to-binary) into the same `report --children` and the
# same folded export, byte for byte.  A damaged binary file is one line on
# stderr naming it and a non-zero exit: one byte short, a wrong magic, a frame
# number past the frames, a count that no longer adds up to the session's.
. "$SRCDIR/tests/e2e/lib.sh"

# one event (callsplit_fp: leaf under caller_a and caller_b) and two
# (faultsplit: cpu-clock and page-faults, each with its stacks)
tally_ok record -g -F 2000 -o one.db -- "$WORKLOADS/callsplit_fp" 200
tally_ok record -g -e cpu-clock,page-faults -F 2000 -o two.db -- "$WORKLOADS/faultsplit"

# consistent DB: stacks.py's text of DB's stacks holds for every event of the
# session its samples (the counts) and its weight-total (the weights), in
# stacks of frames in the images of DB/images
consistent() {
	local db=$1
	stacks_text "$db" >"$db.stacks.txt"
	python3 - "$db" "$db.stacks.txt" <<'EOF' || fail "$db: its stacks do not agree with its session (above)"
import re, sys
db, text = sys.argv[1], sys.argv[2]
session = dict(l.rstrip("\n").split(": ", 1) for l in open(db + "/session") if ": " in l)
events = session["events"].split(",")
samples = [int(x) for x in session["samples"].split(",")]
wtotal = [int(x) for x in session["weight-total"].split(",")]
nimages = sum(1 for l in open(db + "/images") if l.strip() and not l.startswith("#"))
LINE = re.compile(r"([0-9:,]+) ([0-9]+) ([0-9]+)((?: [0-9]+:[0-9a-f]+)+)")
counts, weights, n = [0] * len(events), [0] * len(events), 0
for no, l in enumerate(open(text), 1):
    l = l.rstrip("\n")
    if l.startswith("#"):
        continue
    m = LINE.fullmatch(l)
    if not m:
        sys.exit("%s line %d: %r is not COUNT:WEIGHT[,...] PID LABEL IMAGE:OFFSET..." % (text, no, l))
    cw = [p.split(":") for p in m.group(1).split(",")]
    if len(cw) != len(events):
        sys.exit("%s line %d: %d counts for the %d events %s" % (text, no, len(cw), len(events), events))
    for e, (c, w) in enumerate(cw):
        counts[e] += int(c)
        weights[e] += int(w)
    if any(int(f.split(":")[0]) >= nimages for f in m.group(4).split()):
        sys.exit("%s line %d: a frame in an image past the %d of 'images'" % (text, no, nimages))
    n += 1
for e, ev in enumerate(events):
    if counts[e] != samples[e] or weights[e] != wtotal[e]:
        sys.exit("%s: the stacks hold %d '%s' samples weighing %d, the session counted %d weighing %d"
                 % (db, counts[e], ev, weights[e], samples[e], wtotal[e]))
if n == 0 or sum(samples) == 0:
    sys.exit("%s: %d stacks for %s samples: nothing to compare" % (db, n, samples))
print("ok: %s: %d stacks hold the session's %s samples (%s) and its weight-total %s"
      % (db, n, ",".join(map(str, samples)), ",".join(events), ",".join(map(str, wtotal))))
EOF
}

# binary DB: DB is format 4 with a binary stacks file, whose frames tally
# writes each once (docs/format.md; stacks.py checks the rest of the layout)
binary() {
	local db=$1 v
	v=$(session_key "$db" format-version)
	[[ $v == 4 ]] || fail "$db: the session says format-version '$v', expected 4"
	[[ $(head -c 8 "$db/stacks") == TALLYSTK ]] ||
		fail "$db: its stacks file does not start with TALLYSTK: $(head -c 8 "$db/stacks" | od -An -c)"
	python3 - "$db/stacks" <<'EOF' || fail "$db: its frames (above)"
import struct, sys
d = open(sys.argv[1], "rb").read()
nframes = struct.unpack_from("<Q", d, 16)[0]
frames = [struct.unpack_from("<IIQ", d, 40 + 16 * i) for i in range(nframes)]
if len(set(frames)) != len(frames):
    sys.exit("%s: %d frame records for %d distinct frames" % (sys.argv[1], len(frames), len(set(frames))))
EOF
}

written() {
	binary one.db
	consistent one.db
}

two_events() {
	binary two.db
	consistent two.db
}

# the same stacks as binary, as text, and as binary made again from the text:
# the same report and export (the databases under one name each in its own
# directory, so that the report's first line, which names it, is the same)
same_reads() {
	local d
	mkdir bin text rebin
	cp -a one.db bin/t.db
	cp -a one.db text/t.db
	stacks_to_text text/t.db
	grep -q '^# count:weight' text/t.db/stacks || fail "stacks.py to-text wrote no text: $(head -c 200 text/t.db/stacks)"
	[[ $(session_key text/t.db format-version) == 4 ]] || fail "stacks.py to-text changed the format-version"
	cp -a text/t.db rebin/t.db
	stacks_to_binary rebin/t.db
	[[ $(head -c 8 rebin/t.db/stacks) == TALLYSTK ]] || fail "stacks.py to-binary wrote no binary file"
	for d in bin text rebin; do
		(cd $d && "$TALLY" report -i t.db --children >children.txt 2>children.err) ||
			fail "report --children of the $d stacks failed: $(head -c 500 $d/children.err)"
		(cd $d && "$TALLY" export -i t.db --format folded -o t.folded 2>folded.err) ||
			fail "export --format folded of the $d stacks failed: $(head -c 500 $d/folded.err)"
		[[ -s $d/children.txt && -s $d/t.folded ]] || fail "$d: an empty report or export"
	done
	grep -Eq '  leaf  \[callsplit_fp\]$' bin/children.txt || fail "report --children has no leaf row: $(head -c 800 bin/children.txt)"
	for d in text rebin; do
		cmp -s bin/children.txt $d/children.txt ||
			fail "report --children of the binary stacks and of the $d ones differ: $(diff bin/children.txt $d/children.txt | head -8)"
		cmp -s bin/t.folded $d/t.folded ||
			fail "export --format folded of the binary stacks and of the $d ones differ: $(diff bin/t.folded $d/t.folded | head -8)"
	done
	note "binary, text and binary-again stacks: the same --children ($(wc -l <bin/children.txt) lines) and folded export ($(wc -l <bin/t.folded) stacks)"
}

# damage NAME PYTHON: a copy NAME.db of one.db whose binary stacks file (the
# bytes d, a bytearray) PYTHON changed
damage() {
	cp -a one.db "$1.db"
	python3 - "$1.db/stacks" "$2" <<'EOF' || fail "could not damage $1.db/stacks"
import struct, sys
path, code = sys.argv[1], sys.argv[2]
d = bytearray(open(path, "rb").read())
assert d[:8] == b"TALLYSTK", "not a binary stacks file"
ne, nframes, nstacks, nrefs = struct.unpack_from("<I", d, 8)[0], *struct.unpack_from("<QQQ", d, 16)
values = 40 + 16 * nframes + 16 * nstacks
exec(code)
open(path, "wb").write(d)
EOF
}

damaged() {
	damage trunc 'del d[-1:]'
	expect_fail_with "^tally: 'trunc\.db/stacks'.*(truncated|bytes)" "$TALLY" report -i trunc.db --children
	damage magic 'd[:8] = b"TALLYSTQ"'
	expect_fail_with "^tally: 'magic\.db/stacks'.*(magic|binary|damaged)" "$TALLY" report -i magic.db --children
	damage ref 'd[-4:] = b"\xff\xff\xff\xff"'
	expect_fail_with "^tally: 'ref\.db/stacks'.*frame" "$TALLY" report -i ref.db --children
	# the first stack's first count one more: the weights still add up, the counts not
	damage count 'struct.pack_into("<Q", d, values, struct.unpack_from("<Q", d, values)[0] + 1)'
	expect_fail_with "^tally: 'count\.db/stacks': its stacks hold [0-9]+ '.*' samples but the session counted [0-9]+" \
		"$TALLY" report -i count.db --children
	# (each is refused by what reads the stacks, an export too)
	expect_fail_with "^tally: 'trunc\.db/stacks'.*(truncated|bytes)" "$TALLY" export -i trunc.db --format folded -o trunc.folded
	[[ ! -e trunc.folded ]] || fail "a refused export wrote trunc.folded"
}

merged() {
	tally_ok record -g -F 2000 -o one2.db -- "$WORKLOADS/callsplit_fp" 100
	tally_ok merge -o m.db one.db one2.db
	binary m.db
	consistent m.db
}

subtest "record -g: format 4, binary stacks that add up to the session" written
subtest "two events: each one's counts and weights add up" two_events
subtest "binary, text and binary-again stacks read the same" same_reads
subtest "damaged binary stacks: one line naming the file" damaged
subtest "a merge writes binary stacks that add up" merged
