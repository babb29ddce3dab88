#!/bin/bash
# every text report, whatever its filters, ends its tables with the `lost:`
# line, and that line gives the session's figures: its lost samples (with
# their share of the samples taken plus lost) and its throttle count, so
# missing data is never silent.  A recording loses nothing here, so a copy of
# the database says it lost 37 samples and was throttled 5 times.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record --per-pid -F 2000 -o db -- "$WORKLOADS/split_funcs" 300
pid=$(workload_pid out)
cp -a db lossy
sed -i -e 's/^lost: .*/lost: 37/' -e 's/^throttled: .*/throttled: 5/' lossy/session
[[ $(session_key lossy lost) == 37 && $(session_key lossy throttled) == 5 ]] ||
	fail "could not set lost and throttled in lossy/session: $(cat lossy/session)"

# lost_line DB ARGS...: every report of DB with each set of filters ends with
# `lost: N samples (P%), throttled: T times`, N and T the session's lost and
# throttled, P = N / (samples + N)
lost_line() {
	local db=$1 i=0 args lost thr samples want got
	lost=$(session_key "$db" lost)
	thr=$(session_key "$db" throttled)
	samples=$(session_key "$db" samples)
	want=$(awk -v l="$lost" -v s="$samples" -v t="$thr" \
		'BEGIN { printf "lost: %d sample%s (%.2f%%), throttled: %d time%s", l, l == 1 ? "" : "s", (l + s) ? 100 * l / (l + s) : 0, t, t == 1 ? "" : "s" }')
	while IFS= read -r args; do
		i=$((i + 1))
		read -ra argv <<<"$args"
		report_text "$db.r$i.txt" -i "$db" "${argv[@]}"
		got=$(grep -E '^lost:' "$db.r$i.txt" | tail -1)
		[[ -n $got ]] || fail "report $args: no line starting with 'lost:'; report: $(head -c 1500 "$db.r$i.txt")"
		[[ $got == "$want" ]] || fail "report -i $db $args: '$got', the session ($samples samples, lost $lost, throttled $thr) gives '$want'"
		# it closes the report: nothing but blank lines after it
		[[ -z $(sed -n '/^lost:/,$p' "$db.r$i.txt" | tail -n +2 | tr -d '[:space:]') ]] ||
			fail "report $args: the lost line is not the last: $(sed -n '/^lost:/,$p' "$db.r$i.txt" | head -5)"
	done <<EOT

--symbols
--lines
--exclude-dependent
--top 1
--symbols --top 2
--image split_funcs
--image split_funcs --symbols
--event cpu-clock
--pid $pid
--comm split_funcs --symbols
EOT
	note "$db: $i reports end with '$want'"
}

subtest "a recording: the session's figures" lost_line db
subtest "37 lost, 5 throttled: the session's figures" lost_line lossy

# a count near 2^64 (a damaged or hostile session): the share stays a share,
# 100.00% here, where samples + lost wrapped around and gave 6e18 %
huge_lost() {
	cp -a db huge
	sed -i 's/^lost: .*/lost: 18446744073709551615/' huge/session
	report_text huge.txt -i huge
	got=$(grep -E '^lost:' huge.txt | tail -1)
	[[ $got =~ ^lost:\ 18446744073709551615\ samples\ \(100\.00%\), ]] ||
		fail "lost 2^64-1: '$got', expected the count as it is and a share of 100.00%"
	"$TALLY" report -i huge --html huge.html >/dev/null 2>&1 || fail "report --html of the huge-lost database failed"
	grep -q 'Lost: <b>18446744073709551615</b> samples (100.00%)' huge.html ||
		fail "the HTML report's lost line: $(grep -o 'Lost: [^/]*' huge.html | head -1)"
	note "lost 2^64-1: '$got'"
}
subtest "2^64-1 lost: a share of at most 100%" huge_lost
