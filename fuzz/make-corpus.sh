#!/usr/bin/env bash
# Regenerates the seed corpora fuzz/corpus/TARGET/ from real recordings made
# with tally itself on the workloads of tests/workloads (docs/fuzzing.md):
# databases (plain, per-pid with stacks, two events, DWARF stacks, JIT code)
# and archives of them (their MANIFESTs, and tarballs), a daemon's epochs and drains (bundles), jitdumps written by jitwork (good
# and damaged), a 'tally scan' map, the control protocol's requests and the
# daemon's real replies, and the value forms the docs give. Each target's seeds
# are then minimized with libFuzzer's -merge=1 (only inputs that add coverage
# stay). Needs root (perf_event_open, the daemon) and both builds:
#
#   fuzz/make-corpus.sh [BUILD [FUZZ_BUILD]]     (default: build build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
FUZZ_BUILD=${2:-build-fuzz}
TALLY=$PWD/$BUILD/tally
WL=$PWD/$BUILD/tests/workloads
[ -x "$TALLY" ] || { echo "make-corpus: no '$TALLY' (run 'make' first)" >&2; exit 1; }
[ -x "$FUZZ_BUILD/fuzz/fuzz-bundle" ] || { echo "make-corpus: no fuzz targets in '$FUZZ_BUILD' (run 'make fuzz' first)" >&2; exit 1; }

W=$(mktemp -d "${TMPDIR:-/tmp}/tally-corpus.XXXXXX")
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
RAW=$W/raw
mkdir -p "$RAW"
cd "$W"

seed() { # seed TARGET NAME < data
	mkdir -p "$RAW/$1"
	cat >"$RAW/$1/$2"
}
seedf() { # seedf TARGET FILE...
	mkdir -p "$RAW/$1"
	local f
	for f in "${@:2}"; do
		[ -f "$f" ] && cp "$f" "$RAW/$1/$(echo "$f" | tr '/' '_')"
	done
	return 0
}

# ---- databases ----
echo "make-corpus: recording"
"$TALLY" record -o plain.db -- "$WL/split_funcs" 200 >/dev/null
"$TALLY" record -o stacks.db -g --per-pid -F 1999 -- "$WL/callsplit_fp" 200 >/dev/null
"$TALLY" record -o forker.db --per-pid -- "$WL/forker" >/dev/null
"$TALLY" record -o events.db -e cpu-clock,page-faults -- "$WL/split_images" 200 >/dev/null
"$TALLY" record -o dwarf.db --call-graph dwarf,4096 -- "$WL/callsplit_nofp" 200 >/dev/null
mkdir -p jitdir
"$TALLY" record -o jit.db -g -- "$WL/jitwork" 300 "$PWD/jitdir" >/dev/null
"$TALLY" record -o kernel.db -- "$WL/split_kernel" 200 >/dev/null
dbs=(plain.db stacks.db forker.db events.db dwarf.db jit.db kernel.db)

