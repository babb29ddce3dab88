#!/bin/bash
# a --call-graph dwarf database grows with the distinct stacks, not with the
# recording time: callsplit_nofp for T and 3T gives about three times the
# samples in databases of about the same size, tiny (no raw stack copies are
# written: 16 KiB a sample would be megabytes), text only but for its
# `stacks` file, which has the documented layout (binary in format version 4,
# read by tests/e2e/stacks.py) with counts that add up to the samples.
. "$SRCDIR/tests/e2e/lib.sh"

T=300
tally_ok record --call-graph dwarf -F 2000 -o short -- "$WORKLOADS/callsplit_nofp" $T
tally_ok record --call-graph dwarf -F 2000 -o long -- "$WORKLOADS/callsplit_nofp" $((3 * T))

s1=$(session_key short samples)
s3=$(session_key long samples)
between "$(awk -v a="$s1" -v b="$s3" 'BEGIN { print b / a }')" 2.4 3.6 ||
	fail "samples: $s1 for ${T} ms and $s3 for $((3 * T)) ms, expected about 3 times as many"
b1=$(db_size short)
b3=$(db_size long)
# rare kernel paths (interrupts, preemption on a busy machine) add a few distinct
# stacks of ~200 bytes each; storing anything per sample would add tens of KiB
lim=$(awk -v a="$b1" 'BEGIN { printf "%d", 0.3 * a + 6144 }')
d=$((b3 - b1))
((d < 0)) && d=$((-d))
((d <= lim)) || fail "database size: $b1 bytes for $s1 samples, $b3 bytes for $s3 samples; expected about the same (within $lim bytes)"
note "database size: $b1 bytes ($s1 samples) vs $b3 bytes ($s3 samples)"
# the user part of the stacks is the same program doing the same thing: its
# distinct stacks must not grow with time
user_frames() {
	local k
	k=$(awk -F'\t' '$2 == "kernel" { print $1 }' "$1/images")
	stacks_text "$1" >"$1.stacks.txt"
	grep -v '^#' "$1.stacks.txt" | sed -E 's/^[^ ]+ [^ ]+ [^ ]+ //' | tr ' ' '\n' | grep -v "^${k:-none}:" | sort -u | wc -l
}
u1=$(user_frames short)
u3=$(user_frames long)
((u3 <= u1 * 3 / 2 + 8)) || fail "distinct user frames: $u1 for $s1 samples, $u3 for $s3 samples; expected about the same"

for db in short long; do
	b=$(db_size $db)
	((b < 200 * 1024)) || fail "$db: the database is $b bytes, expected under 200 KiB (raw stack copies must not be written): $(find $db -type f -printf '%s %p\n' | sort -rn | head -5 | tr '\n' ' ')"
	while IFS= read -r f; do
		[[ $f == */vdso.so ]] && continue
		# binary in format version 4: its layout is checked below
		[[ $f == */stacks && $(session_key "$db" format-version) == 4 ]] && continue
		if LC_ALL=C grep -qP '\x00' "$f"; then
			fail "$db: $f holds binary data"
		fi
	done < <(find "$db" -type f)
	stacks_text "$db" >"$db.stacks.txt"
	msg=$(python3 - "$db" "$db.stacks.txt" <<'EOF'
import re, sys
db = sys.argv[1]
session = dict(l.rstrip("\n").split(": ", 1) for l in open(db + "/session") if ": " in l)
nimages = sum(1 for l in open(db + "/images") if l.strip() and not l.startswith("#"))
# the text layout of format 3 (format 4 made text): COUNT:WEIGHT PID LABEL FRAMES...
LINE = re.compile(r"^(\d+):\d+ (\d+) \d+((?: \d+:[0-9a-f]+)+)$")
total, n, keys = 0, 0, set()
# the stacks as text (stacks.py checked the binary layout)
for no, l in enumerate(open(sys.argv[2]), 1):
    l = l.rstrip("\n")
    if not l or l.startswith("#"):
        continue
    m = LINE.match(l)
    if not m:
        sys.exit("%s/stacks line %d: %r is not `COUNT:WEIGHT PID LABEL IMAGE:OFFSET...`" % (db, no, l))
    frames = m.group(3).split()
    if any(int(f.split(":")[0]) >= nimages for f in frames):
        sys.exit("%s/stacks line %d: an image index past the %d images" % (db, no, nimages))
    if (m.group(2), m.group(3)) in keys:
        sys.exit("%s/stacks line %d: the same stack twice (stacks are interned)" % (db, no))
    keys.add((m.group(2), m.group(3)))
    total += int(m.group(1))
    n += 1
if total != int(session["samples"]):
    sys.exit("%s/stacks: the counts add up to %d, the session counted %s samples" % (db, total, session["samples"]))
print("%s: %d distinct stacks for %d samples" % (db, n, total))
EOF
	) || fail "$msg"
	note "$msg"
done
