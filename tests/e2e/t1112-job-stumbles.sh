#!/bin/bash
# a user's stumbles, each told right: a step that prints more than 64 KiB and
# fails is known by its last line (a version by its first).
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

subtest "a step that prints more than 64 KiB: its last line, its version's first" long_output
