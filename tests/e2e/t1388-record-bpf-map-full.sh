#!/bin/bash
# --sample-mechanism bpf when its map is full: a program that runs through
# 32768 distinct addresses, sampled at 20 kHz for 1.5 s, makes more places in
# a second than the map holds (8192); the samples it has no room for go
# through the ring buffer and the session counts them (sample-map-full), and
# nothing is lost or counted twice: the program's time is what a recording
# through the ring, made at the same time, gives it, within 2%. --duration
# still ends the recording on time, though its rounds are a second.
. "$SRCDIR/tests/e2e/lib.sh"

rc=0
"$TALLY" record -a --sample-mechanism bpf --duration 0.2 -o probe.db >probe.out 2>&1 || rc=$?
if ((rc != 0)); then
	grep -qi 'bpf' probe.out && skip "samples cannot be counted in the kernel here: $(head -1 probe.out)"
	fail "record -a --sample-mechanism bpf exited $rc: $(head -3 probe.out)"
fi
max=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo 0)
((max >= 20000)) || skip "kernel.perf_event_max_sample_rate is $max: 20 kHz samples are needed to fill the map"

cp "$WORKLOADS/sled" sled_$$
"./sled_$$" 3000 >sled.out &
track_pid $!
sleep 0.3
"$TALLY" record -a --sample-mechanism bpf -F 20000 --duration 1.5 -o bpf.db 2>bpf.err &
bpf=$!
"$TALLY" record -a -F 20000 --duration 1.5 -o ring.db 2>ring.err || fail "record -a through the ring failed: $(cat ring.err)"
wait $bpf || fail "record -a --sample-mechanism bpf failed: $(cat bpf.err)"

for d in bpf ring; do
	dur=$(session_key $d.db duration)
	awk -v d="$dur" 'BEGIN { exit !(d >= 1.49 && d <= 1.6) }' || fail "$d.db: --duration 1.5 recorded $dur s"
done
full=$(session_key bpf.db sample-map-full)
[[ $full =~ ^[0-9]+$ ]] || fail "the bpf session has no sample-map-full: $(grep sample- bpf.db/session)"
((full > 0)) || skip "the map never filled (sample-map-full 0: the program got too little CPU here to reach 8192 places a second)"

# the program's time (its samples' weights) in a database
db_value() {
	report_json "$1.json" -i "$1" --image "$TMP/sled_$$"
	python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["events"][0]; print(e.get("value", e["samples"]))' "$1.json"
}
wb=$(db_value bpf.db)
wr=$(db_value ring.db)
awk -v a="$wb" -v b="$wr" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && b > 0 && d <= 0.02 * b) }' ||
	fail "the program's time: $wb counted in the kernel ($full samples through the ring), $wr through the ring only"
note "$full samples found the map full and went through the ring; the program's time: $wb (bpf) and $wr (ring)"
