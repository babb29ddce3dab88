#!/bin/bash
# kill -9 of 'record --force' at twenty points of its final write: the
# database is always the old recording or the new one, and readable; what the
# killed writer left (its hidden .db.tmp-PID staging directory, an .db.old-PID
# copy) is gone once the next command has opened the database.  The write is
# stretched by a preloaded shim (tests/workloads/slowpublish.c: 30 ms before
# the data is synced, 30 ms after the swap), so the kills land inside it on a
# fast machine as on a slow one, both before the swap and after it.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/split_funcs"
shopt -s nullglob dotglob

tally_ok record -F 999 -o db -- "$W" 100
prev=$(sed -n 's/^command: //p' db/session)
[[ -n $prev ]] || fail "the first recording's session has no command line"
left_behind=0
exec {nap}<> <(:)
replaced=0
kept=0
for ((i = 1; i <= 20; i++)); do
	ms=$((100 + i))
	LD_PRELOAD="$WORKLOADS/slowpublish.so" TALLY_SLOW_PUBLISH_MS=30 \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$TALLY" record --force -F 999 -g -o db -- "$W" "$ms" >rec.out 2>rec.err &
	pid=$!
	# its staging directory appears when the final write begins (or it ends
	# first); looked for every 0.2 ms without starting a process each time
	deadline=$((${EPOCHREALTIME/./} + 20000000))
	while [[ ! -e .db.tmp-$pid ]] && kill -0 "$pid" 2>/dev/null; do
		((${EPOCHREALTIME/./} < deadline)) ||
			fail "record --force (pid $pid) neither began its final write nor ended within 20 s"
		read -rt 0.0002 -u "$nap" || true
	done
	# then 0, 3, 6, ... 57 ms into the write (its first 30 ms are before
	# the swap, the next 30 after it)
	at=$(((i - 1) * 3))
	((at == 0)) || read -rt "$(printf '0.%03d' "$at")" -u "$nap" || true
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	what=(.db.*)
	((${#what[@]})) && left_behind=$((left_behind + 1))

	rc=0
	"$TALLY" report -i db --json >r.json 2>r.err || rc=$?
	((rc == 0)) || fail "kill number $i (at $at ms, left: ${what[*]:-nothing}): the database is unreadable: $(cat r.err)"
	now=$(sed -n 's/^command: //p' db/session)
	want="$W $ms"
	[[ $now == "$prev" || $now == "$want" ]] ||
		fail "kill number $i: the database is neither the old recording ('$prev') nor the new one ('$want'): '$now'"
	if [[ $now == "$want" ]]; then replaced=$((replaced + 1)); else kept=$((kept + 1)); fi
	prev=$now
	rest=(.db.*)
	((${#rest[@]} == 0)) || fail "kill number $i: after 'tally report' opened the database, the killed writer's ${rest[*]} is still there (left: ${what[*]:-nothing})"
done
# the kills must have fallen inside the write, not only before or after it
((left_behind >= 10)) || fail "only $left_behind of 20 kills left a staging directory: the kills missed the final write"
((replaced >= 1)) || fail "no kill fell after the swap: every one of the 20 ended with the old recording"
((kept >= 1)) || fail "no kill fell before the swap: every one of the 20 ended with the new recording"
note "20 kills during the final write: $left_behind left a staging directory (removed by the next open), $replaced ended with the new recording, $kept with the old; the database was always readable"

# what a writer at work keeps is never touched: a live writer's staging directory stays
sleep 30 &
live=$!
track_pid "$live"
mkdir ".db.tmp-$live"
tally_ok report -i db
[[ -d .db.tmp-$live ]] || fail "'tally report' removed the staging directory of a running process ($live)"
kill "$live"
wait "$live" 2>/dev/null || true
tally_ok report -i db
[[ ! -e .db.tmp-$live ]] || fail "the staging directory of process $live stayed after it ended"
note "a running writer's staging directory is kept, removed once it ends"
