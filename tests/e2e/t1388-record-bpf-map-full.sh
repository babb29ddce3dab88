#!/bin/bash
# --sample-mechanism bpf when its table of places is full: a program that runs
# through 32768 distinct addresses for 2.5 s of CPU, sampled at 20 kHz, makes
# more places in a second than a table holds (8192: the rounds are 200 ms apart
# for the first second of a program new to tally, and turn the tables before
# they fill, so the program runs well past it); the samples it has no room
# for go through the ring buffer and the session counts them (sample-map-full);
# the full table is turned away from and emptied (sample-tables-emptied), and
# nothing is lost or counted twice across it: the program's time is the CPU
# time it measured, within 1.5% (and what tally says it missed of it), as in a
# recording through the ring made at the same time. --duration still ends a
# recording on time, though its rounds are 4 s apart.
. "$SRCDIR/tests/e2e/lib.sh"

rc=0
"$TALLY" record -a --sample-mechanism bpf --duration 0.2 -o probe.db >probe.out 2>&1 || rc=$?
if ((rc != 0)); then
	grep -qi 'bpf' probe.out && skip "samples cannot be counted in the kernel here: $(head -1 probe.out)"
	fail "record -a --sample-mechanism bpf exited $rc: $(head -3 probe.out)"
fi
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 0)
((max >= 20000)) || skip "kernel.perf_event_max_sample_rate is $max: 20 kHz samples are needed to fill the map"

# the kernel's tick in ms (a throttled event waits for the next one)
tick_ms=$( (zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null || true) |
	awk -F= '$1 == "CONFIG_HZ" && !f { t = 1000 / $2; f = 1 } END { printf "%.1f\n", f ? t : 10 }')

# two whole-system recordings, one counting in the kernel and one through the
# ring, both running before the program starts and after it ends, so that each
# has all of it whatever else the machine does meanwhile: the program starts
# once both say they record, and they are stopped (SIGTERM) once it has ended,
# however long a busy machine made it take
name=sled$$
cp "$WORKLOADS/sled" "$name"
"$TALLY" record -v -a --sample-mechanism bpf -F 20000 -o bpf.db 2>bpf.err &
bpf=$!
"$TALLY" record -v -a -F 20000 -o ring.db 2>ring.err &
ring=$!
track_pid $bpf
track_pid $ring
wait_for_line bpf.err "^tally: recording into 'bpf.db'" 30
wait_for_line ring.err "^tally: recording into 'ring.db'" 30
t0=$(date +%s.%N)
"./$name" 2500 >sled.out
t1=$(date +%s.%N)
kill -TERM $bpf $ring
wait $bpf || fail "record -a --sample-mechanism bpf failed: $(cat bpf.err)"
wait $ring || fail "record -a through the ring failed: $(cat ring.err)"
cpu=$(info_val cpu_ms sled.out)
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
note "the program ran its $cpu ms of CPU in $took s (it got $(awk -v t="$took" -v c="$cpu" 'BEGIN { printf "%.0f", c / 10 / t }')% of a CPU), inside both recordings"

# --duration ends a recording on time though its rounds are 4 s apart (on a
# busy machine a late end is retried once, the load said)
duration_two() {
	rm -rf dur.db
	tally_ok record -a --sample-mechanism bpf --duration 2 -o dur.db
	dur=$(session_key dur.db duration)
	awk -v d="$dur" 'BEGIN { exit !(d >= 1.99 && d <= 2.5) }' || fail "--sample-mechanism bpf --duration 2 recorded $dur s"
	note "--sample-mechanism bpf --duration 2: $dur s"
}
retry_busy "--duration 2 of a recording whose rounds are 4 s apart" duration_two

full=$(session_key bpf.db sample-map-full)
[[ $full =~ ^[0-9]+$ ]] || fail "the bpf session has no sample-map-full: $(grep sample- bpf.db/session)"
((full > 0)) || skip "the table never filled (sample-map-full 0: the program got too little CPU here to reach 8192 places a second)"
emptied=$(session_key bpf.db sample-tables-emptied)
[[ $emptied =~ ^[0-9]+$ ]] || fail "the bpf session has no sample-tables-emptied: $(grep sample- bpf.db/session)"
((emptied > 0)) || fail "a table filled (sample-map-full $full) but none was emptied for new places"

# the program's time (its samples' weights, every image of its process) in ms
db_ms() {
	report_json "$1.json" -i "$1" --comm "$name"
	python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["events"][0]; print("%.1f" % (e.get("value", e["samples"]) / 1e6))' "$1.json"
}
# against the CPU time it measured: within 1.5% above, and below by at most
# 1.5% and the program's part of what tally says it missed: its lost samples,
# a period each, and its throttled events, a tick each at most (a busy
# machine makes more of both). Through the ring, every sample may be lost
# alike: the program's part of the lost ones is its share of the samples.
# Counting in the kernel, only the samples that found the table full
# (sample-map-full, R) went through the ring and could be lost (L of them),
# and the program, which makes new places all the time, has more than its
# share of those: at most all of its own, so its part is at most
# L * n / (R - L) of its n samples tally has (L * P / R, P its samples that
# went through the ring, which are at most n and its lost ones). Either
# part scatters as a binomial count: 3 sigmas of it are added.
for d in bpf ring; do
	ms=$(db_ms $d.db)
	lost=$(session_key $d.db lost | cut -d, -f1)
	thr=$(session_key $d.db throttled | cut -d, -f1)
	pm=$(session_key $d.db period-mean | cut -d, -f1)
	n=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["events"][0]["samples"])' $d.db.json)
	all=$(session_key $d.db samples | cut -d, -f1)
	ring=$all
	[[ $d == ring ]] || ring=$full
	# p: the program's part of the lost samples (at most); its lost ones:
	# p * L, and 3 sigmas of that count
	read -r p lp missed < <(awk -v l="${lost:-0}" -v t="${thr:-0}" -v pm="${pm:-50000}" -v k="$tick_ms" \
		-v n="$n" -v a="$all" -v r="$ring" -v bpf=$([[ $d == bpf ]] && echo 1 || echo 0) 'BEGIN {
		s = a > 0 ? n / a : 0
		if (bpf) p = (r - l > n) ? n / (r - l) : 1
		else p = s
		if (p > 1) p = 1
		lp = p * l + 3 * sqrt(l * p * (1 - p))
		if (lp > l) lp = l
		printf "%.4f %.0f %.1f\n", p, lp, lp * pm / 1e6 + s * t * k }')
	lo=$(awk -v c="$cpu" -v m="$missed" 'BEGIN { printf "%.1f", c * 0.985 - m }')
	hi=$(awk -v c="$cpu" 'BEGIN { printf "%.1f", c * 1.015 }')
	what="${lost:-0} samples lost of $ring that could be, its part at most $p (so $lp lost samples of its $n), ${thr:-0} throttled at a $tick_ms ms tick"
	between "$ms" "$lo" "$hi" ||
		fail "$d: the program's time is $ms ms; it measured $cpu ms of CPU, and tally missed at most $missed ms of it ($what): expected $lo to $hi"
	note "$d: the program's time $ms ms, it measured $cpu ms (tally missed at most $missed ms of it: $what)"
done
note "$full samples found the table full and went through the ring; $emptied full tables emptied"
