#!/bin/bash
# A process in another mount namespace (unshare -m with a bind mount: the
# path it runs differs in content inside and outside) is identified through
# /proc/PID/root while it lives: the database holds the container file's
# build-id, the host's different file at that path is never used to name it
# (the report warns), and --image-path with the container's root names it.
# A process that is gone before tally can read its root (tally is stopped
# with SIGSTOP while the process runs and exits) is left unresolved
# (`00000000`, `unreachable` or `replaced`, never symbolized, the report and
# --explain say why), never named from the host's file.
. "$SRCDIR/tests/e2e/lib.sh"

unshare -m true 2>/dev/null || skip "unshare -m is not possible here (no CAP_SYS_ADMIN or no user namespaces)"
mkdir -p app root/app
cp "$WORKLOADS/split_funcs" app/prog                 # what the host sees at the path
mkdir -p "root$TMP/app"
cp "$WORKLOADS/inline_chain" "root$TMP/app/prog"
cid=$(readelf -n "root$TMP/app/prog" | awk '/Build ID/ { print $3 }')
hid=$(readelf -n app/prog | awk '/Build ID/ { print $3 }')
[[ -n $cid && $cid != "$hid" ]] || skip "the workloads have no distinct build-ids"
# the command that runs the container's file at the host's path for MS milliseconds
in_ns() {
	echo "unshare -m sh -c \"mount --bind '$TMP/root$TMP/app/prog' '$TMP/app/prog' && exec '$TMP/app/prog' $1\""
}

# image_row DB: the images line with the path $TMP/app/prog (fails when none)
image_row() {
	local row
	row=$(awk -F'\t' -v p="$TMP/app/prog" '$7 == p' "$1/images")
	[[ -n $row ]] || fail "no image with the path $TMP/app/prog in $1: $(cat "$1/images")"
	echo "$row"
}

living() {
	local row id idx n
	tally_ok record -F 2000 -o db -- sh -c "$(in_ns 800)"
	row=$(image_row db)
	id=$(cut -f3 <<<"$row")
	[[ $id == "$cid" ]] || fail "the image at $TMP/app/prog was recorded as $id ($(cut -f4 <<<"$row")), the container's file is $cid (the host's $hid)"
	idx=$(cut -f1 <<<"$row")
	grep -qx "$idx" db/mntns || fail "the database does not mark image $idx as mapped in another mount namespace: $(cat db/mntns 2>&1)"
	note "container image identified through /proc/PID/root: $id"

	report_json plain.json -i db --symbols
	[[ $(tjson plain.json func work_a) == 0 ]] || fail "the host's file (split_funcs) was used to name the container's image"
	grep -q "image 'prog'.*not the file that was recorded" plain.json.err || fail "no warning that the host's file is another: $(cat plain.json.err)"
	report_text ex.txt -i db --explain prog
	grep -q "mapped inside another mount namespace" ex.txt || fail "--explain does not say the image was in a container: $(cat ex.txt)"

	report_json root.json -i db --symbols --image-path "$TMP/root"
	n=$(tjson root.json func hot_loop prog)
	((n > 0)) || fail "--image-path with the container's root does not name hot_loop: $(tjson root.json funcs | tr '\n' ' ')"
	note "--image-path ROOT: hot_loop $n samples"
}

# gone before it could be read: the shell stops tally (its parent), runs the
# container's process to its end (the shell reaps it: /proc/PID is gone), then
# lets tally go on, which finds the mapping, the samples and the exit at once
gone() {
	local row kind id n
	tally_ok record -F 2000 -o db2 -- sh -c "trap 'kill -CONT \$PPID' EXIT; kill -STOP \$PPID; $(in_ns 150)"
	row=$(image_row db2)
	kind=$(cut -f4 <<<"$row")
	id=$(cut -f3 <<<"$row")
	[[ $id != "$hid" ]] || fail "a container process gone before tally read it was identified as the host's file ($hid)"
	# unreachable when tally saw its namespace while it lived; when even that
	# was too late, the host's file at the path is another (device and inode
	# differ from the mapping's): replaced.  Unresolved either way.
	[[ $id == 00000000 && ($kind == unreachable || $kind == replaced) ]] ||
		fail "a container process gone before tally read it: its image is recorded as $kind $id, expected unreachable or replaced 00000000 (the container's file is $cid)"
	n=$(prof_sum $(prof_files db2 | grep "/prog-00000000"))
	((n >= 50)) || fail "the container process ran 150 ms at 2 kHz but its image has $n samples"
	report_json short.json -i db2 --symbols
	[[ $(tjson short.json func work_a) == 0 && $(tjson short.json func hot_loop) == 0 ]] ||
		fail "short-lived: the image was symbolized: $(tjson short.json funcs prog | tr '\n' ' ')"
	if [[ $kind == unreachable ]]; then
		why="'$TMP/app/prog' was mapped inside a container by a process that exited before tally could read it"
		explain="exited before its file could be read through /proc/PID/root"
	else
		why="'$TMP/app/prog' was replaced or deleted while it was mapped, so the file that ran is unknown"
		explain="was replaced or deleted while it was mapped"
	fi
	grep -qF "$why" short.json.err || fail "the report does not say why the image is not symbolized ('$why'): $(cat short.json.err)"
	report_text ex2.txt -i db2 --explain prog
	grep -qF "$explain" ex2.txt || fail "--explain does not say why ('$explain'): $(cat ex2.txt)"
	note "short-lived container process: $n samples, recorded as $kind $id, not symbolized, explained"
}

subtest "a living container process: named from its own file" living
subtest "a container process gone before tally read it: left unresolved" gone
