#!/bin/bash
# only the daemon's owner may use it: another user cannot reach the socket
# (mode 600 in a mode 700 directory), and when the modes are loosened by
# mistake the daemon still refuses the connection by its peer credentials;
# the database directory cannot be read by other users; a crowd of such
# connections takes no slot of the owner's, and sampling goes on meanwhile.
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
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    s.sendall(b"drain\n")
except OSError:
    pass # refused and closed before it asked: the answer is there all the same
d = b""
try:
    while True:
        b = s.recv(65536)
        if not b: break
        d += b
except OSError:
    pass
print(d.decode(errors="replace").splitlines()[0])' "$TMP/db/ctl.sock")
[[ $out == error* ]] || fail "uid 65534 sent 'drain' on a loosened socket and got: $out"
ctl --db db status
[[ $(status_val state) == running ]] || fail "the owner cannot use the daemon any more"

# more peers that are not the owner than there are slots, holding their
# connections open, while a workload runs: each is answered and closed at
# once (none takes a slot), the owner is served all along, nobody can read
# the database, and the sampling goes on
chmod 711 db # the socket reachable, the directory not readable
wl=$(uniq_copy split_funcs)
"$wl" 1500 >wl.out &
wlpid=$!
track_pid $wlpid
# (the crowd says when its connections are open, and holds them until the
# owner's turns are done: files in a directory it may write)
mkdir -m 1777 crowd
as_nobody "$py" -c '
import os, socket, sys, time
conns = []
for i in range(40):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); conns.append(s)
open(sys.argv[2] + "/ready", "w").write("40\n")
end = time.time() + 60
while not os.path.exists(sys.argv[2] + "/done") and time.time() < end:
    time.sleep(0.02)
answered = 0
for s in conns:
    s.settimeout(5)
    d = b""
    try:
        while True:
            b = s.recv(4096)
            if not b: break
            d += b
    except OSError:
        pass
    answered += d.startswith(b"error") and b"permission denied" in d
print("answered", answered)' "$TMP/db/ctl.sock" "$TMP/crowd" >crowd.out &
crowd=$!
track_pid $crowd
# the owner's turns while the 40 connections are held
wait_for_line crowd/ready . 30
for ((i = 0; i < 5; i++)); do
	"$TALLY" ctl --db db --timeout 5 status >/dev/null 2>owner.err || fail "the owner's 'ctl status' failed while 40 others held connections: $(cat owner.err)"
	as_nobody ls "$TMP/db" >/dev/null 2>&1 && fail "another user can list the database directory"
	as_nobody "$TALLY" report -i "$TMP/db" >/dev/null 2>&1 && fail "another user can report from the database"
done
touch crowd/done
wait $crowd || fail "the other user's client failed: $(cat crowd.out)"
[[ $(cat crowd.out) == "answered 40" ]] || fail "the 40 connections of uid 65534 were not each refused at once: $(cat crowd.out)"
wait $wlpid
ctl --db db flush
report_json r.json -i db --symbols --image "$(basename "$wl")"
check_split func r.json wl.out work_a work_b work_c
ctl --db db status
refused=$(status_val control | sed -n 's/.* \([0-9]*\) refused.*/\1/p')
((refused >= 41)) || fail "status counts $refused refused connections, expected 41 or more: $(status_val control)"
note "40 connections of uid 65534 refused at once while the owner was served and sampling went on: $(status_val control)"
# the daemon makes its directory private again when it starts
stop_daemon "$DAEMON_PID"
start_daemon db --flush-interval 1h
[[ $(stat -c %a db) == 700 ]] || fail "a restarted daemon left its directory mode $(stat -c %a db)"
note "peer credentials: uid 65534 refused; the owner served"
