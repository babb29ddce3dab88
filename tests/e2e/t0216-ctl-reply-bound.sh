#!/bin/bash
# tally ctl does not trust the length a reply announces: a peer on the socket
# answering 'ok N' with N near 2^64 made 'hdr + N' wrap and the buffer's
# doubling loop spin at 100% CPU forever (--timeout did not help).  Such a
# reply is refused at once with one line; an error message is printed with
# its control bytes escaped; a reply within bounds still works.
. "$SRCDIR/tests/e2e/lib.sh"

command -v python3 >/dev/null || skip "python3 is needed for the fake daemon"

# fake SOCKET REPLY: a peer that answers every connection with REPLY (printf
# escapes) and keeps it open
fake() {
	python3 - "$1" "$2" <<'PY' &
import os, socket, sys, time
path, reply = sys.argv[1], sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(4)
open(path + ".ready", "w").close()
conns = []
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(reply)
    conns.append(c)
PY
	track_pid $!
	wait_for 20 "the fake daemon's socket $1" test -e "$1.ready"
}

n=0
for reply in 'ok 18446744073709551615\n' 'ok 18446744073709551000\nabc' 'ok 99999999999999999999999\n' 'error 9000000000\n'; do
	n=$((n + 1))
	fake "$TMP/s$n" "$reply"
	# refused on the header: long before the 30 s a wait for the body would
	# take (the fake daemon never sends it), busy machine or not
	start=$(date +%s.%N)
	expect_fail_with "^tally: '$TMP/s$n' announced a reply of [0-9]+ bytes, more than the [0-9]+ an? (error )?reply may hold" \
		timeout 60 "$TALLY" ctl --socket "$TMP/s$n" --timeout 30 status
	((LAST_RC == 1)) || fail "reply '$reply': exit $LAST_RC, expected 1 (124: it hung)"
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	fcmp "$took" "<" 15 || fail "reply '$reply' took $took s to refuse: it waited instead of refusing the header"
done

# an error's message is printed on one line with its control bytes escaped
fake "$TMP/esc" 'error 10\n\x1b]0;owned\x07'
expect_fail_with '^tally: \\x1b\]0;owned\\x07$' "$TALLY" ctl --socket "$TMP/esc" --timeout 2 status
LC_ALL=C grep -q '[^[:print:]]' "$TMP/fail.err" && fail "raw bytes from the socket on stderr: $(od -c "$TMP/fail.err" | head -3)"

# within bounds: the body is printed as sent
fake "$TMP/good" 'ok 9\nstate: x\n'
tally_ok ctl --socket "$TMP/good" --timeout 2 status
[[ $(cat "$TMP/out") == "state: x" ]] || fail "the reply's body was not printed as sent: $(head -c 200 "$TMP/out")"
