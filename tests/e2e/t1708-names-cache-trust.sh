#!/bin/bash
# The build-id cache trusts nothing it holds and writes nothing others could
# redirect: a cache below a directory others may write is not used (record
# says why, once, and makes nothing there); a link planted in the cache is
# never written through nor read; a kept file that is not the recorded build
# is not used (the report falls back to raw offsets and --explain says
# why); root's cache is root's own, whatever HOME says.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"

mkdir app
cp "$WORKLOADS/split_funcs" app/prog
id=$(build_id app/prog)
[[ -n $id ]] || skip "the workloads have no GNU build-id"

shared_dir() {
	mkdir -m 777 open
	chmod 777 open # whatever the umask
	TALLY_BUILDID_CACHE="$TMP/open/cache" tally_ok record -F 999 -o o.db -- app/prog 100
	grep -q "^tally: warning: the build-id cache '$TMP/open/cache' is not used: '$TMP/open' is writable by others" "$TMP/err" ||
		fail "record does not say why the cache is not used: $(cat "$TMP/err")"
	[[ $(grep -c "build-id cache" "$TMP/err") == 1 ]] || fail "more than one line about the cache: $(cat "$TMP/err")"
	[[ ! -e open/cache ]] || fail "record made the cache in a directory others may write: $(ls -la open)"
}

planted_link() {
	export TALLY_BUILDID_CACHE=$TMP/cache-link
	mkdir -p "$TALLY_BUILDID_CACHE" elsewhere
	chmod 700 "$TALLY_BUILDID_CACHE"
	ln -s "$TMP/elsewhere" "$TALLY_BUILDID_CACHE/$id"
	tally_ok record -F 999 -o l.db -- app/prog 100
	# what a recording left is copied by a process of its own: wait until it is gone
	for ((i = 0; ; i++)); do
		pgrep -f "tally record -F 999 -o l.db" >/dev/null || break
		((i < 600)) || fail "the recording's copying process still runs after 30 s: $(pgrep -af 'tally record -F 999 -o l.db')"
		sleep 0.05
	done
	[[ -z $(ls -A elsewhere) ]] || fail "the cache wrote through a planted link: $(ls -la elsewhere)"
	[[ -L $TALLY_BUILDID_CACHE/$id ]] || fail "the planted link was replaced (it is left alone)"
	# nor read: a link to a real copy of the image is not taken for the entry
	rm "$TALLY_BUILDID_CACHE/$id"
	mkdir "$TALLY_BUILDID_CACHE/$id"
	cp app/prog copy
	ln -s "$TMP/copy" "$TALLY_BUILDID_CACHE/$id/image"
	mv app/prog app/prog.moved
	at_exit "mv '$TMP/app/prog.moved' '$TMP/app/prog' 2>/dev/null || true"
	report_text ex.txt -i l.db --explain prog
	! grep -q "build-id cache): build-id $id matches: used" ex.txt || fail "a link in the cache was read as the kept image: $(cat ex.txt)"
}

not_the_build() {
	export TALLY_BUILDID_CACHE=$TMP/cache-other
	tally_ok record -F 999 -o t.db -- app/prog 200
	wait_cached "$id"
	# the kept file swapped for another program: never used
	chmod u+w "$TALLY_BUILDID_CACHE/$id/image"
	cp "$WORKLOADS/inline_chain" "$TALLY_BUILDID_CACHE/$id/image"
	mv app/prog app/prog.moved
	at_exit "mv '$TMP/app/prog.moved' '$TMP/app/prog' 2>/dev/null || true"
	report_json t.json -i t.db --symbols
	[[ $(tjson t.json func hot_loop) == 0 && $(tjson t.json func work_a) == 0 ]] ||
		fail "a kept file of another build named the code: $(tjson t.json funcs | head | tr '\n' ' ')"
	report_text tex.txt -i t.db --explain prog
	grep -q "/$id/image' (the build-id cache): has build-id [0-9a-f]*, the profile recorded $id: another file, not used" tex.txt ||
		fail "--explain does not say the kept file is another build: $(cat tex.txt)"
}

roots_own() {
	((EUID == 0)) || skip "root's cache: not root"
	home=$(getent passwd 0 | cut -d: -f6)
	[[ -n $home && $home != "$TMP"* ]] || skip "root has no home of its own in the password database"
	mkdir -p userhome
	chown 65534:65534 userhome
	# sudo keeping the user's HOME: root's cache stays in root's home
	out=$(env -u TALLY_BUILDID_CACHE -u XDG_CACHE_HOME HOME="$TMP/userhome" "$TALLY" cache size) ||
		fail "tally cache size failed: $out"
	[[ $out == "$home/.cache/tally/buildid:"* ]] || fail "root's cache is not in root's home ($home): $out"
	[[ -z $(ls -A userhome) ]] || fail "tally made something in the user's home: $(ls -la userhome)"
}

subtest "a cache below a directory others may write: not used" shared_dir
subtest "a link planted in the cache: not written through, not read" planted_link
subtest "a kept file of another build: not used" not_the_build
subtest "root's cache is in root's home" roots_own
