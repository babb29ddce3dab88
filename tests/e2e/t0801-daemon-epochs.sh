#!/bin/bash
# epochs: `ctl epoch` closes one and begins the next, named by UTC start time
# (-2, -3, ... within one minute); report merges all of them by default (the
# sum of each), --epoch picks one, --since/--until pick by time; --epoch-every
# rotates on its own and --keep deletes old epochs but keeps the newest three.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

a=$(uniq_copy split_funcs)
b="$TMP/second_$$"
c="$TMP/third_$$"
cp "$a" "$b"
cp "$a" "$c"
start_daemon db --flush-interval 100ms
ctl --db db status
e1=$(status_val epoch | cut -d' ' -f1)

# each epoch lasts two seconds of the clock at least, so that its start and
# its last flush (times to the second) are in different seconds and the
# --since/--until checks below can tell the epochs apart; a ctl epoch or
# flush reads the rings first, so the workload that ran is in the epoch
t_epoch=$(date +%s)
# lasted: the clock is two seconds past the current epoch's start
lasted() { (($(date +%s) >= t_epoch + 2)); }
"$a" 600 >/dev/null
wait_for 10 "two seconds of epoch $e1" lasted
ctl --db db epoch
t_epoch=$(date +%s)
e2=$(sed -n 's/^epoch \([0-9-]*\) begins.*/\1/p' "$TMP/ctl.out")
[[ -n $e2 ]] || fail "ctl epoch said: $(cat "$TMP/ctl.out")"
grep -q "epoch $e1 is complete" "$TMP/ctl.out" || fail "ctl epoch does not name the epoch it closed ($e1): $(cat "$TMP/ctl.out")"
"$b" 600 >/dev/null
wait_for 10 "two seconds of epoch $e2" lasted
ctl --db db epoch
t_epoch=$(date +%s)
e3=$(sed -n 's/^epoch \([0-9-]*\) begins.*/\1/p' "$TMP/ctl.out")
"$c" 600 >/dev/null
wait_for 10 "two seconds of epoch $e3" lasted
ctl --db db flush
stop_daemon "$DAEMON_PID"
note "epochs $e1 $e2 $e3"

# names: YYYYMMDDHHMM of the start time (UTC), numbered within a minute
for e in "$e1" "$e2" "$e3"; do
	[[ $e =~ ^[0-9]{12}(-[0-9]+)?$ ]] || fail "epoch name '$e' is not YYYYMMDDHHMM[-N]"
	start=$(session_key "db/$e" start-time)
	want=$(date -u -d "$start" +%Y%m%d%H%M)
	[[ ${e:0:12} == "$want" ]] || fail "epoch $e began at $start (UTC), so its name should begin with $want"
done
[[ $e1 != "$e2" && $e2 != "$e3" ]] || fail "two epochs share a name: $e1 $e2 $e3"
if [[ ${e1:0:12} == "${e2:0:12}" ]]; then
	[[ $e2 == "${e1:0:12}-2" ]] || fail "a second epoch in the minute of $e1 is called $e2, expected ${e1:0:12}-2"
fi

has() { # has JSON IMAGE: the image has samples in the report
	(($(tjson "$1" image "$2") > 0))
}
# --epoch: each epoch has its own workload only
report_json e1.json -i db --epoch "$e1"
report_json e2.json -i db --epoch "$e2"
report_json e3.json -i db --epoch "$e3"
has e1.json "$(basename "$a")" || fail "--epoch $e1 lacks the workload run in it"
has e1.json "$(basename "$b")" && fail "--epoch $e1 has the workload of $e2"
has e2.json "$(basename "$b")" || fail "--epoch $e2 lacks the workload run in it"
has e2.json "$(basename "$a")" && fail "--epoch $e2 has the workload of $e1"
has e3.json "$(basename "$c")" || fail "--epoch $e3 lacks the workload run in it"
note "--epoch: each epoch holds its own workload"

# all epochs merged by default: the sum of the three
report_json all.json -i db
t=$(tjson all.json total)
t1=$(tjson e1.json total) t2=$(tjson e2.json total) t3=$(tjson e3.json total)
((t == t1 + t2 + t3)) || fail "the merged report has $t samples, the epochs $t1 + $t2 + $t3"
for w in "$a" "$b" "$c"; do
	has all.json "$(basename "$w")" || fail "the merged report lacks $(basename "$w")"
done
note "merged: $t = $t1 + $t2 + $t3"

# --since/--until: an epoch is taken when it has samples in the range
s2=$(session_key "db/$e2" start-time)
s3=$(session_key "db/$e3" start-time)
report_json u.json -i db --until "$s2"
[[ $(tjson u.json total) == "$t1" ]] || fail "--until $s2 (when $e2 began) gave $(tjson u.json total) samples, expected $e1's $t1"
mid=$(date -u -d "$s2 + 1 second" +%Y-%m-%dT%H:%M:%S)
report_json m.json -i db --since "$mid" --until "$s3"
[[ $(tjson m.json total) == "$t2" ]] || fail "--since $mid --until $s3 gave $(tjson m.json total) samples, expected $e2's $t2"
late=$(date -u -d "$s3 + 1 second" +%Y-%m-%dT%H:%M:%S)
report_json l.json -i db --since "$late"
[[ $(tjson l.json total) == "$t3" ]] || fail "--since $late gave $(tjson l.json total) samples, expected $e3's $t3"
report_json d.json -i db --since 1d
[[ $(tjson d.json total) == "$t" ]] || fail "--since 1d gave $(tjson d.json total) samples, expected all $t"
expect_fail_with "no epoch of .* lies in the range" "$TALLY" report -i db --until 2000-01-01
expect_fail_with "no epoch '199901010000'.*$e1" "$TALLY" report -i db --epoch 199901010000
expect_fail_with "--epoch.*--since" "$TALLY" report -i db --epoch "$e1" --since 1h
expect_fail_with "invalid --since 'yesterday'" "$TALLY" report -i db --since yesterday
note "--since/--until select by time"

# --epoch-every rotates by itself; --keep deletes all but the newest three
start_daemon rot --flush-interval 100ms --epoch-every 300ms --keep 200ms
wait_state() { echo "the log: $(tail -5 rot/daemon.log)"; }
wait_for 20 "--keep 200ms deleting an epoch" grep -q "deleted" rot/daemon.log
ctl --db rot status
stop_daemon "$DAEMON_PID"
mapfile -t eps < <(ls rot | grep -E '^[0-9]{12}(-[0-9]+)?$' | sort -t- -k1,1 -k2,2n)
((${#eps[@]} == 3)) || fail "--keep left ${#eps[@]} epochs, expected the newest 3: ${eps[*]}"
created=$(grep -c 'epoch .* begins' rot/daemon.log)
((created > 3)) || fail "--epoch-every 300ms began only $created epochs"
newest=$(grep 'epoch .* begins' rot/daemon.log | tail -3 | sed 's/.*epoch \([0-9-]*\) begins.*/\1/' | sort | tr '\n' ' ')
[[ "$(printf '%s\n' "${eps[@]}" | sort | tr '\n' ' ')" == "$newest" ]] || fail "--keep kept ${eps[*]}, not the newest three: $newest"
db_total rot >/dev/null
note "--epoch-every began $created epochs, --keep left ${eps[*]}"
