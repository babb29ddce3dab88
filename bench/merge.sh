#!/usr/bin/env bash
# bench/merge.sh [BUILD_DIR] [--from DB] [--record SECONDS] [--inputs N] [--hosts H] [--runs R]
#
# tally merge of N databases like one recorded profile: the time and the peak
# memory (/usr/bin/time -v: elapsed, maximum resident set) of merging them,
# the median of R runs, for three label choices: the default (a label set per
# input: host and run), --label run= (one per host), --label host= --label run=
# (no labels: everything summed; also with N/10 and N/2 inputs, to show that
# memory follows the distinct stacks, not the number of inputs).
#
# The inputs are variants of one database (--from DB, or a system-wide
# recording of SECONDS, default 60, with call graphs at 999 Hz): variant k
# keeps each stack with probability 0.8 and scales its count by a factor
# from 0.5 to 1.5 (seeded by k), so runs differ as real runs do but stay of
# the same size; host is host(k mod H). docs/performance.md ("Merging") gives
# the figures and how they were taken.
#
#   BUILD_DIR        where tally was built (default: build)
#   --from DB        the profile to vary (default: record one)
#   --record S       seconds of the recording (default 60)
#   --inputs N       databases merged (default 100)
#   --hosts H        distinct hosts among them (default 4)
#   --runs R         runs per configuration (default 3)
#   --keep           keep the temporary directory
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=build from= record=60 inputs=100 hosts=4 runs=3 keep=0 build_set=0
usage() { bench_help >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--from) [ $# -ge 2 ] || usage; from=$2; shift 2 ;;
	--record) [ $# -ge 2 ] || usage; record=$2; shift 2 ;;
	--inputs) [ $# -ge 2 ] || usage; inputs=$2; shift 2 ;;
	--hosts) [ $# -ge 2 ] || usage; hosts=$2; shift 2 ;;
	--runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	-*) echo "bench: unknown option '$1'" >&2; usage ;;
	*) [ $build_set = 0 ] || usage; build=$1; build_set=1; shift ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (Debian package time)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-mergebench.XXXXXX)
if [ $keep = 0 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "bench: keeping $tmp" >&2; fi

if [ -z "$from" ]; then
	echo "bench: recording the whole system for ${record}s (-a -g -F 999)" >&2
	"$tally" record -a -g -F 999 --duration "$record" -o "$tmp/one.db" >&2
	from=$tmp/one.db
fi
echo "bench: $inputs variants of $from" >&2
python3 - "$from" "$tmp/in" "$inputs" "$hosts" <<'EOF'
import os, random, re, shutil, sys
src, out, n, hosts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out)
sess = open(os.path.join(src, "session")).read()
if not re.search(r"^call-graph: (fp|dwarf)$", sess, re.M) or re.search(r"^events: .*,", sess, re.M):
    sys.exit("bench: %s: one event with call graphs wanted" % src)
stacks = [l for l in open(os.path.join(src, "stacks")) if not l.startswith("#")]
v3 = re.search(r"^format-version: 3$", sess, re.M) is not None
profs = {}
for f in os.listdir(src):
    if f.endswith(".prof"):
        head = open(os.path.join(src, f)).read().split("\n\n", 1)[0]
        idx = re.search(r"^index: (\d+)$", head, re.M).group(1)
        pid = re.search(r"^pid: (\d+)$", head, re.M)
        lab = re.search(r"^label: (\d+)$", head, re.M)
        profs[(idx, pid.group(1) if pid else "0", lab.group(1) if lab else "")] = (f, head)
