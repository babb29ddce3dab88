# Helpers for tally top's end-to-end tests (t13xx), sourced after lib.sh.

# top_shares FILE NAME...: from the last whole snapshot of tally top's text
# output in FILE (of those with at least half the samples of the fullest),
# the share of each function NAME among the NAMEs (so that kernel and libc
# rows do not count), one `NAME SHARE SAMPLES` line each.
# With --total the first column (inclusive with -g) is taken as is, not
# renormalized.
TOP_SHARES_PY='
import sys
args = sys.argv[1:]
raw = args[0] == "--total"
if raw:
    args = args[1:]
path, names = args[0], args[1:]
snaps, cur = [], None
for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("# tally top:"):
        cur = {"rows": [], "header": line}
        snaps.append(cur)
        continue
    if cur is None or not line.strip() or line.lstrip().startswith("share"):
        continue
    w = line.split()
    if not w[0].endswith("%"):
        continue  # the workload'"'"'s own lines, interleaved
    # share, [self share,] value, image, command, then the name, which may
    # hold blanks (a kernel or C++ function): counted from the left
    i = 2 if len(w) > 1 and w[1].endswith("%") else 1
    cur["rows"].append((float(w[0].rstrip("%")), float(w[i]), " ".join(w[i + 3:])))
snaps = [s for s in snaps if s["rows"]]
if not snaps:
    sys.exit("no snapshot with rows in " + path)
# the last snapshot that holds at least half as many samples of the NAMEs as
# the fullest: the window the command ended in can hold a few samples only
def mass(s):
    return sum(x[1] for x in s["rows"] if x[2] in names)
top = max(mass(s) for s in snaps)
rows = [s for s in snaps if mass(s) >= top / 2][-1]["rows"]
got = {}
for share, samples, name in rows:
    if name in names:
        s = got.setdefault(name, [0.0, 0.0])
        s[0] += share
        s[1] += samples
tot = sum(v[0] for v in got.values())
for n in names:
    v = got.get(n, [0.0, 0.0])
    print(n, "%.2f" % (v[0] if raw else (100 * v[0] / tot if tot else 0)), "%.1f" % v[1])
'
top_shares() {
	python3 -c "$TOP_SHARES_PY" "$@"
}

# top_check FILE TRUTHFILE TOL NAME...: the last snapshot's split of the NAMEs
# is the workload's measured split within TOL points.
top_check() {
	local file=$1 truthfile=$2 tol=$3 name share samples
	shift 3
	local shares
	shares=$(top_shares "$file" "$@") || fail "cannot read tally top's snapshots: $shares"
	while read -r name share samples; do
		near "$share" "$(truth "$name" "$truthfile")" "$tol" "tally top: $name ($samples samples in the window)"
	done <<<"$shares"
}

# snapshots FILE: how many snapshots FILE holds.
snapshots() {
	grep -c '^# tally top:' "$1" || true
}

# churn_build N: N distinct programs $TMP/ch_01..ch_N (one source, each copy
# with a build-id of its own: N images to the recording and to the
# resolver), and $TMP/churn-start.sh, which starts them (churn_start).
# Each program runs 64 functions f0..f63 in turn, SLICE seconds of wall
# time each, for LIFE seconds or until its parent is gone: one that runs for
# a while keeps bringing functions not yet named in an image seen long ago.
churn_build() {
	local n=$1 i
	need_tool cc gcc
	{
		cat <<'EOC'
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static volatile unsigned long sink;
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
EOC
		for i in $(seq 0 63); do
			echo "__attribute__((noinline)) void f$i(double until);"
			echo "__attribute__((noinline)) void f$i(double until) { unsigned long x = $i; do for (int i = 0; i < 5000; i++) x = x * 6364136223846793005u + 1442695040888963407u; while (now() < until); sink += x; }"
		done
		echo 'static void (*const fns[])(double) = {'
		for i in $(seq 0 63); do echo "f$i,"; done
		cat <<'EOC'
};
int main(int argc, char **argv)
{
	double life = argc > 1 ? atof(argv[1]) : 60, slice = argc > 2 ? atof(argv[2]) : 0.03;
	pid_t parent = getppid();
	double t0 = now();
	for (unsigned k = 0; now() - t0 < life && getppid() == parent; k++)
		fns[k % 64](now() + slice);
	return 0;
}
EOC
	} >"$TMP/churn.c"
	cc -O1 -fno-omit-frame-pointer -Wl,--build-id=sha1 -o "$TMP/churn" "$TMP/churn.c" 2>"$TMP/cc.err" ||
		fail "cc churn.c: $(head -c 1000 "$TMP/cc.err")"
	# the copies: the build-id note's 20 bytes made each copy's own
	python3 - "$TMP/churn" "$n" <<'EOP' || fail "cannot make the copies of churn"
