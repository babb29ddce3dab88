#!/bin/bash
# a full disk never stops the daemon and never fills the disk silently:
# --max-db-size reached, or a filesystem that runs out of space (a small
# tmpfs), makes it stop writing with a logged error (flush and drain say
# so) while it keeps collecting; the database stays readable; when space
# comes back, writing resumes.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

# wait_writing DB WHAT REGEX: status 'writing:' matches REGEX within 15 s
wait_writing() {
	local i
	for ((i = 0; i < 150; i++)); do
		ctl --db "$1" status
		[[ $(status_val writing) =~ $3 ]] && return 0
		sleep 0.1
	done
	fail "$2: 'writing: $(status_val writing)' after 15 s, expected /$3/"
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
	sleep 0.3
	ctl --db cap status
	[[ $(status_val state) == running ]] || fail "the daemon is not collecting after writing stopped"
	s2=$(status_val samples)
	((s2 > s1)) || fail "no samples were taken after writing stopped ($s1, then $s2)"
	size=$(du -s -B1 --exclude='daemon.log*' cap | cut -f1)
	((size <= 96 * 1024)) || fail "the database grew to $size bytes, over --max-db-size 96k"
	db_total cap >/dev/null
	stop_daemon "$DAEMON_PID"
	note "--max-db-size: stopped at $size bytes, still collecting ($s1 -> $s2 samples), readable"
}

# 2. a filesystem that fills up: a 1 MiB tmpfs, most of it taken by a filler file
full_fs() {
	local avail t1 t2
	((EUID == 0)) || skip "mounting a small tmpfs needs root"
	mkdir small
	mount -t tmpfs -o size=1m,mode=700 tmpfs small 2>mount.err || skip "cannot mount a tmpfs: $(cat mount.err)"
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