for d in "${dbs[@]}"; do
	seedf db-session "$d/session"
	seedf db-images "$d/images"
	seedf db-prof "$d"/*.prof
	seedf db-stacks "$d/stacks"
	seedf db-ksyms "$d/kernel.syms"
	seedf db-tasks "$d/tasks"
	seedf db-modules "$d/modules"
	seedf db-mntns "$d/mntns"
	seedf jitcopy "$d"/jit/jitdump-*.txt
	seedf perfmap "$d"/jit/perf-*.map
done
# archives of some of them: their MANIFEST
"$TALLY" archive -i plain.db -o plain.arch >/dev/null 2>&1 && seedf manifest plain.arch/MANIFEST
"$TALLY" archive -i kernel.db -o kernel.arch --no-debug >/dev/null 2>&1 && seedf manifest kernel.arch/MANIFEST
"$TALLY" archive -i jit.db -o jit.arch >/dev/null 2>&1 && seedf manifest jit.arch/MANIFEST
# archives as tarballs (fuzz/archive.c): the database alone (its program gone),
# with the program, compressed, made by hand from a directory (the MANIFEST
# last), with a sparse member
cp "$WL/split_funcs" gone && "$TALLY" record -o gone.db -- ./gone 100 >/dev/null && rm gone
for a in gone.tar gone.tar.gz gone.tar.zst gone.dir; do "$TALLY" archive -i gone.db -o "$a" >/dev/null 2>&1; done
"$TALLY" archive -i plain.db -x --no-debug -o plain.tar.gz >/dev/null 2>&1
tar cf hand.tar -C gone.dir db MANIFEST
cp -r gone.dir sparse.dir && truncate -s 1M sparse.dir/db/sparse && printf x >>sparse.dir/db/sparse
tar --sparse --format=pax -cf sparse.tar -C sparse.dir db MANIFEST
seedf archive gone.tar gone.tar.gz gone.tar.zst plain.tar.gz hand.tar sparse.tar
# no recording here runs inside another mount namespace: the form of the file
printf '0\n' | seed db-mntns one
printf '1\n3\n' | seed db-mntns two

# ---- jitdumps: what jitwork writes, good and damaged ----
for mode in ok truncated badmagic badversion; do
	mkdir -p "jd-$mode"
	"$WL/jitwork" 50 "$PWD/jd-$mode" "$mode" >/dev/null 2>&1 || true
	seedf jitdump "jd-$mode"/jit-*.dump
done

# ---- a daemon: epochs, drains (bundles) and its replies ----
echo "make-corpus: a daemon"
# the daemon samples the whole machine: a low rate keeps its drains small
"$TALLY" daemon --db daemon.db --flush-interval 1h -F 49 --per-pid -g >/dev/null
daemon_pid=$(cat daemon.db/daemon.pid)
"$WL/jitwork" 300 "$PWD/jitdir" >/dev/null
"$WL/split_funcs" 100 >/dev/null
"$TALLY" ctl --db daemon.db peek -o peek1.bundle
"$TALLY" ctl --db daemon.db drain -o drain1.bundle
"$TALLY" ctl --db daemon.db epoch >/dev/null
"$WL/split_images" 100 >/dev/null
"$TALLY" ctl --db daemon.db drain -o drain2.bundle
"$TALLY" ctl --db daemon.db epoch >/dev/null
"$TALLY" ctl --db daemon.db status >status.txt
"$TALLY" ctl --db daemon.db cpus 0 on freq 199 >cpus.txt
"$TALLY" ctl --db daemon.db cpus 99999 on >cpus-bad.txt 2>&1 || true
"$TALLY" ctl --db daemon.db bogus >bogus.txt 2>&1 || true
"$TALLY" ctl --db daemon.db flush >/dev/null
kill "$daemon_pid"
while kill -0 "$daemon_pid" 2>/dev/null; do sleep 0.1; done
daemon_pid=
"$TALLY" daemon --db daemon2.db --flush-interval 1h -F 49 -e cpu-clock,page-faults >/dev/null
daemon_pid=$(cat daemon2.db/daemon.pid)
"$WL/touchmem" 100 >/dev/null 2>&1 || "$WL/split_funcs" 100 >/dev/null
"$TALLY" ctl --db daemon2.db drain -o drain3.bundle
kill "$daemon_pid"
while kill -0 "$daemon_pid" 2>/dev/null; do sleep 0.1; done
daemon_pid=
seedf bundle drain1.bundle drain2.bundle drain3.bundle
for e in daemon.db/2*/; do
	seedf db-session "$e/session"
done
# the epoch list: the daemon's own epochs, with their sessions' times
{
	for e in daemon.db/2*/; do
		n=$(basename "$e")
		s=$(sed -n 's/^start-time: //p' "$e/session")
		t=$(sed -n 's/^stop-time: //p' "$e/session")
		printf '%s\t%s\t%s\n' "$n" "$s" "$t"
	done
} | seed epochs daemon
printf '202611211307\n202611211307-2\n202611211308-10\n' | seed epochs names
# replies: the daemon's own answers, framed as it frames them
frame() { printf '%s %d\n' "$1" "$(wc -c <"$2")"; cat "$2"; }
frame ok status.txt | seed ctl-reply status
frame ok cpus.txt | seed ctl-reply cpus
frame error cpus-bad.txt | seed ctl-reply cpus-bad
frame error bogus.txt | seed ctl-reply bogus
frame ok drain3.bundle | seed ctl-reply drain
printf 'ok 0\n' | seed ctl-reply empty
# requests: every command of the protocol (TALLY_CTL_USAGE), first byte = CPUs - 1
for r in start stop clear startclr flush epoch status drain 'cpus 0 off' 'cpus all on' 'cpus 0-1 on freq 99' \
	'cpus 1,3 on period 1000000' 'cpus 2-3 off'; do
	printf '\003%s' "$r" | seed ctl-request "$(echo "$r" | tr ' ,' '__')"
done

# ---- tally scan's map ----
"$TALLY" scan -o scan.map "$WL" >/dev/null 2>&1
seedf mapfile scan.map