# format 3 (COUNT:WEIGHT PID LABEL FRAMES; .prof OFFSET COUNT WEIGHT): a
# variant scales a stack's count and its weight by the same factor
for k in range(n):
    rnd = random.Random(k)
    d = os.path.join(out, "v%03d.db" % k)
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.prof", "stacks", "session"))
    lines, leaves, total, wtotal = [], {}, 0, 0
    for l in stacks:
        if rnd.random() >= 0.8:
            continue
        c, pid, rest = l.split(" ", 2)
        f = rnd.uniform(0.5, 1.5)
        if v3:
            c, w = (int(x) for x in c.split(":"))
            lab, rest = rest.split(" ", 1)
            nc = max(1, int(c * f + 0.5))
            nw = max(1, int(w * nc / c + 0.5))
            lines.append("%d:%d %s %s %s" % (nc, nw, pid, lab, rest))
        else:
            lab, nc, nw = "", max(1, int(int(c) * f + 0.5)), 0
            lines.append("%d %s %s" % (nc, pid, rest))
        total += nc
        wtotal += nw
        img, off = rest.split(" ", 1)[0].split(":")
        key = (img, pid if (img, pid, lab) in profs else "0", lab)
        leaves.setdefault(key, {})
        cw = leaves[key].setdefault(int(off, 16), [0, 0])
        cw[0] += nc
        cw[1] += nw
    with open(os.path.join(d, "stacks"), "w") as f:
        if v3:
            f.write("# count:weight[,count:weight...] pid label frames (image-index:hex-offset, leaf first)\n")
        else:
            f.write("# count[,count...] pid frames (image-index:hex-offset, leaf first)\n")
        f.write("".join(lines))
    for key, offs in leaves.items():
        name, head = profs[key]
        head = re.sub(r"^samples: \d+$", "samples: %d" % sum(v[0] for v in offs.values()), head, flags=re.M)
        if v3:
            head = re.sub(r"^weights: \d+$", "weights: %d" % sum(v[1] for v in offs.values()), head, flags=re.M)
            body = "".join("%x %d %d\n" % (o, offs[o][0], offs[o][1]) for o in sorted(offs))
        else:
            body = "".join("%x %d\n" % (o, offs[o][0]) for o in sorted(offs))
        with open(os.path.join(d, name), "w") as f:
            f.write(head + "\n\n" + body)
    lp = os.path.join(d, "labels")
    if os.path.exists(lp):
        # a recording's own labels (comm=...): a merged --from keeps its
        # host= and run= out, so that each variant is a run of its own
        keep = []
        for l in open(lp).read().splitlines():
            if l.startswith("#"):
                keep.append(l)
                continue
            cols = [c for c in l.split("\t") if not c.startswith(("host=", "run="))]
            keep.append("\t".join(cols))
        open(lp, "w").write("\n".join(keep) + "\n")
    s = re.sub(r"^samples: \d+$", "samples: %d" % total, sess, flags=re.M)
    if v3:
        s = re.sub(r"^weight-total: \d+$", "weight-total: %d" % wtotal, s, flags=re.M)
    s = re.sub(r"^host: .*$", "host: host%d" % (k % hosts), s, flags=re.M)
    open(os.path.join(d, "session"), "w").write(s)
EOF
"$tally" report -i "$tmp/in/v000.db" >/dev/null || { echo "bench: the variants do not read back" >&2; exit 1; }
stacks1=$(grep -vc '^#' "$tmp/in/v000.db/stacks")
insize=$(du -sk "$tmp/in" | awk '{ print $1 }')
echo "bench: inputs ready: $stacks1 stacks each, $((insize / 1024)) MiB in all" >&2

# one configuration: NAME N LABEL-ARGS...: the median elapsed and peak RSS of R runs
measure() {
	local name=$1 n=$2
	shift 2
	local files=() i e c m el=() cpu=() rss=()
	for ((i = 0; i < n; i++)); do files+=("$tmp/in/$(printf 'v%03d.db' "$i")"); done
	# every run writes a new output, all removed at the end: a merge right
	# after thousands of files were deleted pays ext4's search past recently
	# deleted inodes (twice the system time), which is the benchmark's own doing
	cfg=$((cfg + 1))
	for ((i = 0; i < runs; i++)); do
		out="$tmp/out-$cfg-$i.db"
		/usr/bin/time -v "$tally" merge -o "$out" "$@" "${files[@]}" 2>"$tmp/time.txt" >/dev/null ||
			{ cat "$tmp/time.txt" >&2; exit 1; }
		e=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (k = 1; k <= n; k++) s = s * 60 + t[k]; print s }' "$tmp/time.txt")
		c=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$tmp/time.txt")
		m=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time.txt")
		echo "bench: raw $name, $n inputs, run $i: ${e}s elapsed, ${c}s CPU, ${m}KiB" >&2
		el+=("$e")
		cpu+=("$c")
		rss+=("$m")
	done
	local me mc mm st sz
	me=$(printf '%s\n' "${el[@]}" | median)
	mc=$(printf '%s\n' "${cpu[@]}" | median)
	mm=$(printf '%s\n' "${rss[@]}" | median)
	st=$(grep -vc '^#' "$out/stacks")
	sz=$(du -sk "$out" | awk '{ print $1 }')
	printf '| %s | %d | %s s | %s s | %d MiB | %d | %.1f MiB |\n' "$name" "$n" "$me" "$mc" $((mm / 1024)) "$st" \
		"$(awk -v k="$sz" 'BEGIN { print k / 1024 }')"
}

cfg=0
echo "| labels | inputs | elapsed | CPU (user + sys) | peak RSS | stacks written | output |"
echo "|---|---|---|---|---|---|---|"
measure "default (host, run)" "$inputs"
measure "--label run= (host)" "$inputs" --label run=
for n in $((inputs / 10)) $((inputs / 2)) "$inputs"; do
	((n > 0)) || continue
	measure "none (--label host= --label run=)" "$n" --label host= --label run=
done
echo
echo "Medians of $runs runs. Inputs: $inputs variants of a profile of $stacks1 stacks ($((insize / 1024)) MiB in all), $hosts hosts; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)."
