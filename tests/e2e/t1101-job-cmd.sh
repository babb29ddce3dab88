#!/bin/bash
# the cmd profiler: a command started before the test and stopped after it
# (SIGINT first) leaves its log in profiling/; two at once get their own
# logs; what is quoted in the control file reaches it as one word, without a
# shell; nothing of it is left running.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

# a command that says when it starts, ticks, and says which signal ended it
cat >ticker <<'EOF'
#!/bin/bash
trap 'echo "got INT"; exit 0' INT
trap 'echo "got TERM"; exit 0' TERM
echo "start $1"
while :; do echo tick; sleep 0.02; done
EOF
chmod +x ticker

cmd_log() {
	cat >cmd.ctl <<EOF
profilers add cmd '$TMP/ticker "one word"'
run sleeptest 1
EOF
	job_ok cmd.ctl
	local log=results/cmd/sleeptest/profiling/cmd-ticker.log n
	[[ -f $log ]] || fail "no cmd log: $(ls -R results/cmd)"
	head -n 1 $log | grep -qx 'start one word' || fail "the quoted argument did not arrive as one word: $(head -n 1 $log)"
	n=$(grep -c tick $log)
	((n >= 5)) || fail "only $n ticks in the log of a command around a 1 s test"
	grep -qx 'got INT' $log || fail "cmd was not stopped with SIGINT first: $(tail -n 2 $log)"
	grep -q 'profiling complete' results/cmd/sleeptest/status || fail "status: $(cat results/cmd/sleeptest/status)"
	no_leftovers "$TMP/ticker"
	note "$n ticks, stopped by SIGINT"
}

two_cmds() {
	cat >two.ctl <<EOF
profilers add cmd $TMP/ticker a
profilers add cmd $TMP/ticker b
run sleeptest 1
EOF
	job_ok two.ctl
	local d=results/two/sleeptest/profiling
	[[ $(head -n 1 $d/cmd-ticker.log) == "start a" && $(head -n 1 $d/cmd-ticker.2.log) == "start b" ]] ||
		fail "two cmd profilers did not get a log each: $(ls $d)"
	[[ $(sjson results/two/status.json "[p['label'] for p in s['profilers']]") == '["cmd-ticker", "cmd-ticker.2"]' ]] ||
		fail "labels: $(sjson results/two/status.json "s['profilers']")"
	no_leftovers "$TMP/ticker"
}

ignores_int() {
	# a command that ignores SIGINT gets SIGTERM after the grace period
	cat >stubborn <<'EOF'
#!/bin/bash
trap '' INT
trap 'echo "got TERM"; exit 0' TERM
while :; do sleep 0.02; done
EOF
	chmod +x stubborn
	# (the test lasts long enough for the command to set its traps first)
	printf 'profilers add cmd %s\nrun sleeptest 1\n' "$TMP/stubborn" >stub.ctl
	job_ok stub.ctl
	grep -qx 'got TERM' results/stub/sleeptest/profiling/cmd-stubborn.log || fail "no SIGTERM after SIGINT was ignored"
	no_leftovers "$TMP/stubborn"
}

subtest "cmd leaves its log" cmd_log
subtest "two cmd profilers at once" two_cmds
subtest "SIGTERM after the grace period" ignores_int
