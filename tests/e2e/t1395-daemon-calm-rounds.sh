#!/bin/bash
# samples counted in the kernel (the daemon's default where it can): while
# short processes of programs the daemon has already seen come and go, it
# looks at their side-band records every 200 ms but reads the counts every 4
# seconds, as when nothing starts (the status counts both: "rounds: N, and M looks that left the
# records for a later one"); a program it has not seen is read within a round
# of its start, so one that runs half a second and whose file is deleted as it
# ends keeps its build-id. Runs alone (meson: is_parallel false): other tests'
# new programs would make the rounds 200 ms apart, as they should.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

need_tool readelf binutils
want=$(readelf -n "$WORKLOADS/split_funcs" | awk '/Build ID:/ { print $3; exit }')
[[ -n $want ]] || skip "the workload split_funcs has no build-id"
rc=0
"$TALLY" record -a --sample-mechanism bpf --duration 0.2 -o probe.db >probe.out 2>&1 || rc=$?
if ((rc != 0)); then
	grep -qi 'bpf' probe.out && skip "samples cannot be counted in the kernel here: $(head -1 probe.out)"
	fail "record -a --sample-mechanism bpf exited $rc: $(head -3 probe.out)"
fi

start_daemon calm.db --sample-mechanism bpf -F 999 --flush-interval 1h
# rounds_looks: ROUNDS and LOOKS from the status line
ROUNDS= LOOKS=
rounds_looks() {
	ctl --db calm.db status
	local line
	line=$(status_val rounds)
	[[ $line =~ ^([0-9]+),\ and\ ([0-9]+)\ looks?\ that\ left ]] || fail "status: no 'rounds: N, and M looks ...' line ('$line')"
	ROUNDS=${BASH_REMATCH[1]} LOOKS=${BASH_REMATCH[2]}
}
# churn SECONDS: a short process of a program already seen every 20 ms
churn() {
	local end=$((SECONDS + $1))
	while ((SECONDS < end)); do
		/bin/true
		sleep 0.02
	done
}

churn_known() {
	# true and sleep are seen once, and what the status runs (tally, awk):
	# their files are known from then on (a file not seen asks for 200 ms
	# rounds for a second)
	churn 1
	rounds_looks
	sleep 1.2
	rounds_looks
	local r0=$ROUNDS l0=$LOOKS
	churn 8
	rounds_looks
	local rounds=$((ROUNDS - r0)) looks=$((LOOKS - l0))
	note "8 s of known programs starting every 20 ms: $rounds rounds (one of them the status's), $looks looks"
	# every 4 s, the status's own (it reads the counts; its connection
	# waking the daemon is a look), and one or two that a file new to the
	# daemon asked for (this machine's own processes); once a second: 9 or
	# more; 200 ms apart: 40
	((rounds <= 5)) || fail "$rounds rounds in 8 s of known programs: the counts are read more often than every 4 s"
	((looks >= 12)) || fail "only $looks looks in 8 s of side-band records: the records are not looked at every 200 ms"
}
subtest "known programs: rounds every 4 s, looks between" churn_known

new_program() {
	local prog="$TMP/calm_fresh_$$"
	cp "$WORKLOADS/split_funcs" "$prog"
	churn 100 &
	local churner=$!
	BG_PIDS+=("$churner")
	sleep 1.5
	"$prog" 400 >/dev/null
	rm "$prog"
	kill "$churner"
	wait "$churner" 2>/dev/null || true
	ctl --db calm.db flush
	report_json fresh.json -i calm.db
	python3 - fresh.json "$(basename "$prog")" "$want" <<-'PY' >fresh.out || fail "$(cat fresh.out)"
	import json, sys
	rep, name, want = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
	mine = [i for e in rep["events"] for i in e["images"] if i["name"] == name]
	if not mine:
	    print("no image %s in the report" % name)
	    sys.exit(1)
	for i in mine:
	    if i["id_kind"] != "build-id" or i["id"] != want:
	        print("image %s is %s %s: its file, deleted as it ended, was not read while it ran (build-id %s)" % (name, i["id_kind"], i["id"], want))
	        sys.exit(1)
	print("%s: %d samples, build-id %s" % (name, sum(i["samples"] for i in mine), want))
	PY
	note "$(cat fresh.out)"
}
subtest "a new program among known ones is read while it runs" new_program

stop_daemon "$DAEMON_PID"
