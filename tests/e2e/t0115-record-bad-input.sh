#!/bin/bash
# record and the command line reject bad input with one line on stderr, a
# non-zero exit and no database left behind.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/exitcode"

bad() {
	local regex=$1
	shift
	expect_fail_with "$regex" "$TALLY" "$@"
	[[ ! -e db ]] || fail "'tally $*' was refused but created the database 'db'"
}

bad "^tally: .*nosuchcommand" nosuchcommand
bad "^tally: .*--bogus-option" record --bogus-option -o db -- "$W" 0
bad "^tally: .*--bogus-option" report --bogus-option -i db
bad "^tally: .*\<0\>" record -F 0 -o db -- "$W" 0
bad "^tally: .*abc" record -F abc -o db -- "$W" 0
bad "^tally: .*\<0\>" record -c 0 -o db -- "$W" 0
bad "^tally: .*nosuchevent.*tally events|^tally: .*tally events.*nosuchevent" \
	record -e nosuchevent -o db -- "$W" 0
bad "^tally: .*999" record -a -C 999 --duration 0.2 -o db
bad "^tally: .*-1" record -a --duration -1 -o db
bad "^tally: .*xyz" record -a --duration xyz -o db
bad "^tally: .*999999999" record -p 999999999 --duration 0.2 -o db
bad "^tally: .*(-a|-p)" record -o db
bad "^tally: .*/proc/nope/db" record -o /proc/nope/db -- "$W" 0
[[ ! -e /proc/nope ]] || fail "/proc/nope exists"
bad "^tally: .*-F.*-c|^tally: .*-c.*-F" record -F 999 -c 1000 -o db -- "$W" 0
bad "^tally: .*no event" record -e , -o db -- "$W" 0
bad "^tally: .*twice" record -e cpu-clock,cpu-clock -o db -- "$W" 0
bad "^tally: .*(COMMAND|-a|-p).*not several|^tally: .*cannot be combined" record -a -p 1 -o db
bad "^tally: .*COMMAND.*-a|^tally: .*not several" record -a -o db -- "$W" 0
maxrate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
if ((maxrate < 1000000)); then
	bad "^tally: .*perf_event_max_sample_rate" record -F $((maxrate + 1)) -o db -- "$W" 0
fi

# report's own refusals, on a real database
tally_ok record -o good -- "$W" 0
bad "^tally: .*--percent-limit.*abc" report -i good --percent-limit abc
bad "^tally: .*--percent-limit.*101" report -i good --percent-limit 101
bad "^tally: .*give one of" report -i good --symbols --children
bad "^tally: .*unexpected argument 'extra'" report -i good extra
bad "^tally: .*events.*unexpected argument|^tally: .*unexpected argument" events extra

# every command names a refused option the same way (one option parser)
for cmd in $("$TALLY" --list-cmds); do
	expect_fail_with "^tally: option '-Z' is unknown \(see 'tally $cmd --help'\)$" "$TALLY" $cmd -Z
	expect_fail_with "^tally: option '--no-such-option' is unknown \(see 'tally $cmd --help'\)$" "$TALLY" $cmd --no-such-option
done
# a long option without its value says so (it used to be 'unknown option or missing value')
for cv in record:output report:top annotate:input export:format scan:output daemon:db ctl:timeout; do
	expect_fail_with "^tally: option '--${cv#*:}' needs a value \(see 'tally ${cv%:*} --help'\)$" "$TALLY" "${cv%:*}" "--${cv#*:}"
done
expect_fail_with "^tally: option '--no-randomize' takes no value \(see 'tally record --help'\)$" "$TALLY" record --no-randomize=1 -- true
expect_fail_with "^tally: option '--s' is ambiguous \(--symbols, --sort, --samples, --since; see 'tally report --help'\)$" "$TALLY" report --s
for cv in record:o report:i annotate:i export:o scan:o daemon:d ctl:d; do
	expect_fail_with "^tally: option '-${cv#*:}' needs a value \(see 'tally ${cv%:*} --help'\)$" "$TALLY" "${cv%:*}" "-${cv#*:}"
done
