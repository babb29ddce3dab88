#!/bin/bash
# faults a daemon must survive on its control socket while it samples: 1 MB
# requests, thousands of idle connections, twenty clients that send half a
# request and stall again whenever they are dropped. Under each the owner's
# `tally ctl` is answered every time, the daemon holds at most its 16 control
# connections, and sampling goes on: a workload run meanwhile shows its split
# and its -F rate afterwards. (t0803 has the protocol errors, t0810 the users
# who are not the owner.)
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

F=1000
start_daemon db --flush-interval 1h -F $F
# the daemon's sockets: what a connection costs it (its own files, opened
# and closed as it writes the database, are not the clients')
# (find exits 1 when a descriptor closes while it reads the list: under
# pipefail that ended the test, silently, in one run of five)
fds() { { find "/proc/$DAEMON_PID/fd" -mindepth 1 -maxdepth 1 -lname 'socket:*' 2>/dev/null || true; } | wc -l; }
base_fds=$(fds)

cat >abuse.py <<'EOF'
import os, resource, selectors, socket, sys, threading, time
path, mode = sys.argv[1], sys.argv[2]

def conn(timeout=10):
    # the daemon's backlog full: a Unix socket's connect says EAGAIN, try again
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    end = time.time() + timeout
    while True:
        try:
            s.connect(path)
            break
        except BlockingIOError:
            if time.time() > end:
                raise
            time.sleep(0.001)
    s.settimeout(timeout)
    return s

if mode == "big":
    # a 1 MB request, n times: the daemon reads 4096 bytes, answers, closes
    n, secs = int(sys.argv[3]), float(sys.argv[4])
    end = time.time() + secs
    answers = {}
    i = 0
    while i < n or time.time() < end:
        i += 1
        time.sleep(0.05)
        s = conn()
        def push(s=s):
            try:
                s.sendall(b"s" * (1 << 20))
            except OSError:
                pass
        t = threading.Thread(target=push)
        t.start()
        got = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except OSError:
            pass
        t.join()
        s.close()
        head = got.split(b"\n", 2)
        key = (head[1].decode(errors="replace")[:40] if len(head) > 1 else "EOF")
        answers[key] = answers.get(key, 0) + 1
    for k, v in answers.items():
        print("answer %d %s" % (v, k))
elif mode == "idle":
    # n connections that never send anything, all held open for secs
    n, secs, ready = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, n + 256)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    conns = []
    t0 = time.time()
    for i in range(n):
        conns.append(conn())
    open(ready, "w").write("%.2f\n" % (time.time() - t0))
    time.sleep(secs)
    still = 0
    for s in conns:
        s.setblocking(False)
        try:
            b = s.recv(256)
            if not b:
                continue
            # an answer (busy) before the end
            continue
        except BlockingIOError:
            still += 1
        except OSError:
            continue
    print("opened %d in %.2f s; still open %d" % (n, time.time() - t0 - secs, still))
elif mode == "stall":
    # k clients that send half a request and stall; dropped or evicted, each
    # connects and stalls again at once, for secs (ready: written once the k
    # first ones stall)
    k, secs, ready = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    sel = selectors.DefaultSelector()
    def stall():
        try:
            s = conn()
            s.sendall(b"sta")
        except OSError:
            return 1  # told busy and closed before it could stall: again
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        return 0
    missing = sum(stall() for i in range(k))
    open(ready, "w").write("%d stalling\n" % (k - missing))
    again = 0
    end = time.time() + secs
    while time.time() < end:
        for key, _ in sel.select(timeout=0.005 if missing else 0.1):
            s = key.fileobj
            try:
                b = s.recv(4096)
            except OSError:
                b = b""
            if b:
                continue  # its answer (busy); the end follows
            sel.unregister(s)
            s.close()
            again += 1
            missing += 1
        missing = sum(stall() for i in range(missing))
    print("stallers %d reconnected %d" % (k, again))
EOF

# owner_loop SECONDS OUT: the owner's `ctl status` every 0.2 s for SECONDS;
# each line of OUT: exit status and seconds taken
owner_loop() {
	local end rc t0 t1
	end=$(($(date +%s) + $1))
	: >"$2"
	while (($(date +%s) < end)); do
		t0=$(date +%s.%N)
		rc=0
		"$TALLY" ctl --db db --timeout 5 status >/dev/null 2>>"$2.err" || rc=$?
		t1=$(date +%s.%N)
		echo "$rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >>"$2"
		sleep 0.2
	done
}

