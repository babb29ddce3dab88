#!/bin/bash
# tally archive --list: every member with its size, what it is and where it
# comes from; each file's size is the size of its source, the database's
# files add up to what the archive then holds, the total is the sum, and
# --list writes nothing. The archive written then holds exactly the members
# listed, of exactly those sizes. --exclude-dependent (oparchive -x) keeps
# only the programs' own executables.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 1000 -o db -- "$WORKLOADS/split_images" 300
snap() { find . -path ./out -prune -o -path ./err -prune -o -path ./list.txt -prune -o -print | sort | md5sum; }
before=$(snap)
tally_ok archive -i db --list
cp out list.txt
[[ $(snap) == "$before" ]] || fail "--list wrote something: $(ls -A)"
grep -q '^# tally archive of' list.txt || fail "no heading line: $(head -3 list.txt)"

python3 - list.txt <<'PY' || fail "--list: see above; $(cat list.txt)"
import os, sys
rows, total = [], None
for line in open(sys.argv[1]):
    f = line.split()
    if not f or line.startswith("#") or f[0] == "bytes":
        continue
    if f[1] == "total":
        total = int(f[0]); continue
    size, role, member, src = int(f[0]), f[1], f[2], f[3]
    rows.append((size, role, member, src))
    if role != "db":
        real = os.path.getsize(src)
        assert size == real, "%s: listed %d bytes, '%s' has %d" % (member, size, src, real)
roles = set(r[1] for r in rows)
assert {"db", "image"} <= roles, "roles listed: %s" % roles
assert any(r[2].endswith("/split_images") and r[1] == "image" for r in rows), "no split_images image"
assert any(r[2].endswith("/libtallywork.so") and r[1] == "image" for r in rows), "no libtallywork.so image"
assert total == sum(r[0] for r in rows), "total %s but the rows add up to %d" % (total, sum(r[0] for r in rows))
open("members.txt", "w").write("".join("%d %s\n" % (r[0], r[2]) for r in rows))
PY

tally_ok archive -i db -o a
(cd a && find . -type f ! -name MANIFEST -printf '%s %P\n') | sort -k2 >written.txt
sort -k2 members.txt >listed.txt
diff listed.txt written.txt >/dev/null || fail "the archive holds other members or sizes than --list said: $(diff listed.txt written.txt | head)"
tally_ok archive -i db -o a.tar.gz
tar tvzf a.tar.gz | awk '$6 != "MANIFEST" { print $3, $6 }' | sort -k2 >tar.txt
diff listed.txt tar.txt >/dev/null || fail "the tarball holds other members or sizes than --list said: $(diff listed.txt tar.txt | head)"
note "--list: $(wc -l <members.txt) members, sizes as written (directory and tar.gz)"

tally_ok archive -i db --list -x
grep -q '/split_images ' out || fail "-x: the program is not listed: $(cat out)"
awk '$2 != "db"' out >nondb.txt
! grep -Eq 'libtallywork|libc\.so|vmlinux|kernel/' nondb.txt || fail "-x lists a dependent image: $(grep -E 'libtallywork|libc|kernel/' nondb.txt)"
note "--exclude-dependent: only the program"

# usage errors
expect_fail_with "give -o OUT" "$TALLY" archive -i db
expect_fail_with "writes nothing" "$TALLY" archive -i db --list -o x
expect_fail_with "'a' already exists" "$TALLY" archive -i db -o a
expect_fail_with "no database at .nothere." "$TALLY" archive -i nothere -o b
[[ ! -e b ]] || fail "a failed archive left 'b'"
