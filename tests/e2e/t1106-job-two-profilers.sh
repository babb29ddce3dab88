#!/bin/bash
# several profilers at once: started in the order added, stopped in reverse,
# each with its own results, neither disturbing the other; tally next to
# Linux perf around a workload with a known split (perf's view beside
# tally's), when perf is installed; -a samples the whole system.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# two plugins that log their steps into one file
mkdir -p plugins/first plugins/second
for p in first second; do
	cat >plugins/$p/profiler <<EOF
#!/bin/sh
case \$1 in
version) echo 1 ;;
start|stop|report) echo "\$1 $p" >>"$TMP/order.log" ;;
esac
exit 0
EOF
	chmod +x plugins/$p/profiler
done

order() {
	: >order.log
	printf 'profilers add first\nprofilers add second\nrun sleeptest 0\n' >o.ctl
	job_ok o.ctl --profilers-path "$TMP/plugins"
	[[ $(tr '\n' ' ' <order.log) == "start first start second stop second stop first report first report second " ]] ||
		fail "steps in the order: $(tr '\n' ' ' <order.log) (expected start in the order added, stop in reverse)"
}

tally_and_perf() {
	need_tool perf linux-perf
	perf record -a -o /dev/null -- true >/dev/null 2>&1 || skip "perf record -a cannot run here"
	cat >tp.ctl <<EOF
profilers add perf
profilers add tally -F 2000
profilers only on
run -- $WORKLOADS/split_funcs 800
EOF
	job_ok tp.ctl
	local d=results/tp/split_funcs/profiling
	grep -qx 'profiling complete' results/tp/split_funcs/status || fail "status: $(cat results/tp/split_funcs/status)"
	awk '$1 == "truth"' results/tp/split_funcs/output >truth.txt
	report_json sym.json -i $d/tally.db --symbols
	check_shares func sym.json truth.txt 6 work_a work_b work_c
	# perf's own view of the same run: its shares of the three, from perf report --sort sym
	local a b c tot
	a=$(awk '$NF == "work_a" { sub("%", "", $1); print $1 }' $d/perf.sym.txt)
	b=$(awk '$NF == "work_b" { sub("%", "", $1); print $1 }' $d/perf.sym.txt)
	c=$(awk '$NF == "work_c" { sub("%", "", $1); print $1 }' $d/perf.sym.txt)
	[[ -n $a && -n $b && -n $c ]] || fail "perf.sym.txt does not name the three functions: $(grep -v '^#' $d/perf.sym.txt | head -5)"
	tot=$(awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN { print a + b + c }')
	near "$(awk -v a="$a" -v t="$tot" 'BEGIN { printf "%.2f", 100 * a / t }')" "$(truth work_a truth.txt)" 8 "perf's work_a share"
	grep -q split_funcs $d/perf.dso.txt || fail "perf.dso.txt names no split_funcs"
	[[ -s $d/perf.data && -f $d/perf.log ]] || fail "perf.data or perf.log missing: $(ls $d)"
}

system_wide() {
	cat >sw.ctl <<EOF
profilers add tally -a -F 500
profilers only on
run -- $WORKLOADS/split_funcs 300
EOF
	job_ok sw.ctl
	grep -qx 'target: system' results/sw/split_funcs/profiling/tally.db/session ||
		fail "tally -a did not record the whole system: $(grep target results/sw/split_funcs/profiling/tally.db/session)"
	# without -a: the test's process
	grep -Eqx 'target: pids [0-9]+' results/tp/split_funcs/profiling/tally.db/session 2>/dev/null ||
		[[ ! -d results/tp ]] || fail "without -a: $(grep target results/tp/split_funcs/profiling/tally.db/session)"
	report_json swsym.json -i results/sw/split_funcs/profiling/tally.db --symbols
	(($(tjson swsym.json func work_a) > 0)) || fail "-a: the test's work_a is not in the profile"
}

subtest "start in the order added, stop in reverse" order
subtest "tally and perf at once, both give the split" tally_and_perf
subtest "tally -a: the whole system around the test" system_wide
