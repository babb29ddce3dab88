#!/bin/bash
# every control error: anything that is not a command gets the command list,
# a command with bad arguments its own usage, exit status non-zero; on the
# socket itself garbage, oversized requests, clients that hang or never read,
# more clients than slots (the silent one that waited longest makes room); a socket path that is a regular file; no daemon; a stale
# socket after kill -9.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

USAGE='usage: start\|stop\|clear\|startclr\|flush\|epoch\|status\|cpus\|drain'
ERE_USAGE='usage: start\|stop\|clear\|startclr\|flush\|epoch\|status\|cpus\|drain\|peek$'

# checked before anything is sent: no daemon needed
expect_fail_with "^tally: $ERE_USAGE" "$TALLY" ctl --db nodb
((LAST_RC == 2)) || fail "ctl without a command exited $LAST_RC, expected 2"
for bad in bogus STATUS "stat us" start-now ""; do
	expect_fail_with "^tally: $ERE_USAGE" "$TALLY" ctl --db nodb "$bad"
done
for cmd in start stop clear startclr flush epoch status; do
	expect_fail_with "^tally: usage: $cmd " "$TALLY" ctl --db nodb "$cmd" extra
done
expect_fail_with "^tally: usage: drain \[-o FILE\]$" "$TALLY" ctl --db nodb drain now
expect_fail_with "^tally: usage: drain \[-o FILE\]$" "$TALLY" ctl --db nodb drain -o
for args in "" "0" "0 maybe" "0 on freq" "0 on freq 0" "0 on speed 9" "0 on period x" "999 on" "0 on freq 99 extra"; do
	# shellcheck disable=SC2086
	expect_fail_with "^tally: usage: cpus LIST\|all on\|off \[freq HZ\|period N\]" "$TALLY" ctl --db nodb cpus $args
done
expect_fail_with "^tally: .*--timeout" "$TALLY" ctl --db nodb --timeout soon status
expect_fail_with "^tally: .*--bogus" "$TALLY" ctl --bogus status

# no daemon there, or not a socket
expect_fail_with "^tally: no daemon socket at 'nodb/ctl.sock'" "$TALLY" ctl --db nodb status
echo "not a socket" >plain
expect_fail_with "^tally: 'plain' is not a socket" "$TALLY" ctl --socket plain status
expect_fail_with "^tally: '.*plain' exists and is not a socket" "$TALLY" daemon --db refused --socket "$TMP/plain"
[[ $(cat plain) == "not a socket" ]] || fail "the refused daemon changed the file at its --socket path"
[[ ! -e refused ]] || fail "the refused daemon left its database directory behind: $(ls -a refused)"

# the daemon's own checks: -C 0 only, and the kernel's rate cap
start_daemon db -C 0 --ctl-timeout 300ms --flush-interval 1h
expect_fail_with "^tally: usage: cpus .*CPU 1 is not sampled by this daemon" "$TALLY" ctl --db db cpus 1 on
((LAST_RC == 1)) || fail "a refusal by the daemon exited $LAST_RC, expected 1"
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
if ((max < 1000000)); then
	expect_fail_with "^tally: usage: cpus .*perf_event_max_sample_rate" "$TALLY" ctl --db db cpus 0 on freq $((max + 1))
fi

# raw requests on the socket: what the client would never send
cat >raw.py <<'EOF'
import socket, sys, time
path, mode = sys.argv[1], sys.argv[2]

