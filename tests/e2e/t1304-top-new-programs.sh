#!/bin/bash
# tally top while many new programs start (issue 31, item 8): 40 distinct
# programs, one started every 50 ms (and never before tally top has shown
# the one before, so that each comes in a tick of its own: the feed makes a
# generation of symbols a tick that brings new files, past the 16 that its
# first array held), each running functions not named yet while the next
# ones start. tally top's text snapshots, with and without -g, end with
# status 0 and no sanitizer report (under the ASan build the suite catches
# a read of freed memory: the older generations' resolvers kept the address
# of their database inside an array that grew by realloc), and name the
# programs' functions; --once during the churn prints one snapshot.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/top.sh"

N=40
churn_build $N

# check_names FILE MIN: no row of a churn program in FILE is [unknown] (an
# older generation's resolver answers for its images), and the run named
# MIN of its functions f0..f63 at least
check_names() {
	awk '/^# tally top:/ { next } $1 ~ /%$/ && $0 ~ /[[:space:]]ch_[0-9][0-9][[:space:]]/ { print $NF }' "$1" | sort -u >names
	! grep -qxF '[unknown]' names || fail "rows of the churn programs are [unknown]: $(grep -m3 -E '[[:space:]]ch_[0-9]+[[:space:]].*\[unknown\]$' "$1")"
	local nf
	nf=$(grep -Ec '^f[0-9]+$' names || true)
	((nf >= $2)) || fail "only $nf of the 64 functions named in the churn's rows: $(tr '\n' ' ' <names)"
	note "$nf functions of the churn named, and: $(grep -Ev '^f[0-9]+$' names | tr '\n' ' ')"
}

# run_churn [TOP OPTIONS...]: tally top -d 0.05 on the starter, text
# snapshots of the churn's functions, until the starter ends
run_churn() {
	local rc=0
	: >top.out
	rm -f churn.log
	"$TALLY" top "$@" -d 0.05 --rows 0 --image ch_ -- "$TMP/churn-start.sh" $N text "$TMP/top.out" \
		>top.out 2>top.err || rc=$?
	grep -E -m3 'ERROR: AddressSanitizer|runtime error|SUMMARY' top.err &&
		fail "tally top $*: a sanitizer report: $(grep -m1 -A5 -E 'ERROR: AddressSanitizer|runtime error' top.err | head -c 800)"
	((rc == 0)) || fail "tally top $* exited $rc: $(head -c 1500 top.err); the starter: $(tail -3 churn.log 2>/dev/null)"
	grep -q 'end: 0' churn.log || fail "the starter did not finish: $(tail -3 churn.log)"
	local shown
	shown=$(grep -c ' shown$' churn.log)
	((shown == N)) || fail "$shown of the $N programs were shown"
	note "$N programs started and shown in $(snapshots top.out) snapshots; $(grep -m1 'samples counted' churn.log | cut -d' ' -f2-)"
	check_names top.out 16
}

case_text() {
	run_churn
}

case_text_g() {
	run_churn -g
	grep -Eq '^ *share +self +msec' top.out || fail "-g: no self column: $(grep -m2 -A1 '^#' top.out)"
}

case_once() {
	# the same churn, not waited for: the snapshot after one interval
	local rc=0
	rm -f churn.log
	"$TALLY" top --once -d 1 --rows 0 --image ch_ -- "$TMP/churn-start.sh" $N none >once.out 2>once.err || rc=$?
	grep -E -m3 'ERROR: AddressSanitizer|runtime error' once.err &&
		fail "tally top --once: a sanitizer report: $(grep -m1 -A5 -E 'ERROR: AddressSanitizer|runtime error' once.err | head -c 800)"
	((rc == 0)) || fail "tally top --once exited $rc: $(head -c 1500 once.err)"
	[[ $(snapshots once.out) == 1 ]] || fail "--once printed $(snapshots once.out) snapshots"
	grep -Eq '[[:space:]]ch_[0-9][0-9][[:space:]]' once.out || fail "--once shows none of the churn: $(head -c 1000 once.out)"
	check_names once.out 4
}

subtest "text snapshots while 40 new programs start" case_text
subtest "the same with -g" case_text_g
subtest "--once during the churn" case_once
