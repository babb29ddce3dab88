# What the benchmarks share; sourced by bench/*.sh after `set -euo pipefail`.

# median [FILE]: the median of the numbers in FILE (default stdin), one a
# line: the mean of the two middle ones for an even count; nothing for none
median() {
	if [ $# -gt 0 ]; then
		[ -s "$1" ] || return 0
		median <"$1"
		return
	fi
	sort -g | awk '{ a[NR] = $1 } END { OFMT = "%.4f"; if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# bench_help: the script's own header comment (its usage), on stdout
bench_help() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

# bench_tally BUILD: sets build (made absolute) and tally, or exits 2 saying
# to build first
bench_tally() {
	case $1 in /*) build=$1 ;; *) build=$PWD/$1 ;; esac
	tally=$build/tally
	[ -x "$tally" ] || { echo "bench: no tally at '$tally' (build it first: make)" >&2; exit 2; }
}
