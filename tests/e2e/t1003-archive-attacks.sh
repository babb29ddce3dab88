#!/bin/bash
# Tarballs crafted to escape or to lie (with python's tarfile, from a good
# archive): a member named with '..', an absolute name, a symbolic link and a
# hard link pointing outside, a device node, a named pipe, a size or a
# checksum that differs from the MANIFEST, a member the MANIFEST does not
# list, one it lists that is missing, no MANIFEST at all. Each is refused by
# 'tally report' with one line naming the member, and nothing is written
# outside the private temporary directory, which is gone afterwards. The same
# for a directory archive with a symbolic link or a changed file in it.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 1000 -o db -- "$WORKLOADS/split_funcs" 200
tally_ok archive -i db -o good.tar
tally_ok archive -i db -o gooddir
mkdir tmpdir

# craft NAME KIND: good.tar rewritten into NAME with one lie
craft() {
	python3 - good.tar "$1" "$2" "$TMP" <<'PY' || fail "cannot craft $1"
import io, re, sys, tarfile
src, dst, kind, tmp = sys.argv[1:5]
members = []
with tarfile.open(src) as t:
    for m in t.getmembers():
        members.append((m, t.extractfile(m).read() if m.isfile() else None))
def reg(name, data):
    ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = 0o644
    return (ti, data)
extra_first, out = [], []
for m, data in members:
    if kind == "size" and m.name == "db/session":
        data = data + b"extra: 1\n"; m.size = len(data)
    if kind == "checksum" and m.name == "db/session":
        # the format version (4, or an older one) changed to another digit: the same size
        new = re.sub(rb"^format-version: ([0-9])$", lambda v: b"format-version: " + (b"2" if v.group(1) != b"2" else b"1"),
                     data, count=1, flags=re.M)
        assert new != data, "no one-digit format-version in db/session"
        data = new; m.size = len(data)
    if kind == "missing" and m.name == "db/tasks":
        continue
    if kind == "nomanifest" and m.name == "MANIFEST":
        continue
    out.append((m, data))
if kind == "dotdot":
    extra_first.append(reg("../evil-dotdot", b"evil"))
elif kind == "dotdot-inside":
    extra_first.append(reg("db/../../evil-inside", b"evil"))
elif kind == "absolute":
    extra_first.append(reg(tmp + "/evil-absolute", b"evil"))
elif kind == "symlink":
    ti = tarfile.TarInfo("images/evil"); ti.type = tarfile.SYMTYPE; ti.linkname = tmp + "/outside"
    extra_first.append((ti, None))
    extra_first.append(reg("images/evil/written-through-link", b"evil"))
elif kind == "symlink-up":
    ti = tarfile.TarInfo("db/up"); ti.type = tarfile.SYMTYPE; ti.linkname = "../../.."
    extra_first.append((ti, None))
elif kind == "hardlink":
    ti = tarfile.TarInfo("db/evil-hard"); ti.type = tarfile.LNKTYPE; ti.linkname = "../../../etc/passwd"
    extra_first.append((ti, None))
elif kind == "device":
    ti = tarfile.TarInfo("db/evil-null"); ti.type = tarfile.CHRTYPE; ti.devmajor = 1; ti.devminor = 3
    extra_first.append((ti, None))
elif kind == "fifo":
    ti = tarfile.TarInfo("db/evil-fifo"); ti.type = tarfile.FIFOTYPE
    extra_first.append((ti, None))
elif kind == "unlisted":
    out.append(reg("db/unlisted", b"hello\n"))
mode = "w:gz" if dst.endswith(".gz") else "w"
with tarfile.open(dst, mode, format=tarfile.PAX_FORMAT) as t:
    for m, data in extra_first + out:
        t.addfile(m, io.BytesIO(data) if data is not None else None)
PY
}

# attack NAME KIND REGEX: the report refuses it with one line, and writes nothing
attack() {
	craft "$1" "$2"
	TMPDIR=$TMP/tmpdir expect_fail_with "$3" "$TALLY" report -i "$1"
	grep -qF "'$1'" fail.err || fail "$2: the error does not name the archive '$1': $(cat fail.err)"
	[[ -z $(ls -A tmpdir) ]] || fail "$2: the temporary directory was left: $(ls -A tmpdir)"
	local evil
	evil=$(find "$TMP" / -xdev -maxdepth 1 -name 'evil*' -o -name 'written-through-link' 2>/dev/null | head -3)
	[[ -z $evil ]] || fail "$2: a file was written outside: $evil"
	[[ ! -e $TMP/outside ]] || fail "$2: something was written through the link: $(ls -la "$TMP/outside")"
}

attack dotdot.tar dotdot "member '\.\./evil-dotdot' has '\.\.' in its name \(refused"
attack dotdot2.tar dotdot-inside "member 'db/\.\./\.\./evil-inside' has '\.\.' in its name"
attack abs.tar absolute "member '/.*evil-absolute' is an absolute path \(refused"
attack sym.tar symlink "member 'images/evil' is a symbolic link to '.*/outside', outside the archive \(refused\)"
attack symup.tar symlink-up "member 'db/up' is a symbolic link to '\.\./\.\./\.\.', outside the archive"
attack hard.tar hardlink "member 'db/evil-hard' is a hard link to '\.\./\.\./\.\./etc/passwd', outside the archive"
attack dev.tar device "member 'db/evil-null' is a device file \(refused"
attack fifo.tar fifo "member 'db/evil-fifo' is a named pipe \(refused"
attack size.tar size "member 'db/session' is [0-9]+ bytes but the MANIFEST says [0-9]+ \(a damaged or altered archive"
attack size.tar.gz size "member 'db/session' is [0-9]+ bytes but the MANIFEST says"
attack sum.tar checksum "member 'db/session' has checksum [0-9a-f]{32} but the MANIFEST says [0-9a-f]{32}"
attack unlisted.tar unlisted "member 'db/unlisted' is not in the MANIFEST"
attack missing.tar missing "the MANIFEST lists 'db/tasks', which the archive lacks"
attack noman.tar nomanifest "'noman.tar' is not a tally archive: it has no MANIFEST"
# the good one still reads (the checks above are not refusing everything)
TMPDIR=$TMP/tmpdir tally_ok report -i good.tar --symbols
grep -q work_a out || fail "the good tarball gives no work_a: $(cat out)"

# a directory archive: a link in it, or a changed file, is refused
cp -r gooddir linkdir
img=$(cd linkdir && ls images/*/split_funcs)
rm "linkdir/$img" && ln -s "$WORKLOADS/split_funcs" "linkdir/$img"
expect_fail_with "member '$img' is a symbolic link to '.*split_funcs', outside the archive" "$TALLY" report -i archive:linkdir
cp -r gooddir changed
echo "# changed" >>changed/db/tasks
expect_fail_with "member 'db/tasks' is [0-9]+ bytes but the MANIFEST says" "$TALLY" report -i archive:changed
cp -r gooddir flipped
sed -i 's/split_funcs/split_funct/' flipped/db/tasks
expect_fail_with "member 'db/tasks' has checksum" "$TALLY" report -i archive:flipped
mkdir plain
expect_fail_with "'plain' is not a tally archive: it has no MANIFEST" "$TALLY" report -i archive:plain
expect_fail_with "cannot read archive 'nothing-here'" "$TALLY" report -i archive:nothing-here
