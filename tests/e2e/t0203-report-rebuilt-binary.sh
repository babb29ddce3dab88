#!/bin/bash
# a program rebuilt after recording (new build-id) is not symbolized with
# the new file: its new function name never shows, and the report or stderr
# warns about the build-id.
. "$SRCDIR/tests/e2e/lib.sh"

command -v cc >/dev/null || skip "no C compiler (cc)"
write_prog() {
	cat >prog.c <<EOC
#include <stdint.h>
#include <time.h>
volatile uint64_t sink;
__attribute__((noinline)) void $1(void)
{
	uint64_t x = 88172645463325252u;
	struct timespec ts;
	do {
		for (int i = 0; i < 1000000; i++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		}
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec == 0 && ts.tv_nsec < 300000000);
	sink = x;
}
int main(void) { $1(); return 0; }
EOC
	cc -O1 -g -o prog prog.c || fail "cc failed"
}
build_id() {
	readelf -n prog | awk '/Build ID/ { print $3 }'
}

write_prog old_name_fn
id1=$(build_id)
[[ -n $id1 ]] || skip "cc does not give binaries a GNU build-id here"
tally_ok record -F 2000 -o db -- ./prog
tally_ok record -g -F 2000 -o cgdb -- ./prog
report_json before.json -i db --symbols
n=$(tjson before.json func old_name_fn)
((n > 0)) || fail "before the rebuild: no samples in old_name_fn; functions: $(tjson before.json funcs | head -20 | tr '\n' ' ')"

write_prog new_name_fn
id2=$(build_id)
[[ $id1 != "$id2" ]] || fail "test setup: the rebuilt program has the same build-id $id1"

report_json after.json -i db --symbols
report_text after.txt -i db --symbols
for f in after.json after.txt; do
	! grep -q new_name_fn $f || fail "report ($f) names new_name_fn from the rebuilt file (build-id $id2), recorded build-id was $id1: $(grep new_name_fn $f | head -3)"
	grep -Eiq 'build[- ]?id' $f $f.err ||
		fail "report ($f) after the rebuild has no warning mentioning the build-id on stderr or in the report; stderr: $(head -c 1000 $f.err)"
done
note "rebuilt program: new_name_fn not shown, build-id warned about: $(grep -Eih 'build[- ]?id' after.txt.err after.txt | head -1)"

# the call-graph views symbolize too: same refusal, same warning, once
for view in --children --tree; do
	"$TALLY" report -i cgdb $view > cg.txt 2> cg.err || fail "report -i cgdb $view failed: $(head -c 500 cg.err)"
	! grep -q new_name_fn cg.txt || fail "report $view names new_name_fn from the rebuilt file: $(grep new_name_fn cg.txt | head -3)"
	n=$(grep -Eic 'build[- ]?id' cg.err || true)
	((n == 1)) || fail "report $view after the rebuild: expected one build-id warning on stderr, got $n: $(head -c 800 cg.err)"
done
note "call-graph views: new_name_fn not shown, one build-id warning each"
