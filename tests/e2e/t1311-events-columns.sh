#!/bin/bash
# tally events: the columns line up whatever the names and aliases (the type
# column starts at the same place on every line, two spaces or more after the
# longest name, e.g. 'branches|branch-instructions').
. "$SRCDIR/tests/e2e/lib.sh"

"$TALLY" events >events.txt 2>/dev/null || fail "tally events failed"
[[ -s events.txt ]] || fail "tally events printed nothing"
python3 - events.txt <<'PY' || fail "tally events: the columns do not line up (above)"
import re, sys
cols = set()
for line in open(sys.argv[1]):
    m = re.match(r"^(\S+)( {2,})(hardware|software|tracepoint|raw)\s", line)
    if not m:
        sys.exit("no name, two spaces, then the type: %r" % line)
    cols.add(m.start(3))
if len(cols) != 1:
    sys.exit("the type column starts at %s" % sorted(cols))
print("ok: the type column starts at %d on every line" % cols.pop())
PY
