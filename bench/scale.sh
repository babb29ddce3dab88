#!/usr/bin/env bash
# Scale: the reports and exports of databases of 100K, 1M and 4M distinct call
# stacks (tests/e2e/gen-bigdb.py, as a daemon running for weeks collects them):
# wall time and peak RSS (/usr/bin/time -v) of `report` (per image),
# `--symbols`, `--children`, `--html`, `export --format pprof`, `folded`,
# `speedscope` and `svg`, the median of RUNS runs each, with their CPU time (user and system: what
# the load of other processes on the machine changes least); beside them `perf
# report` on a perf.data
# of about as many samples, each a distinct stack (bench/stackwork.c recorded
# with perf record -g), at the sizes where that takes reasonable time.
#   bench/scale.sh [BUILD_DIR] [--sizes N,N,...] [--runs N] [--before TALLY]
#                  [--before-max N] [--perf-sizes N,...] [--dbdir DIR] [--write-doc]
# --before TALLY measures another tally binary too (an older build), in a column
# of its own, on the sizes up to --before-max (default 1000000: an old build
# needs gigabytes beyond), each of its runs right after one of this build's, so
# that the load of a shared machine falls on both alike; --dbdir keeps the generated databases there (and
# reuses them). Each build reads the database as it writes it: a merge of the
# generated one (format version 1) alone, made by that build before its views
# (so with this build's format, version 4 and binary stacks, against the
# before build's); --write-doc rewrites the Scale results in docs/performance.md.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
sizes=100000,1000000,4000000 perf_sizes=100000 runs=3 before="" before_max=1000000 dbdir="" write_doc=0
while [ $# -gt 0 ]; do
	case "$1" in
	--sizes) sizes=$2; shift 2 ;;
	--perf-sizes) perf_sizes=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--before) before=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	--before-max) before_max=$2; shift 2 ;;
	--dbdir) dbdir=$2; shift 2 ;;
	--write-doc) write_doc=1; shift ;;
	*) echo "usage: bench/scale.sh [BUILD_DIR] [--sizes N,...] [--runs N] [--before TALLY] [--before-max N] [--perf-sizes N,...] [--dbdir DIR] [--write-doc]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
[ -z "$before" ] || [ -x "$before" ] || { echo "bench: --before '$before' is not an executable" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is not installed (Debian package time)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-scalebench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$dbdir" ]; then dbdir=$tmp; else mkdir -p "$dbdir"; fi

load() { awk '{ print $1 }' /proc/loadavg; }

# one TAG CMD...: one run of CMD, its wall, CPU and RSS appended to $tmp/TAG.{w,c,m};
# false when it failed
one() {
	local tag=$1; shift
	if ! /usr/bin/time -v -o "$tmp/tv" "$@" >/dev/null 2>"$tmp/err"; then
		echo "bench: failed: $*" >&2; sed 's/^/bench:   /' "$tmp/err" >&2
		return 1
	fi
	awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s }' "$tmp/tv" >>"$tmp/$tag.w"
	awk -F': ' '/Maximum resident set size/ { print $2 / 1024 }' "$tmp/tv" >>"$tmp/$tag.m"
	awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { print u + s }' "$tmp/tv" >>"$tmp/$tag.c"
}

# row TAG LABEL: appends "LABEL wall_s rss_mb cpu_s" (medians of the runs) to $tmp/rows
row() {
	local tag=$1 label=$2
	if [ ! -s "$tmp/$tag.c" ]; then echo "$label - - -" >>"$tmp/rows"; return; fi
	echo "$label $(median <"$tmp/$tag.w" | awk '{ printf "%.2f", $1 }') $(median <"$tmp/$tag.m" | awk '{ printf "%.0f", $1 }') $(median <"$tmp/$tag.c" | awk '{ printf "%.2f", $1 }')" >>"$tmp/rows"
	echo "bench: raw $label wall $(tr '\n' ' ' <"$tmp/$tag.w")cpu $(tr '\n' ' ' <"$tmp/$tag.c")rss_mb $(tr '\n' ' ' <"$tmp/$tag.m")" >&2
}

