#!/bin/bash
# a user's stumbles, each told right: a step that prints more than 64 KiB and
# fails is known by its last line (a version by its first); a full disk
# ends the job ERROR, its error naming the file whole, never with
# status.json saying RUNNING; autotest's Python form
# (job.profilers.add("tally")) is told what to write; a --tag given is
# never renamed (an automatic tag steps aside, a second --tag of the same
# name is refused); a test interrupted before its profiled iteration says
# interrupted, not failed; a plugin's version with escape sequences reaches
# no terminal raw.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-job.sh"

long_output() {
	mkdir -p plugins/loud
	cat >plugins/loud/profiler <<'EOF'
#!/bin/sh
noise() { i=0; while [ $i -lt 4000 ]; do echo "noise line $i of a plugin that says a lot"; i=$((i + 1)); done; }
case $1 in
version) echo 7; noise ;;
initialize) noise; echo "the real reason" >&2; exit 1 ;;
esac
exit 0
EOF
	chmod +x plugins/loud/profiler
	printf 'profilers add loud\nrun sleeptest 0\n' >loud.ctl
	expect_fail_with "^tally: 'loud.ctl' line 1: profiler 'loud' failed at initialize \(exit status 1\): the real reason$" \
		"$TALLY" job run --profilers-path "$TMP/plugins" loud.ctl
	"$TALLY" job profilers --profilers-path "$TMP/plugins" >list.txt
	grep -Eq '^loud +7 ' list.txt || fail "the version of a plugin that prints a lot: $(grep loud list.txt)"
}

full_disk() {
	((EUID == 0)) || skip "mounting a small tmpfs needs root"
	mkdir small
	mount -t tmpfs -o size=2m,mode=700 tmpfs small 2>mount.err || skip "cannot mount a tmpfs: $(cat mount.err)"
	at_exit "umount -l '$TMP/small'"
	printf 'run --tag fill -- sh -c "cat /dev/zero >%s/small/fill"\nrun sleeptest 0\n' "$TMP" >full.ctl
	expect_fail_with "^tally: cannot write '$TMP/small/res/fill/status': No space left on device$" "$TALLY" job run -r small/res full.ctl
	((LAST_RC == 1)) || fail "exit $LAST_RC"
	[[ $(sjson small/res/status.json "s['status']") == ERROR ]] || fail "status.json after a full disk says $(sjson small/res/status.json "s['status']")"
	sjson small/res/status.json "s['error']" | grep -q 'No space left on device' || fail "status.json's error: $(sjson small/res/status.json "s.get('error')")"
	[[ ! -e small/res/.status-reserve ]] || fail "the room kept for status.json is left in the results"
}

python_form() {
	printf 'job.profilers.add("tally")\njob.run_test("sleeptest", seconds=1)\n' >py.ctl
	expect_fail_with "^tally: 'py.ctl' line 1: unknown command 'job.profilers.add\(tally\)': a control file is not Python, write 'profilers add tally'$" \
		"$TALLY" job run py.ctl
	((LAST_RC == 2)) || fail "exit $LAST_RC"
}

tags() {
	printf 'run sleeptest 0\nrun sleeptest 0\nrun --tag sleeptest.2 -- true\n' >tg.ctl
	job_ok tg.ctl
	[[ $(sjson results/tg/status.json "[(t['tag'], t['line']) for t in s['tests']]") == '[["sleeptest", 1], ["sleeptest.3", 2], ["sleeptest.2", 3]]' ]] ||
		fail "tags: $(sjson results/tg/status.json "[(t['tag'], t['line']) for t in s['tests']]")"
	[[ -d results/tg/sleeptest.2 && -d results/tg/sleeptest.3 ]] || fail "$(ls results/tg)"
	printf 'run --tag a sleeptest 0\nrun --tag a -- true\n' >tg2.ctl
	expect_fail_with "^tally: 'tg2.ctl' line 2: tag 'a' is already given on line 1 \(each run's results need a tag of their own\)$" "$TALLY" job run tg2.ctl
}

interrupted_unprofiled() {
	printf 'profilers add cmd true\nrun --tag t -- sh -c "echo started; exec sleep 1000.1112"\n' >iu.ctl
	"$TALLY" job run iu.ctl >iu.out 2>iu.err </dev/null &
	local pid=$! rc=0
	track_pid $pid
	wait_for_line results/iu/t/output '^started$' 30
	kill -INT $pid
	wait $pid || rc=$?
	((rc == 130)) || fail "exit $rc: $(cat iu.err)"
	grep -qx 'profiling not run: the test was interrupted before its profiled iteration' results/iu/t/status ||
		fail "status: $(cat results/iu/t/status)"
}

version_escaped() {
	mkdir -p plugins/esc
	printf '#!/bin/sh\n[ "$1" = version ] && printf "1\\033]0;owned\\007\\033[2J\\n"\nexit 0\n' >plugins/esc/profiler
	chmod +x plugins/esc/profiler
	printf 'profilers add esc\nrun sleeptest 0\n' >esc.ctl
	job_ok esc.ctl --profilers-path "$TMP/plugins"
	! grep -q $'\033' job.out || fail "a plugin's version reached the terminal raw: $(cat -v job.out)"
	grep -qF 'SETUP esc 1\x1b]0;owned\x07\x1b[2J (' job.out || fail "the SETUP line: $(cat -v job.out)"
	"$TALLY" job profilers --profilers-path "$TMP/plugins" >esc.txt
	! grep -q $'\033' esc.txt || fail "job profilers printed a plugin's version raw: $(cat -v esc.txt)"
}

subtest "a step that prints more than 64 KiB: its last line, its version's first" long_output
subtest "a full disk: status.json ERROR, not RUNNING" full_disk
subtest "autotest's Python form: what to write instead" python_form
subtest "a --tag given is never renamed" tags
subtest "interrupted before its profiled iteration: says interrupted" interrupted_unprofiled
subtest "a plugin's version is printed escaped" version_escaped
