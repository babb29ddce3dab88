#!/bin/bash
# A process in another mount namespace (unshare -m with a bind mount: the
# path it runs differs in content inside and outside) is identified through
# /proc/PID/root while it lives: the database holds the container file's
# build-id, the host's different file at that path is never used to name it
# (the report warns), and --image-path with the container's root names it.
# A process that is gone before tally can read its root is left unresolved,
# never named from the host's file.
. "$SRCDIR/tests/e2e/lib.sh"

unshare -m true 2>/dev/null || skip "unshare -m is not possible here (no CAP_SYS_ADMIN or no user namespaces)"
mkdir -p app root/app
cp "$WORKLOADS/split_funcs" app/prog                 # what the host sees at the path
cp "$WORKLOADS/inline_chain" "root$TMP/app/prog" 2>/dev/null || { mkdir -p "root$TMP/app"; cp "$WORKLOADS/inline_chain" "root$TMP/app/prog"; }
cid=$(readelf -n "root$TMP/app/prog" | awk '/Build ID/ { print $3 }')
hid=$(readelf -n app/prog | awk '/Build ID/ { print $3 }')
[[ -n $cid && $cid != "$hid" ]] || skip "the workloads have no distinct build-ids"

# inside: the container's file at the host's path; it runs for a while
tally_ok record -F 2000 -o db -- unshare -m sh -c "mount --bind '$TMP/root$TMP/app/prog' '$TMP/app/prog' && '$TMP/app/prog' 800"
row=$(awk -F'\t' -v p="$TMP/app/prog" '$7 == p' db/images)
[[ -n $row ]] || fail "no image with the path $TMP/app/prog in the database: $(cat db/images)"
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

# gone before it could be read: its root vanished with it, and the host's file is never taken for it
tally_ok record -F 2000 -o db2 -- unshare -m sh -c "mount --bind '$TMP/root$TMP/app/prog' '$TMP/app/prog' && exec '$TMP/app/prog' 30"
row=$(awk -F'\t' -v p="$TMP/app/prog" '$7 == p' db2/images)
if [[ -n $row ]]; then
	kind=$(cut -f4 <<<"$row")
	id=$(cut -f3 <<<"$row")
	[[ $id != "$hid" ]] || fail "a short-lived container process's image was identified as the host's file ($hid)"
	report_json short.json -i db2 --symbols
	[[ $(tjson short.json func work_a) == 0 ]] || fail "short-lived: the host's file named the container's image"
	note "short-lived container process: recorded as $kind $id, never the host's file"
else
	note "short-lived container process: no samples in its image (nothing to check)"
fi
