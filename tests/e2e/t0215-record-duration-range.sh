#!/bin/bash
# Durations are finite and in range everywhere they are taken: a 309-digit
# number of days is finite text for strtod but +inf once scaled, and was
# accepted by --duration, the daemon's --flush-interval, --ctl-timeout, --keep
# and --epoch-every, ctl --timeout, and turned by --since/--until into a time_t
# cast of -inf.  Each is refused at once with one line saying the range; the
# largest allowed value (36525d) is still accepted.
. "$SRCDIR/tests/e2e/lib.sh"

huge="1$(printf '0%.0s' $(seq 308))d"
range="at most 36525d"

# run CMD...: at most 10 s (an accepted daemon would keep running), one line, exit 2
refused() {
	local what=$1
	shift
	expect_fail_with "^tally: invalid $what '1000.*': expected a duration .*$range" timeout 10 "$TALLY" "$@"
	((LAST_RC == 2)) || fail "'$*' exited $LAST_RC, expected 2 (a usage error)"
}

refused --duration record --duration "$huge" -o rec.db -- true
[[ ! -e rec.db ]] || fail "record made a database though its --duration was refused"
for opt in --flush-interval --ctl-timeout --keep --epoch-every; do
	refused "$opt" daemon --foreground --db "d$opt" "$opt" "$huge"
	[[ ! -e "d$opt/daemon.pid" ]] || fail "the daemon started with $opt $huge"
done
refused --timeout ctl --timeout "$huge" --socket "$TMP/none.sock" status
refused --since report -i nope.db --since "$huge"
refused --until export -i nope.db --format folded --until "$huge"

# a value past the bound, with a unit that makes it so
expect_fail_with "^tally: invalid --duration '36526d': .*$range" "$TALLY" record --duration 36526d -o rec.db -- true

# the bound itself is a duration: accepted (the run ends with the command)
tally_ok record --duration 36525d -F 99 -o ok.db -- true
[[ -f ok.db/session ]] || fail "record --duration 36525d wrote no database"
# and --since 36525d selects a database recorded now (100 years ago is before it)
tally_ok report -i ok.db --since 36525d
