#!/bin/bash
# a full disk never stops the daemon and never fills the disk silently:
# --max-db-size reached, or a filesystem that runs out of space (a small
# tmpfs), makes it stop writing with a logged error (flush and drain say
# so) while it keeps collecting; the database stays readable; when space
# comes back, writing resumes.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

# writing_is DB REGEX: the daemon's status says 'writing:' matching REGEX
writing_is() {
	ctl --db "$1" status
	[[ $(status_val writing) =~ $2 ]]
}
# wait_writing DB WHAT REGEX: status 'writing:' matches REGEX within 60 s
wait_writing() {
	WAIT_DB=$1
	wait_state() { echo "writing: $(status_val writing); the log: $(tail -3 "$WAIT_DB/daemon.log" 2>/dev/null)"; }
	wait_for 60 "$2: 'writing:' matching /$3/" writing_is "$1" "$3"
}
# samples_over DB N: the daemon's status counts more than N samples taken
samples_over() {
	ctl --db "$1" status
	(($(status_val samples) > $2))
}

# both parts under load (the daemon samples the whole machine)
start_load

# 1. --max-db-size
max_db_size() {
	local s1 s2 size
	start_daemon cap --max-db-size 96k --flush-interval 100ms -g
	wait_writing cap "--max-db-size 96k" '^stopped: .*--max-db-size'
	note "writing: $(status_val writing)"
	s1=$(status_val samples)
	grep -q "writing stopped, collection goes on: .*--max-db-size" cap/daemon.log || fail "the log does not say writing stopped"
	expect_fail_with "^tally: .*over --max-db-size" "$TALLY" ctl --db cap flush
	expect_fail_with "^tally: cannot drain: writing is stopped" "$TALLY" ctl --db cap drain -o x
	ctl --db cap status
	[[ $(status_val state) == running ]] || fail "the daemon is not collecting after writing stopped"
	wait_state() { echo "status: samples $(status_val samples), state $(status_val state)"; }
	wait_for 30 "samples taken after writing stopped (over $s1)" samples_over cap "$s1"
	s2=$(status_val samples)
	size=$(du -s -B1 --exclude='daemon.log*' cap | cut -f1)
	((size <= 96 * 1024)) || fail "the database grew to $size bytes, over --max-db-size 96k"
	db_total cap >/dev/null
	stop_daemon "$DAEMON_PID"
	note "--max-db-size: stopped at $size bytes, still collecting ($s1 -> $s2 samples), readable"
}

# 2. a filesystem that fills up: an 8 MiB tmpfs, all but 40 KiB of it taken by
# a filler file (the epoch, of the whole machine, grew past 1 MiB on a busy
# one: a 1 MiB tmpfs could not take it even once the filler was gone)
full_fs() {
	local avail t1 t2
	((EUID == 0)) || skip "mounting a small tmpfs needs root"
	mkdir small
	mount -t tmpfs -o size=8m,mode=700 tmpfs small 2>mount.err || skip "cannot mount a tmpfs: $(cat mount.err)"
	at_exit 'kill -KILL $DAEMON_PID 2>/dev/null || true; umount -l "$TMP/small" 2>/dev/null || true'
	start_daemon small/db --min-free 0 --flush-interval 100ms
	avail=$(df -B1 --output=avail small | tail -1)
	head -c $((avail - 40 * 1024)) /dev/zero >small/filler 2>/dev/null || true
	wait_writing small/db "a full filesystem" '^stopped: .*(No space left|free)'
	note "full filesystem: writing: $(status_val writing)"
	db_total small/db >/dev/null
	t1=$(tjson "$TMP/total.json" total)
	rm small/filler
	wait_writing small/db "space freed" '^ok$'
	grep -q "writing resumed" small/db/daemon.log || fail "the log does not say writing resumed"
	stop_daemon "$DAEMON_PID"
	t2=$(db_total small/db)
	((t2 > t1)) || fail "after space came back nothing more was written ($t1, then $t2 samples)"
	note "space freed: writing resumed, $t1 -> $t2 samples"
}

subtest "--max-db-size: writing stops, collection goes on" max_db_size
subtest "a full filesystem: writing stops, then resumes" full_fs
