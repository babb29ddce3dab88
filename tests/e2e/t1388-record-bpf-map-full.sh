#!/bin/bash
# --sample-mechanism bpf when its table of places is full: a program that runs
# through 32768 distinct addresses for 2.5 s of CPU, sampled at 20 kHz, makes
# more places in a second than a table holds (8192: the rounds are 200 ms apart
# for the first second of a program new to tally, and turn the tables before
# they fill, so the program runs well past it); the samples it has no room
# for go through the ring buffer and the session counts them (sample-map-full);
# the full table is turned away from and emptied (sample-tables-emptied), and
# nothing is lost or counted twice across it: the program's time is the CPU
# time it measured, within 1.5%, as in a recording through the ring made at the
# same time. --duration still ends the recording on time, though its rounds are
# 4 s apart.
. "$SRCDIR/tests/e2e/lib.sh"

rc=0
"$TALLY" record -a --sample-mechanism bpf --duration 0.2 -o probe.db >probe.out 2>&1 || rc=$?
if ((rc != 0)); then
	grep -qi 'bpf' probe.out && skip "samples cannot be counted in the kernel here: $(head -1 probe.out)"
	fail "record -a --sample-mechanism bpf exited $rc: $(head -3 probe.out)"
fi
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 0)
((max >= 20000)) || skip "kernel.perf_event_max_sample_rate is $max: 20 kHz samples are needed to fill the map"

# two whole-system recordings, one counting in the kernel and one through the
# ring, both running before the program starts and after it ends, so that each
# has all of it whatever else the machine does meanwhile
name=sled$$
cp "$WORKLOADS/sled" "$name"
"$TALLY" record -a --sample-mechanism bpf -F 20000 --duration 8 -o bpf.db 2>bpf.err &
bpf=$!
"$TALLY" record -a -F 20000 --duration 8 -o ring.db 2>ring.err &
ring=$!
track_pid $bpf
track_pid $ring
sleep 1.5
t0=$(date +%s.%N)
"./$name" 2500 >sled.out
t1=$(date +%s.%N)
wait $bpf || fail "record -a --sample-mechanism bpf failed: $(cat bpf.err)"
wait $ring || fail "record -a through the ring failed: $(cat ring.err)"
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 6) }' || skip "the program took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s to run here: it may not be inside both recordings"
cpu=$(info_val cpu_ms sled.out)

for d in bpf ring; do
	dur=$(session_key $d.db duration)
	awk -v d="$dur" 'BEGIN { exit !(d >= 7.99 && d <= 8.1) }' || fail "$d.db: --duration 8 recorded $dur s"
done
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
for d in bpf ring; do
	ms=$(db_ms $d.db)
	near "$ms" "$cpu" "$(awk -v c="$cpu" 'BEGIN { printf "%.1f", c * 0.015 }')" "$d: the program's time in ms (it measured $cpu ms of CPU)"
done
note "$full samples found the table full and went through the ring; $emptied full tables emptied"