# ---- values: the forms docs/cli.md gives, one parser each (fuzz/values.c) ----
v() { printf "\\$(printf '%03o' "$1")%s" "$2" | seed values "$1-$(echo "$2" | tr -c 'a-zA-Z0-9.-' '_')"; }
v 0 999; v 8 4000; v 16 16384; v 24 1000000
for d in 1.5 30s 5m 2h 1d 200ms; do v 1 "$d"; done
for s in 512k 64M 2G 1TiB 128MB 4096; do v 2 "$s"; done
v 3 0; v 11 0,2-3; v 251 all; v 19 1-2,5
v 4 1234; v 4 12,34,56
for t in 2h 202611211307 2026-11-21 2026-11-21T13:07 '2026-11-21 13:07:30Z'; do v 5 "$t"; done
v 6 202611211307; v 6 202611211307-2
v 7 "$(printf '2026-11-21\t2026-11-22T00:00')"; v 7 30m
# sampling options (fuzz/sampling.c: one 'OPT VALUE' per line)
printf 'e cpu-clock\nF 999\n' | seed sampling freq
printf 'e cpu-clock,page-faults,task-clock\nc 100000\nC 0\np\n' | seed sampling events
printf 'G dwarf,8192\nn\nC 0-1\n' | seed sampling dwarf
printf 'g\ne context-switches\nF 99\n' | seed sampling fp
"$TALLY" events 2>/dev/null | awk 'NR > 1 && $1 ~ /^[a-z]/ {print "e " $1}' | head -40 | seed sampling table
printf 'e cpu-clock\no\nm 1ms\nM bpf\n' | seed sampling offcpu
printf 'o\nM tracepoint\nm 2s\ng\n' | seed sampling offcpu-tracepoint
printf 'e cpu-clock,page-faults\nS bpf\nF 999\n' | seed sampling sample-bpf
printf 'S ring\ng\n' | seed sampling sample-ring

# ---- tally job control files (docs/job.md, fuzz/control.c) ----
printf '# a job\nprofilers add tally -F 999 -g\nprofilers add cmd '"'"'vmstat 1'"'"'\nrun sleeptest 1\nrun --iterations 3 --tag build -- make -j2\nprofilers only on\nrun --timeout 1m -- ./bench --quick\n' |
	seed control job
printf 'profilers add cmd a\nprofilers add cmd "b c"\nprofilers delete cmd\nprofilers only off\nrun -- printf %%s '"'"'$HOME'"'"' \\$x "q\\"d"\nrun -- x\nrun --tag=x -- y\n' |
	seed control quoting
printf 'run sleeptest 500ms\nrun sleeptest 0 # comment\nrun --iterations=2 --timeout=2 sleeptest 1\n' | seed control sleeptest

# ---- remote hosts: the probe's answer, an agent's requests (docs/remote.md) ----
{ uname -m; cat /proc/sys/kernel/random/boot_id; date +%s.%N; "$TALLY" --version | head -n 1; echo end; } | seed probe installed
{ uname -m; echo -; date +%s.%N; echo end; } | seed probe fresh
printf '\003start\tsleep\t1\t0,2' | seed agent-request start
printf '\000start\tT\t0\t-' | seed agent-request start-none
printf '\001status' | seed agent-request status
printf '\001clean\tsleep' | seed agent-request clean
printf '\002stop' | seed agent-request stop
printf '\002quit' | seed agent-request quit
# an agent's answers (fuzz/agent_answer.c: a byte for word and exit status, stdout, NUL, stderr)
printf '\001ready 4242 %s\n\0' "$(cat /proc/sys/kernel/random/boot_id)" | seed agent-answer ready
printf '\000ok\n\0' | seed agent-answer ok
printf '\000ok %s sleeptest\n\0' "$(cat /proc/sys/kernel/random/boot_id)" | seed agent-answer status
printf '\002\0tally: profiler '"'"'cmd'"'"' failed at start: command '"'"'x'"'"' not found in PATH\n' | seed agent-answer error
printf '\004\0tally: no agent answers at '"'"'/root/.cache/tally-profilers/0.1.0/agents/j/agent.sock'"'"' (Connection refused)\n' | seed agent-answer gone
printf '\006\0ssh: connect to host h1 port 22: Connection refused\n' | seed agent-answer unreachable
printf '\002error forged\nGOOD exit 0\n\033]0;x\007\0' | seed agent-answer forged

