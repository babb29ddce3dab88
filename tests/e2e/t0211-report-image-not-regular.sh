#!/bin/bash
# an image recorded at a path that is now a FIFO (or a link to /dev/zero),
# found through the recorded path, --image-path, --mapfile or a debug file
# by build-id: every report finishes (within 10 s), names the file and what
# it is, and symbolizes the rest; a --mapfile that is a FIFO is refused at
# once with one line.
. "$SRCDIR/tests/e2e/lib.sh"

mkdir bin ipath dbg
cp "$WORKLOADS/split_funcs" bin/sf
tally_ok record -F 999 -g -o db -- ./bin/sf 300
tally_ok scan -o map bin
id=$(awk -F'\t' '$1 == "build-id" { print $2; exit }' map)
[[ -n $id ]] || fail "the scan found no build-id for bin/sf: $(cat map)"
mkdir -p "dbg/.build-id/${id:0:2}"

# finishes CMD...: tally CMD must end within 10 s with status 0; stderr to f.err
finishes() {
	local rc=0
	timeout 10 "$TALLY" "$@" >f.out 2>f.err </dev/null || rc=$?
	((rc != 124)) || fail "'tally $*' still ran after 10 s"
	((rc == 0)) || fail "'tally $*' exited $rc: $(head -c 1000 f.err)"
}

# plant PATH: a FIFO or a link to /dev/zero (as $what says) at PATH
plant() {
	rm -f "$1"
	if [[ $what == fifo ]]; then mkfifo "$1"; else ln -s /dev/zero "$1"; fi
}

for what in fifo zero; do
	plant bin/sf
	kind=$([[ $what == fifo ]] && echo "a FIFO" || echo "a character device")
	finishes report -i db --symbols
	grep -q "'$TMP/bin/sf' is $kind, not a regular file" f.err ||
		fail "report --symbols with bin/sf $kind: no warning naming it: $(cat f.err)"
	finishes report -i db --lines
	finishes export -i db --format folded -o -
	finishes report -i db --explain sf
	grep -q "is $kind, not a regular file" f.out || fail "--explain does not say what bin/sf is: $(head -c 1000 f.out)"
	# the same file reached by the other ways a report looks for it
	plant ipath/sf
	finishes report -i db --symbols --image-path ipath
	finishes report -i db --symbols --mapfile map
	plant "dbg/.build-id/${id:0:2}/${id:2}.debug"
	finishes report -i db --lines --debug-dir dbg
	# annotate cannot find work_a without the file: it must say so, not hang
	rc=0
	timeout 10 "$TALLY" annotate -i db work_a --debug-dir dbg >a.out 2>a.err </dev/null || rc=$?
	((rc != 124)) || fail "'tally annotate work_a' still ran after 10 s"
	note "bin/sf as $kind: report, --lines, export, --explain, --image-path, --mapfile, --debug-dir all finish"
done

# with the file back, it is symbolized again
rm -f bin/sf && cp "$WORKLOADS/split_funcs" bin/sf
report_json ok.json -i db --symbols
n=$(tjson ok.json func work_a)
((n > 0)) || fail "with bin/sf back, work_a has no samples"

# a map file that is a FIFO
mkfifo fifo.map
expect_fail_with "^tally: cannot read map file: 'fifo.map' is a FIFO, not a regular file" \
	timeout 10 "$TALLY" report -i db --symbols --mapfile fifo.map
note "--mapfile a FIFO: refused at once"

# a source file that is now a FIFO: annotate and the HTML report (which
# annotates the hottest functions) finish, without the source
command -v cc >/dev/null || skip "no C compiler (cc): the source-file part cannot run"
mkdir src
cat >src/spin.c <<'EOC'
#include <time.h>
volatile unsigned long long sink;
__attribute__((noinline, noipa)) unsigned long long spin(unsigned long long n)
{
	unsigned long long x = n;
	for (unsigned long long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + i;
	return x;
}
int main(void)
{
	struct timespec ts;
	do {
		sink += spin(100000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec == 0 && ts.tv_nsec < 300000000);
	return 0;
}
EOC
(cd src && cc -O1 -g -o ../spin spin.c) || fail "cc failed"
tally_ok record -F 999 -o sdb -- ./spin
finishes annotate -i sdb spin
grep -q "6364136223846793005ULL" f.out || fail "annotate with its source in place shows no source: $(head -c 600 f.out)"
rm src/spin.c
mkfifo src/spin.c
finishes annotate -i sdb spin
finishes report -i sdb --html s.html
note "the source file a FIFO: annotate and report --html finish"
