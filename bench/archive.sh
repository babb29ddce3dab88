#!/usr/bin/env bash
# Archives side by side: `tally archive` against `perf archive`, each of its
# own -g recording of the same workload (tests/workloads/inline_chain.c built
# -O2 -g, with its libc calls; libc's debug file comes from /usr/lib/debug when
# libc6-dbg is installed). Prints one table (docs/performance.md, "Archives"):
# what the archive holds against the files it was made from, its size in each
# form, the time to create it and to read a report from it.
#   bench/archive.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--runs N]
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}; shift || true
ms=5000 hz=999 runs=3
while [ $# -gt 0 ]; do
	case "$1" in
	--ms) ms=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: bench/archive.sh [BUILD_DIR] [--ms MS] [--hz HZ] [--runs N]" >&2; exit 2 ;;
	esac
done
tally=$(cd "$build" && pwd)/tally
[ -x "$tally" ] || { echo "bench: no $tally (run make first)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tally-arbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cc -O2 -g -fno-omit-frame-pointer -I"$here/../tests/workloads" -o w "$here/../tests/workloads/inline_chain.c"

now() { date +%s.%N; }
# timed NAME CMD...: runs CMD $runs times (after PREP, if set), the median wall time in ms into t_NAME
timed() {
	local name=$1 r t0 t1
	shift
	: >"times.$name"
	for r in $(seq "$runs"); do
		[ -n "${PREP:-}" ] && eval "$PREP"
		t0=$(now); "$@" >/dev/null 2>>err.log; t1=$(now)
		awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) * 1000 }' >>"times.$name"
	done
	eval "t_$name=$(median <"times.$name")"
}
size() { stat -c %s "$1"; }
dsize() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
ms() { awk -v a="$1" 'BEGIN { printf "%.0f ms", a }'; }

"$tally" record -g -F "$hz" -o t.db -- ./w "$ms" >/dev/null 2>>err.log
perf record -q -g -F "$hz" -o p.data -- ./w "$ms" >/dev/null 2>>err.log

# tally: the files it holds, then each form
"$tally" archive -i t.db --list >list.txt
held=$(awk '$2 == "total" { print $1 }' list.txt)
nfiles=$(awk '!/^#/ && $1 != "bytes" && $2 != "total" && $2 != "db"' list.txt | wc -l)
PREP='rm -rf a.dir'; timed dir "$tally" archive -i t.db -o a.dir
PREP='rm -f a.tar'; timed tar "$tally" archive -i t.db -o a.tar
PREP='rm -f a.tar.gz'; timed gz "$tally" archive -i t.db -o a.tar.gz
PREP='rm -f a.tar.zst'; timed zst "$tally" archive -i t.db -o a.tar.zst
PREP='rm -f s.tar.zst'; timed szst "$tally" archive -i t.db -o s.tar.zst --strip-debug-to-sampled
PREP=
"$tally" archive -i t.db --list --strip-debug-to-sampled >slist.txt
sheld=$(awk '$2 == "total" { print $1 }' slist.txt)
timed rdb "$tally" report -i t.db --lines
timed rdir "$tally" report -i archive:a.dir --lines
timed rzst "$tally" report -i a.tar.zst --lines
timed rszst "$tally" report -i s.tar.zst --lines

# perf: its build-id cache entries for the recording, as perf archive packs them
PREP='rm -f p.data.tar.bz2'; timed perf perf archive p.data
PREP=
pheld=$(tar tvjf p.data.tar.bz2 | awk '$1 ~ /^-/ { s += $3 } END { print s + 0 }')
pfiles=$(tar tvjf p.data.tar.bz2 | awk '$1 ~ /^-/' | wc -l)
mkdir -p pdebug
PREP='rm -rf pdebug; mkdir pdebug'
timed pread sh -c 'tar xjf p.data.tar.bz2 -C pdebug && perf --buildid-dir pdebug report -i p.data --stdio --sort dso,sym'
PREP=

cat <<T
| measurement (-g, $hz Hz, ~$(awk -v m="$ms" 'BEGIN { printf "%.0f", m / 1000 }') s of inline_chain; times median of $runs) | tally archive | perf archive |
|---|---|---|
| files the archive holds, their size | $nfiles files + the database, $(mib "$held") | $pfiles files of the build-id cache, $(mib "$pheld") (perf.data, $(mib "$(size p.data)"), apart) |
| directory | $(mib "$(dsize a.dir)") (created in $(ms "$t_dir")) | — |
| .tar | $(mib "$(size a.tar)") ($(ms "$t_tar")) | — |
| .tar.gz | $(mib "$(size a.tar.gz)") ($(ms "$t_gz")) | — |
| .tar.zst | $(mib "$(size a.tar.zst)") ($(ms "$t_zst")) | — |
| .tar.bz2 + perf.data | — | $(mib "$(($(size p.data.tar.bz2) + $(size p.data)))") ($(ms "$t_perf")) |
| .tar.zst, --strip-debug-to-sampled | $(mib "$(size s.tar.zst)") of $(mib "$sheld") ($(ms "$t_szst")) | — |
| report from the database / perf.data (files in place) | $(ms "$t_rdb") (report --lines) | — |
| report from the archive | $(ms "$t_rdir") (directory), $(ms "$t_rzst") (.tar.zst), $(ms "$t_rszst") (stripped .tar.zst) | $(ms "$t_pread") (tar xjf into a build-id dir, then perf report) |
T
