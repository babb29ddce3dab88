#!/bin/bash
# external profilers: the example plugin of docs/job.md, as printed there,
# runs around a test and reports; setup runs once across jobs and again after
# a version change, once for two jobs started together; the steps get their
# arguments and the TALLY_* environment; the profilers path is searched in
# order (--profilers-path, then TALLY_PROFILERS_PATH); tally job profilers
# lists what it finds.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

example_plugin "$TMP/plugins"

example_runs() {
	printf 'profilers add loadavg 0.02\nrun sleeptest 0.3\n' >ex.ctl
	job_ok ex.ctl --profilers-path "$TMP/plugins"
	local d=results/ex/sleeptest/profiling n
	n=$(awk '$1 == "samples" { print $2 }' $d/loadavg.txt)
	((n >= 5)) || fail "the example plugin's report says $n samples of a 0.3 s test every 0.02 s: $(cat $d/loadavg.txt)"
	[[ ! -e $d/.loadavg.pid ]] || fail "the example's stop did not run"
	no_leftovers "$TMP/state/loadavg/sampler"
	grep -q "^SETUP loadavg 1 " "$TMP/job.out" || fail "no SETUP line: $(cat "$TMP/job.out")"
	[[ $(sjson results/ex/status.json "s['profilers'][0]['setup']") == ran ]] || fail "status.json: setup not 'ran'"
	[[ $(sjson results/ex/status.json "s['profilers'][0]['version']") == 1 ]] || fail "status.json: version not 1"
}

setup_once() {
	local i
	for i in 1 2 3; do
		printf 'profilers add loadavg\nrun sleeptest 0\n' >once$i.ctl
		job_ok once$i.ctl --profilers-path "$TMP/plugins"
	done
	[[ $(grep -c 'set up' "$TMP/state/loadavg/setup.log") == 1 ]] ||
		fail "setup ran $(grep -c 'set up' "$TMP/state/loadavg/setup.log") times over four jobs of one version"
	[[ $(sjson results/once3/status.json "s['profilers'][0]['setup']") == current ]] || fail "status.json: setup not 'current'"
	"$TALLY" job profilers --profilers-path "$TMP/plugins" >list.txt
	grep -Eq '^loadavg +1 +yes +'"$TMP/plugins/loadavg"'$' list.txt || fail "job profilers: $(cat list.txt)"
	# a new version: set up again, once
	sed -i 's/^VERSION=1$/VERSION=2/' "$TMP/plugins/loadavg/profiler"
	"$TALLY" job profilers --profilers-path "$TMP/plugins" >list.txt
	grep -Eq '^loadavg +2 +old \(1\)' list.txt || fail "job profilers after a version change: $(cat list.txt)"
	for i in 4 5; do
		printf 'profilers add loadavg\nrun sleeptest 0\n' >once$i.ctl
		job_ok once$i.ctl --profilers-path "$TMP/plugins"
	done
	[[ $(grep -c 'set up version 2' "$TMP/state/loadavg/setup.log") == 1 ]] ||
		fail "after the version change setup ran $(grep -c 'set up version 2' "$TMP/state/loadavg/setup.log") times: $(cat "$TMP/state/loadavg/setup.log")"
}

setup_together() {
	# a slow setup, two jobs at once: one sets up, the other waits and finds it done
	mkdir -p slow/slowset
	sed 's/^\tchmod +x "\$TALLY_SRCDIR\/sampler"$/&; sleep 1/' "$TMP/plugins/loadavg/profiler" >slow/slowset/profiler
	grep -q 'sleep 1$' slow/slowset/profiler || fail "could not slow the example's setup down"
	chmod +x slow/slowset/profiler
	printf 'profilers add slowset\nrun sleeptest 0\n' >t1.ctl
	cp t1.ctl t2.ctl
	"$TALLY" job run --profilers-path "$TMP/slow" t1.ctl >t1.out 2>&1 &
	local p1=$!
	"$TALLY" job run --profilers-path "$TMP/slow" t2.ctl >t2.out 2>&1 || fail "second job: $(cat t2.out)"
	wait $p1 || fail "first job: $(cat t1.out)"
	[[ $(grep -c 'set up' "$TMP/state/slowset/setup.log") == 1 ]] ||
		fail "two jobs started together set up $(grep -c 'set up' "$TMP/state/slowset/setup.log") times"
}

environment() {
	mkdir -p envp/envdump
	cat >envp/envdump/profiler <<'EOF'
#!/bin/sh
case $1 in
version) echo 7 ;;
start|stop|report)
	step=$1; shift
	echo "$step args=$* profdir=$TALLY_PROFDIR srcdir=$TALLY_SRCDIR test=$TALLY_TEST iteration=$TALLY_ITERATION pid=${TALLY_TEST_PID:+set}" >>"$TALLY_PROFDIR/env.txt" ;;
esac
exit 0
EOF
	chmod +x envp/envdump/profiler
	cat >env.ctl <<'EOF'
profilers add envdump "two words" x
profilers only on
run --iterations 2 --tag t -- true
EOF
	job_ok env.ctl --profilers-path "$TMP/envp"
	local d=$PWD/results/env/t/profiling/iteration.2
	grep -qxF "start args=two words x profdir=$d srcdir=$TMP/state/envdump test=t iteration=2 pid=set" $d/env.txt ||
		fail "environment of start: $(cat $d/env.txt)"
	grep -q "^report args=two words x profdir=$d " $d/env.txt || fail "report: $(cat $d/env.txt)"
}

path_order() {
	mkdir -p first/p second/p third/p
	for d in first second third; do
		printf '#!/bin/sh\n[ "$1" = version ] && echo %s\nexit 0\n' "$d" >$d/p/profiler
		chmod +x $d/p/profiler
	done
	"$TALLY" job profilers --profilers-path "$TMP/second" >l1.txt
	grep -Eq '^p +second ' l1.txt || fail "--profilers-path: $(cat l1.txt)"
	TALLY_PROFILERS_PATH="$TMP/third:$TMP/first" "$TALLY" job profilers --profilers-path "$TMP/second" >l2.txt
	grep -Eq '^p +second +no ' l2.txt || fail "--profilers-path comes first: $(cat l2.txt)"
	grep -Eq '^p +third +shadowed ' l2.txt || fail "a later one of the same name is listed as shadowed: $(cat l2.txt)"
	grep -q "^searched: $TMP/second:$TMP/third:$TMP/first:/usr/lib/tally/profilers$" l2.txt || fail "searched: $(cat l2.txt)"
	printf 'profilers add p\nrun sleeptest 0\n' >po.ctl
	TALLY_PROFILERS_PATH="$TMP/third" job_ok po.ctl
	[[ $(sjson results/po/status.json "s['profilers'][0]['version']") == third ]] || fail "TALLY_PROFILERS_PATH not used"
}

subtest "the example plugin of docs/job.md" example_runs
subtest "setup once across jobs, again after a version change" setup_once
subtest "two jobs started together set up once" setup_together
subtest "arguments and TALLY_* environment" environment
subtest "the profilers path, in order" path_order