import hashlib, os, sys
src, n = sys.argv[1], int(sys.argv[2])
data = open(src, "rb").read()
note = b"\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00"
at = data.find(note)
if at < 0 or data.find(note, at + 1) >= 0:
    sys.exit("churn: no single GNU build-id note of 20 bytes")
at += len(note)
for i in range(1, n + 1):
    dst = os.path.join(os.path.dirname(src), "ch_%02d" % i)
    bid = hashlib.sha1(b"churn %d" % i).digest()
    open(dst, "wb").write(data[:at] + bid + data[at + 20:])
    os.chmod(dst, 0o755)
EOP
	cat >"$TMP/churn-start.sh" <<'EOS'
#!/bin/bash
# churn-start.sh N SEEN: starts $TMP/ch_01..ch_N, one every 50 ms (each
# running for 120 s at most, and no longer than this script), and then
# waits for the view to go on for a while; its log is churn.log.
# SEEN: none (start them and wait for the end), text FILE (not before tally
# top's snapshots in FILE showed the last one started: then each comes in a
# tick of its own), tmux SOCKET (the same on the screen of tmux -L SOCKET).
# Ends when tally top (its parent) is gone.
set -u
cd "$(dirname "$0")"
n=$1 mode=$2 arg=${3:-}
top=$PPID
pids=()
log() { echo "$(date +%T.%N) $*" >>churn.log; }
finish() {
	kill "${pids[@]}" 2>/dev/null
	wait
	log "end: $1"
	exit "$1"
}
screen() {
	case $mode in
	text) cat "$arg" ;;
	tmux) tmux -L "$arg" capture-pane -p ;;
	esac
}
seen() {
	case $mode in
	text) grep -Eq "[[:space:]]$1[[:space:]]" "$arg" ;;
	tmux) screen | grep -Eq " $1\$" ;;
	esac
}
# the samples the view counted, from its top line
counted() {
	screen | grep -E '(^# )?tally top:' | tail -1 | sed -nE 's/.* ([0-9]+) samples,.*/\1/p'
}
for ((i = 1; i <= n; i++)); do
	name=$(printf 'ch_%02d' "$i")
	# (niced: tally top, which has a tick to make for each, goes before
	# them, while they still get the CPU on a busy machine)
	nice -n 10 ./"$name" 120 0.03 </dev/null >/dev/null 2>&1 &
	pids+=($!)
	log "started $name (pid $!)"
	sleep 0.05
	[[ $mode == none ]] && continue
	for ((w = 0; w < 1200; w++)); do
		seen "$name" && break
		[[ -d /proc/$top ]] || finish 3
		sleep 0.05
	done
	seen "$name" || { log "$name was never shown"; finish 4; }
	log "$name shown"
done
if [[ $mode == none ]]; then
	for ((w = 0; w < 2400; w++)); do
		[[ -d /proc/$top ]] || break
		sleep 0.05
	done
	finish 0
fi
# the view goes on with all of them running: the programs seen first run
# functions not named yet
c0=$(counted)
for ((w = 0; w < 1200; w++)); do
	c=$(counted)
	[[ -n $c && -n $c0 ]] && ((c >= c0 + 1000)) && break
	[[ -d /proc/$top ]] || finish 3
	sleep 0.05
done
log "samples counted: ${c0:-?} when the last was shown, ${c:-?} now"
finish 0
EOS
	chmod +x "$TMP/churn-start.sh"
}
