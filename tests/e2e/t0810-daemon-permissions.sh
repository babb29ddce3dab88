#!/bin/bash
# only the daemon's owner may use it: another user cannot reach the socket
# (mode 600 in a mode 700 directory), and when the modes are loosened by
# mistake the daemon still refuses the connection by its peer credentials;
# the database directory cannot be read by other users.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

((EUID == 0)) || skip "needs root to act as another user (uid 65534)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to run as another user"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody "$TALLY" --version >/dev/null 2>&1 || skip "uid 65534 cannot run '$TALLY' (a parent directory is private)"

start_daemon db --flush-interval 1h
chmod 711 "$TMP" # others may pass through the test directory, as through a home
expect_fail_with "^tally: permission denied on '.*db/ctl.sock': the daemon belongs to another user" \
	as_nobody "$TALLY" ctl --socket "$TMP/db/ctl.sock" status
expect_fail_with "^tally: .*db.*(ermission denied|cannot read)" as_nobody "$TALLY" report -i "$TMP/db"
as_nobody ls "$TMP/db" >/dev/null 2>&1 && fail "another user can list the database directory"
note "mode 700 directory and mode 600 socket keep uid 65534 out"

# modes loosened by mistake: the daemon checks who connects
chmod 755 db
chmod 666 db/ctl.sock
expect_fail_with "^tally: permission denied: this daemon belongs to uid 0" \
	as_nobody "$TALLY" ctl --socket "$TMP/db/ctl.sock" status
grep -q "refused a connection from uid 65534" db/daemon.log || fail "the daemon did not log the refused connection"
# a raw client gets nothing else either (a python the other user can run)
py=/usr/bin/python3
as_nobody "$py" -c 'pass' 2>/dev/null || py=$(command -v python3)
as_nobody "$py" -c 'pass' 2>/dev/null || skip "no python3 that uid 65534 may run, for the raw client"
out=$(as_nobody "$py" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"drain\n")
d = b""
while True:
    b = s.recv(65536)
    if not b: break
    d += b
print(d.decode(errors="replace").splitlines()[0])' "$TMP/db/ctl.sock")
[[ $out == error* ]] || fail "uid 65534 sent 'drain' on a loosened socket and got: $out"
ctl --db db status
[[ $(status_val state) == running ]] || fail "the owner cannot use the daemon any more"
# the daemon makes its directory private again when it starts
stop_daemon "$DAEMON_PID"
start_daemon db --flush-interval 1h
[[ $(stat -c %a db) == 700 ]] || fail "a restarted daemon left its directory mode $(stat -c %a db)"
note "peer credentials: uid 65534 refused; the owner served"
