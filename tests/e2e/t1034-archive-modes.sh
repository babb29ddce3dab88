#!/bin/bash
# What tally archive creates is the user's alone, as a database's own files
# are, whatever the umask: the archive directory and every directory in it
# 0700, every file in it 0600 (the stripped debug copies too), a tarball
# 0600 with members of mode 0600; its temporaries (the staging directory or
# file, the scratch directory of stripped copies) are gone afterwards. A
# tarball reads back; an archive name that is a FIFO fails at once.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 1000 -o db -- "$WORKLOADS/split_images" 200
umask 000
mkdir arch
tally_ok archive -i db -o arch/a --strip-debug-to-sampled
tally_ok archive -i db -o arch/a.tar
tally_ok archive -i db -o arch/a.tar.gz --strip-debug-to-sampled
tally_ok archive -i db -o arch/a.tar.zst
umask 077

# every directory 0700, every file 0600
bad=$(find arch/a \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) -o ! \( -type d -o -type f \) | head -5)
[[ -z $bad ]] || fail "the archive directory holds what is not 0700 or 0600: $(stat -c '%a %F %n' $bad)"
nfiles=$(find arch/a -type f | wc -l)
((nfiles >= 3)) || fail "the archive directory holds only $nfiles files"
for t in a.tar a.tar.gz a.tar.zst; do
	[[ $(stat -c %a "arch/$t") == 600 ]] || fail "arch/$t is mode $(stat -c %a "arch/$t"), not 600"
done
# the tarballs' members say 0600 too (what tar xf would make of them)
python3 - arch/a.tar arch/a.tar.gz >modes.txt <<'PY' || fail "the tarballs' members: $(cat modes.txt)"
import sys, tarfile
bad = []
for p in sys.argv[1:]:
    with tarfile.open(p) as t:
        ms = t.getmembers()
        if len(ms) < 3:
            bad.append("%s: only %d members" % (p, len(ms)))
        bad += ["%s: %s is %o" % (p, m.name, m.mode) for m in ms if m.isfile() and m.mode != 0o600]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
# nothing else was left beside them
left=$(ls -A arch | sort | tr '\n' ' ')
[[ $left == "a a.tar a.tar.gz a.tar.zst " ]] || fail "the output directory holds: $left"
note "$nfiles files of 0600 in the archive directory (0700), tarballs 0600, under umask 000"

# it reads back (from a tarball: unpacked into its own temporary place)
tally_ok report -i arch/a.tar.gz --symbols
grep -q own_work out || fail "the archive gives no own_work: $(cat out)"
# a FIFO where the archive was: refused at once, never waited on
mkfifo fifo.tar
if ! timeout 10 "$TALLY" report -i fifo.tar >out 2>err; then
	(($? != 124)) || fail "report -i of a FIFO hung"
	[[ $(wc -l <err) == 1 ]] || fail "report -i of a FIFO: not one line: $(cat err)"
else
	fail "report -i of a FIFO exited 0: $(cat out)"
fi
