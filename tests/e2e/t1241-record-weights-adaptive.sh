#!/bin/bash
# Period weights of a counting event under -F: the kernel adapts the period of
# page-faults, so faultsplit's fault_a (75% of the faults, made fast) and
# fault_b (25%, made slowly) get about as many samples each per second; the
# database's weights still split the faults as the workload counted them (at
# least as well as `perf report` on the same event), where sample shares do not.
. "$SRCDIR/tests/e2e/lib.sh"

need_tool nm binutils
W="$WORKLOADS/faultsplit"

# one recording, under perf on the same event when perf is here (perf
# follows tally into the workload: the same run, the same kernel periods).
# The kernel adapts a counting event's period from its rate, and on a busy
# machine sometimes settles on periods so long (or throttles the event) that
# a run gets a handful of samples (7 once in CI, 200 to 270 otherwise), or
# reports periods adding up to far more events than happened (perf's "Event
# count" the same): then there is no split to judge, the figures are said,
# and the run is made again once before the test skips.
adaptive_run() {
	local rc=0 faults wt
	rm -rf pf.db pf.data
	if command -v perf >/dev/null 2>&1; then
		mkdir -p "$TMP/perfhome"
		HOME=$TMP/perfhome perf record -q -e page-faults -F 1000 -o pf.data -- \
			"$TALLY" record -e page-faults -F 1000 -o pf.db -- "$W" >"$TMP/out" 2>"$TMP/err" || rc=$?
		if ((rc != 0)) && [[ ! -s pf.data ]]; then
			rm -f pf.data
			note "perf cannot record page-faults here ($(head -c 300 "$TMP/err")): tally alone"
			tally_ok record -e page-faults -F 1000 -o pf.db -- "$W"
		elif ((rc != 0)); then
			fail "tally record under perf record exited $rc: $(head -c 1000 "$TMP/err")"
		fi
	else
		tally_ok record -e page-faults -F 1000 -o pf.db -- "$W"
	fi
	cp "$TMP/out" truth.txt
	python3 "$SRCDIR/tests/e2e/func_weights.py" pf.db "$W" fault_a fault_b >fw.txt || fail "cannot read the weights of pf.db"
	read -r _ sa wa < <(grep '^fault_a ' fw.txt)
	read -r _ sb wb < <(grep '^fault_b ' fw.txt)
	((sa + sb > 50)) ||
		busy "only $((sa + sb)) samples in fault_a and fault_b (throttled $(session_key pf.db throttled), lost $(session_key pf.db lost)): the kernel's adapted periods left too few to judge the split"
	# the weights are the periods the kernel reports: they must be this run's events
	faults=$(($(info_val faults_a truth.txt) + $(info_val faults_b truth.txt)))
	wt=$(session_key pf.db weight-total)
	awk -v w="$wt" -v f="$faults" 'BEGIN { d = (w - f) / f; exit !(d <= 0.05 && d >= -0.05) }' ||
		busy "the kernel's periods add up to $wt page faults for the $faults the workload made (more than 5% apart): its adapted periods are not this run's events"
	note "$((sa + sb)) samples; weight-total $wt for $faults faults counted by the workload"
}
retry_busy "a recording of page-faults under -F whose periods can be judged" adaptive_run
ta=$(truth fault_a truth.txt)
[[ $(session_key pf.db period-kind) == adaptive ]] || fail "page-faults under -F is not period-kind adaptive"
[[ $(session_key pf.db weight-unit) == events ]] || fail "page-faults weights are not in events"
read -r _ sa wa < <(grep '^fault_a ' fw.txt)
read -r _ sb wb < <(grep '^fault_b ' fw.txt)
wshare=$(awk -v a="$wa" -v b="$wb" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')
sshare=$(awk -v a="$sa" -v b="$sb" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')
note "fault_a: truth $ta%, weights $wshare% ($wa of $((wa + wb)) faults), samples $sshare% ($sa of $((sa + sb)))"
# the kernel counts the events between two samples to the second one, so at
# each switch between the functions up to one period lands on the other one
# (perf shows the same: a few points towards fault_a on a quiet machine, more
# when the machine is loaded and the adapted periods are coarse). The weights
# are held to 10 points of the truth, or, in a run whose periods were that
# coarse, to a third of what the sample shares are off by.
tol=$(awk -v s="$sshare" -v t="$ta" 'BEGIN { d = (s - t) / 3; if (d < 0) d = -d; printf "%.2f", (d > 10) ? d : 10 }')
awk -v w="$wshare" -v t="$ta" -v tol="$tol" 'BEGIN { d = w - t; exit !(d <= tol && d >= -tol) }' ||
	fail "fault_a weighs $wshare% of the faults, the workload counted $ta% (more than $tol points apart; the sample share $sshare%)"
# what the weights are for: the samples alone are far off
awk -v s="$sshare" -v t="$ta" 'BEGIN { d = s - t; exit !(d > 25 || d < -25) }' ||
	fail "fault_a's sample share $sshare% happened to be near the truth $ta% in this run"

# perf on the same event, of the same run, period-weighted as its reports are
[[ -s pf.data ]] || { echo "SKIPPED PART: no perf recording (above): no comparison with perf report"; exit 0; }
perf_report -i pf.data --sort sym --comm faultsplit >perf.txt || true
pa=$(awk '$NF == "fault_a" { sub(/%/, "", $1); print $1; exit }' perf.txt)
pb=$(awk '$NF == "fault_b" { sub(/%/, "", $1); print $1; exit }' perf.txt)
[[ -n $pa && -n $pb ]] || fail "perf report of the same run has no fault_a/fault_b rows: $(head -c 600 perf.txt)"
pshare=$(awk -v a="$pa" -v b="$pb" 'BEGIN { printf "%.2f", 100 * a / (a + b) }')
note "perf report, the same run: fault_a $pshare% of fault_a+fault_b"
# the same run, the same kernel periods: within the noise of the adaptation
# (the tolerance above)
awk -v w="$wshare" -v p="$pshare" -v tol="$tol" 'BEGIN { d = w - p; exit !(d <= tol && d >= -tol) }' ||
	fail "tally weighs fault_a at $wshare%, perf report of the same run at $pshare% (more than $tol points apart)"