# check_owner OUT WHAT: every call of owner_loop succeeded
check_owner() {
	local n bad slow
	n=$(wc -l <"$1")
	((n >= 3)) || fail "$2: the owner's ctl ran only $n times"
	bad=$(awk '$1 != 0' "$1" | wc -l)
	((bad == 0)) || fail "$2: $bad of $n of the owner's 'ctl status' failed: $(sort -u "$1.err" | head -3)"
	slow=$(awk '{ if ($2 > m) m = $2 } END { print m }' "$1")
	note "$2: the owner's 'ctl status' answered $n of $n times (slowest ${slow} s)"
}

# sampled NAME WLOUT WHAT: the workload copy NAME, run meanwhile, has its
# split and about F samples per CPU second in the database
sampled() {
	local cpu_ms total expect
	ctl --db db flush
	report_json "$1.json" -i db --symbols --image "$1"
	check_split func "$1.json" "$2" work_a work_b work_c
	cpu_ms=$(info_val cpu_ms "$2")
	total=$(tjson "$1.json" image "$1")
	expect=$(awk -v f=$F -v ms="$cpu_ms" 'BEGIN { printf "%d", f * ms / 1000 }')
	between "$total" "$(awk -v e="$expect" 'BEGIN { print 0.8 * e }')" "$(awk -v e="$expect" 'BEGIN { print 1.2 * e + 20 }')" ||
		fail "$3: the workload's ${cpu_ms} ms of CPU gave $total samples at -F $F, expected about $expect"
	note "$3: sampling went on: $total samples for ${cpu_ms} ms of CPU (expected ~$expect)"
}

workload() {
	local wl
	wl=$(uniq_copy split_funcs)
	mv "$wl" "$wl$1"
	echo "$wl$1"
}

# 1. 1 MB requests
wl=$(workload _big)
"$wl" 1500 >big.wl &
wlpid=$!
track_pid $wlpid
python3 abuse.py db/ctl.sock big 10 4 >big.out &
ab=$!
track_pid $ab
owner_loop 4 big.owner
wait $ab || fail "the 1 MB requests' client failed: $(cat big.out)"
wait $wlpid
grep -Eq '^answer [0-9]+ request longer than 4096 bytes' big.out || fail "a 1 MB request got: $(cat big.out)"
grep -v 'request longer than 4096 bytes' big.out | grep answer >/dev/null && fail "a 1 MB request got another answer: $(cat big.out)"
check_owner big.owner "1 MB requests"
note "1 MB requests: $(tr '\n' ';' <big.out)"
sampled "$(basename "$wl")" big.wl "1 MB requests"

# 2. thousands of idle connections: at most 16 held, the rest closed; the
# owner asks while they connect
wl=$(workload _idle)
"$wl" 1500 >idle.wl &
wlpid=$!
track_pid $wlpid
python3 abuse.py db/ctl.sock idle 2000 3 idle.ready >idle.out &
ab=$!
track_pid $ab
owner_loop 3 idle.owner &
ol=$!
max_fds=0
for ((i = 0; i < 30; i++)); do
	n=$(fds)
	((n > max_fds)) && max_fds=$n
	sleep 0.1
done
wait $ol
wait_for_line idle.ready . 60
wait $ab || fail "the idle connections' client failed: $(cat idle.out)"
wait $wlpid
still=$(sed -n 's/.*still open \([0-9]*\).*/\1/p' idle.out)
[[ -n $still ]] || fail "the idle client said: $(cat idle.out)"
((still <= 16)) || fail "$still of 2000 idle connections were still open after 3 s: the daemon holds more than its 16"
((max_fds <= base_fds + 17)) || fail "the daemon had $max_fds sockets open under 2000 idle connections ($base_fds before)"
check_owner idle.owner "2000 idle connections"
note "2000 idle connections: $(cat idle.out); the daemon's sockets: $base_fds before, at most $max_fds"
sampled "$(basename "$wl")" idle.wl "2000 idle connections"

# 3. twenty clients that send half a request and stall again
wl=$(workload _stall)
"$wl" 1500 >stall.wl &
wlpid=$!
track_pid $wlpid
python3 abuse.py db/ctl.sock stall 20 6 stall.ready >stall.out &
ab=$!
track_pid $ab
wait_for_line stall.ready . 60
owner_loop 4 stall.owner
wait $ab || fail "the stalling clients failed: $(cat stall.out)"
wait $wlpid
check_owner stall.owner "20 stalling clients"
ctl --db db status
evicted=$(status_val control | sed -n 's/.* \([0-9]*\) evicted.*/\1/p')
((evicted > 0)) || fail "status does not count the evicted stallers: $(status_val control)"
note "20 stalling clients: $(cat stall.out); control: $(status_val control)"
sampled "$(basename "$wl")" stall.wl "20 stalling clients"

ctl --db db status
[[ $(status_val writing) == ok ]] || fail "writing: $(status_val writing)"
stop_daemon "$DAEMON_PID"
grep -q "stopped (" db/daemon.log || fail "the daemon did not stop cleanly: $(tail -3 db/daemon.log)"
