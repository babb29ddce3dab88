#!/bin/bash
# Names are bytes, not text: a program file named with bytes that are not
# UTF-8, run with such an argument.  Every JSON output (report, its
# --symbols, call-graph and --explain views, annotate) stays valid JSON that
# a strict UTF-8 decoder reads, each bad byte shown as U+FFFD, the good
# characters kept.
. "$SRCDIR/tests/e2e/lib.sh"

bad=$'w\xff\xfe-caf\xc3\xa9'
cp "$WORKLOADS/split_funcs" "./$bad"
tally_ok record -g -F 999 -o db -- "./$bad" 200 $'arg\xe9'

# strict: bytes decoded as UTF-8 (an error on any bad byte), then JSON
strict() { # FILE WANT: WANT (a Python string) must occur in some string of it
	python3 - "$1" "$2" <<'PY' || fail "$1 is not valid UTF-8 JSON, or lacks $2"
import json, sys
raw = open(sys.argv[1], 'rb').read()
doc = json.loads(raw.decode('utf-8'))  # strict: raises on a bad byte
want = sys.argv[2].encode().decode('unicode_escape')
def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
hit = [s for s in strings(doc) if want in s]
if not hit:
    sys.exit('%s: no string holds %r' % (sys.argv[1], want))
PY
}
want_img='w\ufffd\ufffd-caf\u00e9'
run() { # OUT ARGS...
	local out=$1 rc=0
	shift
	"$TALLY" "$@" >"$out" 2>"$out.err" || rc=$?
	((rc == 0)) || fail "tally $* exited $rc: $(head -c 500 "$out.err")"
}
run r.json report -i db --json
strict r.json "$want_img"
strict r.json 'arg\ufffd'
run s.json report -i db --json --symbols
strict s.json "$want_img"
run c.json report -i db --json --children
strict c.json "$want_img"
run e.json report -i db --json --explain
strict e.json "$want_img"
run a.json annotate -i db --json work_a
strict a.json "$want_img"
note "report (4 views) and annotate: valid JSON, the bad bytes as U+FFFD, 'caf\u00e9' kept"