def call(data, read=True, timeout=10, eof=False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    if data:
        try:
            s.sendall(data)
        except OSError:
            pass
    if eof:
        s.shutdown(socket.SHUT_WR)
    out = b""
    if read:
        while True:
            try:
                b = s.recv(65536)
            except OSError:
                break
            if not b:
                break
            out += b
    s.close()
    return out

def reply(data, eof=False):
    out = call(data, eof=eof)
    head, _, body = out.partition(b"\n")
    return head.decode(errors="replace"), body.decode(errors="replace")

if mode == "send":
    head, body = reply(sys.argv[3].encode().decode("unicode_escape").encode("latin-1"))
    print(head.split()[0] if head else "EOF", body.replace("\n", " | "))
elif mode == "big":
    head, body = reply(b"s" * 5000 + b"\n")
    print(head.split()[0], body)
elif mode == "noeol":
    head, body = reply(b"status", eof=True)
    print(head.split()[0] if head else "EOF", body.splitlines()[0] if body else "")
elif mode == "hang":
    # one connects and says nothing, one sends half a line, one asks for a
    # status and never reads it: meanwhile another client is served at once,
    # and the silent ones are dropped after --ctl-timeout
    quiet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); quiet.connect(path)
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); half.connect(path); half.sendall(b"sta")
    deaf = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); deaf.connect(path); deaf.sendall(b"status\n")
    head, body = reply(b"status\n")
    print("served", head.split()[0])
    for name, s in (("quiet", quiet), ("half", half)):
        s.settimeout(20)
        try:
            got = s.recv(100)
        except OSError as e:
            got = repr(e).encode()
        print(name, "closed" if got == b"" else "got " + got.decode(errors="replace"))
elif mode == "crowd":
    # 16 connections that say nothing hold every slot: a 17th is served all
    # the same, and the one that waited longest is told busy and closed
    conns = []
    for i in range(16):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); conns.append(s)
    time.sleep(0.05)
    head, body = reply(b"status\n")
    print("served", head.split()[0] if head else "EOF", body.splitlines()[0] if body else "")
    first = conns[0]
    first.settimeout(5)
    got = b""
    try:
        while True:
            b = first.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    print("oldest", got.decode(errors="replace").replace("\n", " | "))
EOF
raw() { python3 raw.py db/ctl.sock "$@"; }

out=$(raw send 'bogus\n')
[[ $out == "error usage: start|stop|clear|startclr|flush|epoch|status|cpus|drain|peek" ]] || fail "raw 'bogus': $out"
out=$(raw send '\x00\x01\x02\xff\xfe garbage\n')
[[ $out == "error usage: start|stop|clear|startclr|flush|epoch|status|cpus|drain|peek" ]] || fail "raw binary garbage: $out"
out=$(raw send 'status\x00status\n')
[[ $out == error* ]] || fail "a request with a NUL byte was served: $out"
out=$(raw send 'cpus 0\n')
[[ $out == "error usage: cpus LIST|all on|off [freq HZ|period N]"* ]] || fail "raw 'cpus 0': $out"
out=$(raw send 'flush now\n')
[[ $out == "error usage: flush"* ]] || fail "raw 'flush now': $out"
out=$(raw big)
[[ $out == "error request longer than 4096 bytes"* ]] || fail "a 5000-byte request: $out"
out=$(raw noeol)
[[ $out == "ok state: running" ]] || fail "a request ended by closing the connection instead of a newline: $out"
note "raw requests: garbage, NUL bytes, bad arguments and oversized requests are refused"

out=$(raw hang)
grep -q '^served ok$' <<<"$out" || fail "a client was not served while others hung: $out"
grep -q '^quiet closed$' <<<"$out" || fail "a silent client was not dropped: $out"
grep -q '^half closed$' <<<"$out" || fail "a client that sent half a request was not dropped: $out"
note "hanging clients: $(tr '\n' ';' <<<"$out")"

out=$(raw crowd)
grep -q '^served ok state: running$' <<<"$out" || fail "a 17th client was not served while 16 silent ones held the slots: $out"
grep -q '^oldest error .*| busy' <<<"$out" || fail "the silent client that waited longest was not told busy: $out"
note "crowd: $(tr '\n' ';' <<<"$out")"
ctl --db db status
[[ $(status_val state) == running ]] || fail "the daemon is not running after the raw requests"
grep -q "refused a request of over 4096 bytes" db/daemon.log || fail "the log does not record the oversized request"

# kill -9 leaves a stale socket: the client says no daemon listens, a new daemon takes over
kill -KILL "$DAEMON_PID"
for ((i = 0; i < 100; i++)); do alive "$DAEMON_PID" || break; sleep 0.05; done
[[ -S db/ctl.sock ]] || fail "no stale socket after kill -9 (this test expects one)"
expect_fail_with "^tally: no daemon listens on 'db/ctl.sock'" "$TALLY" ctl --db db status
start_daemon db --flush-interval 1h
ctl --db db status
[[ $(status_val pid) == "$DAEMON_PID" ]] || fail "the new daemon does not answer on the old socket path"
