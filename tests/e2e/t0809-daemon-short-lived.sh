#!/bin/bash
# short-lived processes keep their images: programs that live a few
# milliseconds each, whose file is then deleted or replaced by another
# program before any flush, are in the database under the build-id of the
# file they ran (identified when they mapped it, not looked up later), and
# a copy of that file put back later is symbolized. Under the daemon's
# default (samples counted in the kernel where it can: the mapping of a file
# not seen before makes a round within 200 ms, so its identity does not wait
# for the once-a-second read of the counts) and with every sample through the
# ring.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

command -v readelf >/dev/null || skip "readelf (binutils) is needed to read build-ids"
bid() { readelf -n "$1" | awk '/Build ID:/ { print $3; exit }'; }
want=$(bid "$WORKLOADS/split_funcs")
other=$(bid "$WORKLOADS/sleeper")
[[ -n $want && -n $other && $want != "$other" ]] || skip "the workloads have no distinct build-ids ($want, $other)"

# short_lived DB [DAEMON OPTIONS]: the run above under one daemon
short_lived() {
	local db=$1 gone swapped n
	shift
	start_daemon $db "$@" --flush-interval 1h
	gone="$TMP/brief_gone_${db%.db}_$$"
	swapped="$TMP/brief_swapped_${db%.db}_$$"
	cp "$WORKLOADS/split_funcs" "$gone"
	cp "$WORKLOADS/split_funcs" "$swapped"
	# 40 processes of about 10 ms of CPU each
	for ((i = 0; i < 20; i++)); do
		"$gone" 10 >/dev/null
		"$swapped" 10 >/dev/null
	done
	# before any flush: one file deleted, the other replaced by another program
	rm "$gone"
	cp "$WORKLOADS/sleeper" "$swapped.new"
	mv "$swapped.new" "$swapped"
	ctl --db $db flush

	python3 - $db "$(basename "$gone")" "$(basename "$swapped")" "$want" >$db.ids.out <<-'PY' || fail "$(cat $db.ids.out)"
	import json, subprocess, sys
	db, names, want = sys.argv[1], sys.argv[2:4], sys.argv[4]
	tally = __import__("os").environ["TALLY"]
	rep = json.loads(subprocess.run([tally, "report", "--json", "-i", db], check=True, capture_output=True).stdout)
	imgs = [i for e in rep["events"] for i in e["images"]]
	for n in names:
	    mine = [i for i in imgs if i["name"] == n]
	    if not mine:
	        print("no image %s in the report; images: %s" % (n, sorted(set(i["name"] for i in imgs))))
	        sys.exit(1)
	    for i in mine:
	        if i["id_kind"] != "build-id" or i["id"] != want:
	            print("image %s is %s %s, expected the build-id %s of the program that ran" % (n, i["id_kind"], i["id"], want))
	            sys.exit(1)
	    print(n, sum(i["samples"] for i in mine), "samples, build-id", want)
	PY
	note "$(tr '\n' ';' <$db.ids.out)"

	# the deleted program put back: its functions are named again
	cp "$WORKLOADS/split_funcs" "$gone"
	report_json $db.sym.json -i $db --symbols --image "$(basename "$gone")"
	n=$(tjson $db.sym.json funcs "$(basename "$gone")" | grep -c '^work_[abc]$' || true)
	((n > 0)) || fail "a copy of the program put back is not symbolized: $(tjson $db.sym.json funcs | tr '\n' ' ')"
	# the file now at the replaced path is another program: never used to name it
	report_json $db.swap.json -i $db --symbols --image "$(basename "$swapped")"
	tjson $db.swap.json funcs | grep '^sleeper_burn$' >/dev/null && fail "the replaced program was symbolized with the new file's functions"
	note "symbolized again once the file is back; the replaced path is not misread"
	ctl --db $db status
	note "$db: samples $(status_val sample-mechanism)"
	stop_daemon "$DAEMON_PID"
}

short_lived default.db
short_lived ring.db --sample-mechanism ring