# run TAG CMD...: RUNS times; appends "TAG wall_s rss_mb cpu_s" (medians) to $tmp/rows
run() {
	local tag=$1; shift
	rm -f "$tmp"/r.?
	for _ in $(seq "$runs"); do one r "$@" || break; done
	row r "$tag"
}

# view N NAME ARGS...: one view of both builds (the before one when it is
# measured at this size), their runs taken in turn, so that the load of the
# machine falls on both alike; @DB@ in ARGS is the database as that build
# wrote it ($dba, $dbb)
view() {
	local n=$1 name=$2; shift 2
	local both=0
	[ -n "$before" ] && ((n <= before_max)) && both=1
	rm -f "$tmp"/a.? "$tmp"/b.?
	local ok_a=1 ok_b=$both
	local args_a=("${@//@DB@/$dba}") args_b=("${@//@DB@/$dbb}")
	for _ in $(seq "$runs"); do
		if ((ok_a)); then one a "$tally" "${args_a[@]}" || ok_a=0; fi
		if ((ok_b)); then one b "$before" "${args_b[@]}" || ok_b=0; fi
	done
	row a "after $n $name"
	if ((both)); then row b "before $n $name"; fi
	rm -f "$tmp"/o.*
}

views() { # views N
	local n=$1
	view "$n" report report -i @DB@
	view "$n" --symbols report -i @DB@ --symbols
	view "$n" --children report -i @DB@ --children
	view "$n" --html report -i @DB@ --html "$tmp/o.html"
	view "$n" pprof export -i @DB@ --format pprof -o "$tmp/o.pb.gz"
	view "$n" folded export -i @DB@ --format folded -o "$tmp/o.folded"
	view "$n" speedscope export -i @DB@ --format speedscope -o "$tmp/o.speedscope.json"
	view "$n" svg export -i @DB@ --format svg -o "$tmp/o.svg"
}

