#!/bin/bash
# The CPU time the exports report is the process's, as the kernel accounted
# it (getrusage of the command, through tests/workloads/cputime; the wrapper's
# own fraction of a millisecond is not in it): for split_funcs (one
# thread) and threads (four at once), recorded at 999 Hz with the period
# randomized, pprof's cpu total (go tool pprof -raw), callgrind's total
# (callgrind_annotate) and gmon's time for the program's own image (gprof,
# against the kernel's time times the image's share in the report) are
# within 1% of it.  Each sample must count for its own period: samples times
# one drawn period are off by up to the randomization's spread (~10%).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

# within A B [ABS]: A within 1% of B, and ABS more (a figure shown rounded)
within() {
	awk -v a="$1" -v b="$2" -v d="${3:-0}" 'BEGIN { exit !(b > 0 && a >= 0.99 * b - d && a <= 1.01 * b + d) }'
}
pct_off() {
	awk -v a="$1" -v b="$2" 'BEGIN { x = b > 0 ? 100 * (a - b) / b : 0; printf "%+.2f%%", x }'
}

# run LABEL WORKLOAD ARGS...: record it at 999 Hz, randomized, under cputime
run() {
	local label=$1 w=$2
	shift 2
	tally_ok record -F 999 -o "$label.db" -- "$WORKLOADS/cputime" "$WORKLOADS/$w" "$@"
	cp out "$label.out"
	[[ $(session_key "$label.db" randomized) == yes ]] ||
		fail "$label: the session is not randomized: $(session_key "$label.db" randomized)"
	[[ $(session_key "$label.db" sampling) == "frequency 999" ]] ||
		fail "$label: sampling is '$(session_key "$label.db" sampling)', expected frequency 999"
	report_json "$label.json" -i "$label.db"
}

# check LABEL IMAGE: the exports' CPU time against the kernel's
check() {
	local label=$1 img=$2 k pp cg share gm msg=""
	k=$(info_val cpu_ns "$label.out")
	((k > 500000000)) || fail "$label: the kernel accounted only $k ns of CPU time"

	need_tool go golang-go
	tally_ok export -i "$label.db" --format pprof -o "$label.pb.gz"
	gopprof_ok "$label.raw" -raw "$label.pb.gz"
	grep -q '^samples/count cpu/nanoseconds\[dflt\]$' "$label.raw" ||
		fail "$label: pprof's sample types: $(sed -n '/^Samples:/{n;p}' "$label.raw")"
	pp=$(awk '/^Samples:/ { on = 1; getline; next } /^Locations/ { on = 0 } on && $2 ~ /^[0-9]+:$/ { sub(":", "", $2); s += $2 } END { printf "%.0f\n", s }' "$label.raw")

	need_tool callgrind_annotate valgrind
	tally_ok export -i "$label.db" --format callgrind -o "$label.cg"
	grep -q '^event: cpu-clock : cpu-clock nanoseconds$' "$label.cg" || fail "$label: callgrind's event line does not say nanoseconds"
	callgrind_annotate --threshold=100 "$label.cg" >"$label.cga" 2>/dev/null || fail "$label: callgrind_annotate failed"
	cg=$(awk '/PROGRAM TOTALS/ { gsub(",", ""); print $1; exit }' "$label.cga")

	need_tool gprof binutils
	tally_ok export -i "$label.db" --format gmon --image "$img" -o "$label.gmon"
	gprof -b -p "$WORKLOADS/$img" "$label.gmon" >"$label.gprof" 2>/dev/null || fail "$label: gprof failed"
	grep -q 'Each sample counts as 0.0001 seconds' "$label.gprof" || fail "$label: gprof: $(grep 'Each sample' "$label.gprof")"
	# the largest cumulative seconds: the image's whole time
	gm=$(awk '$1 ~ /^[0-9.]+$/ && $2 ~ /^[0-9.]+$/ && NF >= 4 { if ($2 > m) m = $2 } END { printf "%.0f\n", m * 1e9 }' "$label.gprof")
	share=$(python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["events"][0]; print([i["value"] for i in e["images"] if i["name"] == sys.argv[2]][0] / e["value"])' "$label.json" "$img") ||
		fail "$label: no image $img in the report"

	note "$label: kernel $k ns; pprof $pp ($(pct_off "$pp" "$k")), callgrind $cg ($(pct_off "$cg" "$k")), gmon of $img $gm ($(pct_off "$gm" "$(awk -v k="$k" -v s="$share" 'BEGIN { printf "%.0f", k * s }')") of the kernel's time x its share $share)"
	within "$pp" "$k" || msg+="pprof's cpu total $pp ns is $(pct_off "$pp" "$k") off the kernel's $k ns; "
	within "$cg" "$k" || msg+="callgrind's total $cg ns is $(pct_off "$cg" "$k") off the kernel's $k ns; "
	# gprof shows the cumulative seconds to 0.01 s: half of that more
	within "$gm" "$(awk -v k="$k" -v s="$share" 'BEGIN { printf "%.0f", k * s }')" 5000000 ||
		msg+="gmon's time of $img, $gm ns, is $(pct_off "$gm" "$(awk -v k="$k" -v s="$share" 'BEGIN { printf "%.0f", k * s }')") off the kernel's time x its share; "
	[[ -z $msg ]] || fail "$label (period-mean $(session_key "$label.db" period-mean), format $(session_key "$label.db" format-version)): $msg"
}

one() {
	run sf split_funcs 2000
	check sf split_funcs
}
many() {
	run th threads 4 500
	check th threads
}

subtest "one thread (split_funcs): pprof, callgrind and gmon within 1% of the kernel's CPU time" one
subtest "four threads: pprof, callgrind and gmon within 1% of the kernel's CPU time" many