# ---- off-CPU: the sched_switch format, then switches (fuzz/offcpu.c) ----
offcpu_seed() { # offcpu_seed NAME FORMAT-FILE-OR-TEXT PREV_STATE_SIZE
	python3 - "$2" "$3" >"$RAW/offcpu/$1" <<'PY'
import os, struct, sys
fmt, size = sys.argv[1], int(sys.argv[2])
text = open(fmt, 'rb').read() if os.path.exists(fmt) else fmt.encode()
def sw(prev, state, nxt, op=0x14):
    raw = bytearray(60)
    struct.pack_into('<i', raw, 24, prev)
    struct.pack_into('<q' if size == 8 else '<i', raw, 32, state)
    struct.pack_into('<i', raw, 56, nxt)
    return bytes([op, len(raw)]) + bytes(raw)
def later(ns):
    return bytes([1, 4]) + struct.pack('<I', ns)
# a task blocks and comes back, two threads preempt each other, one exits while
# waiting, a wait under the 1 us minimum, a flush with one still pending
prog = bytes([1]) + sw(5, 1, 0) + later(50000) + sw(0, 0, 5) + sw(6, 0, 7) + later(9000) + sw(7, 1, 6) + \
    sw(8, 2, 0) + bytes([2, 1, 8]) + sw(9, 1, 0) + later(500) + sw(0, 0, 9) + sw(10, 0x100, 0, 0x38) + bytes([3, 0])
sys.stdout.buffer.write(text + b'\0' + prog)
PY
}
mkdir -p "$RAW/offcpu"
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	if [ -r $d/events/sched/sched_switch/format ]; then
		offcpu_seed kernel $d/events/sched/sched_switch/format 8
		break
	fi
done
# an older kernel's layout: prev_state an int
offcpu_seed int-state $'name: sched_switch\nID: 316\nformat:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:4;\tsigned:1;\n\tfield:char next_comm[16];\toffset:36;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n' 4

# ---- tally top --db: a daemon's answers to peek (fuzz/top_peek.c) ----
# the daemon's own, and the databases above as a peek would hold them; the
# paths and ids of the images (and the programs' paths) made ones no file
# has, so that each input is read and fed without loading a library's
# symbols (what the answer says is the input, not this machine's files)
as_peek() { # as_peek DB-DIR-OR-BUNDLE NAME
	python3 - "$1" >"$RAW/top-peek/$2" <<'PY'
import hashlib, os, re, sys
src = sys.argv[1]
files = {}
if os.path.isdir(src):
    for root, _, names in os.walk(src):
        for n in names:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, src)
            if rel.count("/") <= 1 and not n.startswith("."):
                files[rel] = open(p, "rb").read()
else:
    data = open(src, "rb").read()
    at = data.index(b"\n") + 1
    while not data.startswith(b"end: ", at):
        nl = data.index(b"\n", at)
        n, name = data[at + 6:nl].split(b" ", 1)
        files[name.decode()] = data[nl + 1:nl + 1 + int(n)]
        at = nl + 2 + int(n)
subst = {}
for line in files.get("images", b"").decode(errors="replace").splitlines():
    w = line.split("\t")
    if line.startswith("#") or len(w) < 7:
        continue
    if len(w[2]) >= 8 and w[2].strip("0"):
        subst[w[2]] = hashlib.sha1(w[2].encode()).hexdigest()[:len(w[2])]
    if w[6].startswith("/"):
        subst[w[6]] = "/nonexistent/tally-fuzz/" + os.path.basename(w[6])
for line in files.get("tasks", b"").decode(errors="replace").splitlines():
    w = line.split("\t")
    if not line.startswith("#") and len(w) >= 3 and w[2].startswith("/"):
        subst[w[2]] = "/nonexistent/tally-fuzz/" + os.path.basename(w[2])
def swap(b):
    for k in sorted(subst, key=len, reverse=True):
        b = b.replace(k.encode(), subst[k].encode())
    return b
out = {swap(n.encode()).decode(): swap(d) for n, d in files.items()}
if b"memory-since:" not in out["session"]:
    out["session"] = out["session"].rstrip(b"\n") + b"\nmemory-since: 1764000000.250000\n"
names = sorted(n for n in out if n != "session") + ["session"]
w = sys.stdout.buffer
w.write(b"tally-bundle: 1\n")
for n in names:
    w.write(b"file: %d %s\n" % (len(out[n]), n.encode()) + out[n] + b"\n")
w.write(b"end: %d files\n" % len(names))
PY
}
mkdir -p "$RAW/top-peek"
as_peek peek1.bundle daemon-pid-g
for d in plain.db stacks.db forker.db events.db kernel.db jit.db; do
	as_peek "$d" "${d%.db}"
done

# ---- minimized into fuzz/corpus ----
cd - >/dev/null
echo "make-corpus: minimizing"
for t in "$RAW"/*/; do
	t=$(basename "$t")
	out=fuzz/corpus/$t
	rm -rf "$out"
	mkdir -p "$out"
	"$FUZZ_BUILD/fuzz/fuzz-$t" -merge=1 -timeout=10 -rss_limit_mb=2048 "$out" "$RAW/$t" >"$W/merge-$t.log" 2>&1 ||
		{ echo "make-corpus: merging $t failed (a seed crashes it?): $W/merge-$t.log" >&2; tail -30 "$W/merge-$t.log" >&2; exit 1; }
	echo "  $t: $(ls "$RAW/$t" | wc -l) seeds, $(ls "$out" | wc -l) kept, $(du -sk "$out" | cut -f1) KiB"
done