: >"$tmp/rows"
load0=$(load)
for n in ${sizes//,/ }; do
	db=$dbdir/big-$n.db
	if [ ! -f "$db/session" ]; then
		rm -rf "$db"
		echo "bench: generating $db ($n stacks)" >&2
		python3 "$here/../tests/e2e/gen-bigdb.py" "$db" "$n" >/dev/null
	fi
	# the database as each build writes it (its own format: a daemon's
	# epochs and every merge are written so), by a merge of that one alone
	# without labels: the same stacks, in the merge's order
	dba=$tmp/after-$n.db dbb=$tmp/before-$n.db
	rm -rf "$dba" "$dbb"
	"$tally" merge -o "$dba" --label host= --label run= "$db" >/dev/null 2>"$tmp/err" ||
		{ echo "bench: tally merge of $db failed" >&2; sed 's/^/bench:   /' "$tmp/err" >&2; exit 1; }
	if [ -n "$before" ] && ((n <= before_max)); then
		"$before" merge -o "$dbb" --label host= --label run= "$db" >/dev/null 2>"$tmp/err" ||
			{ echo "bench: the before build's merge of $db failed" >&2; sed 's/^/bench:   /' "$tmp/err" >&2; exit 1; }
	fi
	mb=$(du -smL "$dba" | awk '{ print $1 }')
	echo "db $n $mb $(awk '/^samples:/ { print $2 }' "$dba/session")" >>"$tmp/rows"
	views "$n"
	rm -rf "$dba" "$dbb"
done

# perf report on perf.data files of about as many samples, each a distinct stack
perf_ok=0
if command -v perf >/dev/null && [ -n "$perf_sizes" ]; then
	cc -O2 -g -fno-omit-frame-pointer -o "$tmp/stackwork" "$here/stackwork.c"
	perf_ok=1
	for n in ${perf_sizes//,/ }; do
		# cpu-clock every 50 us of the target's CPU: n samples in n / 20000 s
		secs=$(awk -v n="$n" 'BEGIN { printf "%.1f", n / 20000 }')
		perf record -q -g -e cpu-clock -c 50000 -o "$tmp/p.data" -- "$tmp/stackwork" "$secs" >/dev/null 2>"$tmp/err" ||
			{ echo "bench: perf record failed" >&2; sed 's/^/bench:   /' "$tmp/err" >&2; perf_ok=0; break; }
		got=$(perf report -i "$tmp/p.data" --stdio --sort comm 2>/dev/null | awk '/^# Samples:/ { print $3; exit }')
		echo "pdb $n $(($(stat -c %s "$tmp/p.data") / 1048576)) $got" >>"$tmp/rows"
		run "perf $n --no-children" perf report -i "$tmp/p.data" --stdio --no-children
		run "perf $n --children" perf report -i "$tmp/p.data" --stdio --children
		rm -f "$tmp/p.data"
	done
fi
load1=$(load)

# the table
{
	printf 'Scale: median of %s runs each; load average %s before, %s after (2 CPUs)\n\n' "$runs" "$load0" "$load1"
	printf '| stacks | database | view | wall (s) | CPU (s) | peak RSS (MB) |'
	[ -z "$before" ] || printf ' before: wall (s) | CPU (s) | RSS (MB) |'
	printf '\n|---|---|---|---|---|---|'
	[ -z "$before" ] || printf -- '---|---|---|'
	printf '\n'
	awk -v before="$before" '
	function commas(n,   s) { s = n ""; while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s); return s }
	$1 == "db" { n = $2; size[n] = $3 " MB, " $4 " samples"; ns[++k] = n; next }
	$1 == "pdb" { pn = $2; psize[pn] = $3 " MB perf.data, " $4 " samples"; pns[++pk] = pn; next }
	$1 == "perf" { w[$1 " " $2 " " $3] = $4; r[$1 " " $2 " " $3] = $5; c[$1 " " $2 " " $3] = $6; next }
	{ key = $1 " " $2 " " $3; w[key] = $4; r[key] = $5; c[key] = $6; if ($1 == "after" && !(($2 " " $3) in seen)) { seen[$2 " " $3] = 1; order[$2] = order[$2] " " $3 } }
	END {
		for (i = 1; i <= k; i++) {
			n = ns[i]; m = split(order[n], v, " "); first = 1
			for (j = 1; j <= m; j++) {
				view = v[j]
				a = "after " n " " view; b = "before " n " " view
				printf "| %s | %s | `%s` | %s | %s | %s |", first ? commas(n) : "", first ? size[n] : "", view, w[a], c[a], r[a]
				if (before != "") printf " %s | %s | %s |", (b in w) ? w[b] : "", (b in c) ? c[b] : "", (b in r) ? r[b] : ""
				printf "\n"; first = 0
			}
		}
		for (i = 1; i <= pk; i++) {
			n = pns[i]
			for (j = 1; j <= 2; j++) {
				view = j == 1 ? "--no-children" : "--children"
				a = "perf " n " " view
				printf "| %s | %s | `perf report %s` | %s | %s | %s |", j == 1 ? commas(n) : "", j == 1 ? psize[n] : "", view, w[a], c[a], r[a]
				if (before != "") printf " | | |"
				printf "\n"
			}
		}
	}' "$tmp/rows"
	((perf_ok)) || printf '\n(perf report left out: no --perf-sizes, no perf, or its recording failed)\n'
} >"$tmp/table"
cat "$tmp/table"

if ((write_doc)); then
	doc=$here/../docs/performance.md
	grep -q '<!-- scale-results:begin -->' "$doc" || { echo "bench: no scale-results markers in $doc" >&2; exit 1; }
	awk -v tbl="$tmp/table" '
	/<!-- scale-results:begin -->/ { print; while ((getline l < tbl) > 0) print l; skip = 1; next }
	/<!-- scale-results:end -->/ { skip = 0 }
	!skip' "$doc" >"$tmp/doc" && cp "$tmp/doc" "$doc"
	echo "bench: wrote the Scale results into docs/performance.md" >&2
fi
