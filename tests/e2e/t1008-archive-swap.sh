#!/bin/bash
# tally archive copies each file from the descriptor it verified, never from
# its path opened again. A local user (uid 65534) runs her program from a
# directory she owns while root profiles it; when root archives the profile
# she swaps the program (or its debug file, under a --debug-dir of hers) for
# a symbolic link to a root-only file of the same size, after the archive
# verified it and before it copies it (gdb holds tally at the entry of
# tally_archive_write, between the plan and the copy, while she swaps: no
# timing). The archive then holds, byte for byte, the file that was
# verified, in a directory, a .tar.gz and with --strip-debug-to-sampled;
# root's file is in none of them. A link she puts at the recorded path
# before the archive starts is not followed, even to a root-only file that
# carries her program's build-id.
. "$SRCDIR/tests/e2e/lib.sh"

((EUID == 0)) || skip "a local user's swap against root's archive needs root (to run as uid 65534)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is needed to run as another user"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
chmod 711 "$TMP" # others may pass through the test directory, as through a home
as_nobody "$WORKLOADS/split_funcs" 1 >/dev/null 2>&1 || skip "uid 65534 cannot run the workloads (a parent directory is private)"
mkdir -m 700 vault # root's: she cannot read what is in it
mkdir marks && chown 65534:65534 marks # hers: where her swap says it ran

# her NAME: a directory of uid 65534's with her copy of split_funcs as prog,
# profiled by root while she runs it (the database NAME.db)
her() {
	mkdir "$1"
	cp "$WORKLOADS/split_funcs" "$1/prog"
	chown -R 65534:65534 "$1"
	tally_ok record -F 1000 -o "$1.db" -- setpriv --reuid=65534 --regid=65534 --clear-groups "$1/prog" 200
}

# secret NAME SIZE: a root-only file of SIZE bytes, marked ROOT-SECRET
secret() {
	yes "ROOT-SECRET-$RANDOM" | head -c "$2" >"vault/$1" || true
	chmod 600 "vault/$1"
	[[ $(stat -c %s "vault/$1") == "$2" ]] || fail "test setup: vault/$1 is not $2 bytes"
}

# paused_archive SWAP ARGS...: tally archive ARGS, held by gdb at the entry of
# tally_archive_write (the plan made, nothing copied) while SWAP runs as uid
# 65534; the exit status in $TMP/arch.rc, stderr in $TMP/arch.err
paused_archive() {
	need_tool gdb gdb
	local swap=$1
	shift
	printf '#!/bin/sh\ncd %s && %s && touch %s/marks/swapped\n' "$TMP" "$swap" "$TMP" >swap.sh
	chmod 755 swap.sh
	rm -f marks/swapped
	# LeakSanitizer cannot run under a debugger
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 gdb -q -nx -batch --return-child-result \
		-ex 'break tally_archive_write' \
		-ex "run archive $* >$TMP/arch.out 2>$TMP/arch.err" \
		-ex "shell setpriv --reuid=65534 --regid=65534 --clear-groups $TMP/swap.sh" \
		-ex continue \
		"$TALLY" >gdb.log 2>&1 && echo 0 >arch.rc || echo $? >arch.rc
	grep -q '^Breakpoint 1, .*tally_archive_write' gdb.log ||
		skip "gdb did not stop tally at tally_archive_write (a build without symbols?): $(tail -3 gdb.log)"
	[[ -e marks/swapped ]] || fail "test setup: her swap did not run: $(grep -v '^\[\|^Using' gdb.log | tail -5)"
}

# no_secret DIR: no file under DIR holds root's marked bytes
no_secret() {
	local hit
	hit=$(grep -rl 'ROOT-SECRET' "$1" || true)
	[[ -z $hit ]] || fail "the archive holds root's file: $hit"
}

# unpack T DIR: a tarball's members into DIR (python's tarfile: no tally code)
unpack() {
	mkdir "$2"
	python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}

swap_image() { # swap_image FORM: the program, in an archive of that form
	her "e$1"
	secret "s$1" "$(stat -c %s "e$1/prog")"
	paused_archive "mv e$1/prog e$1/prog.orig && ln -s $TMP/vault/s$1 e$1/prog" -i "e$1.db" -x -o "$TMP/a$1"
	[[ $(cat arch.rc) == 0 ]] || fail "the archive failed: $(cat arch.err)"
	[[ -L e$1/prog ]] || fail "test setup: her program is no link now"
	local dir=a$1
	[[ -d $dir ]] || { unpack "a$1" "u$1"; dir=u$1; }
	no_secret "$dir"
	local img
	img=$(find "$dir/images" -name prog -type f)
	[[ -n $img ]] || fail "the archive holds no image of prog: $(find "$dir" -type f)"
	cmp -s "$img" "e$1/prog.orig" || fail "the archive's prog is not the program that was verified"
	note "$1: the archive holds the program that ran and was verified, not root's file at its path now"
	tally_ok report -i "$([[ -d a$1 ]] && echo archive:)a$1" --symbols
	grep -q work_a out || fail "the archive gives no work_a: $(cat out)"
}
subtest "her program swapped for a link to root's file after it was verified (directory)" swap_image dir
subtest "her program swapped for a link to root's file after it was verified (.tar.gz)" swap_image .tar.gz

swap_debug() {
	need_tool objcopy binutils
	mkdir -p ed/dbg
	cp "$WORKLOADS/split_funcs" full
	local bid
	bid=$(readelf -n full | awk '/Build ID/ { print $3 }')
	[[ -n $bid ]] || skip "the workload has no GNU build-id"
	local dbg=ed/dbg/.build-id/${bid:0:2}/${bid:2}.debug
	mkdir -p "${dbg%/*}"
	objcopy --only-keep-debug full "$dbg"
	objcopy --strip-debug full ed/prog
	chown -R 65534:65534 ed
	tally_ok record -F 1000 -o ed.db -- setpriv --reuid=65534 --regid=65534 --clear-groups ed/prog 200
	secret sd "$(stat -c %s "$dbg")"
	cp "$dbg" verified.debug
	paused_archive "mv $dbg $dbg.orig && ln -s $TMP/vault/sd $dbg" -i ed.db -x --debug-dir "$TMP/ed/dbg" -o "$TMP/ad"
	[[ $(cat arch.rc) == 0 ]] || fail "the archive failed: $(cat arch.err)"
	no_secret ad
	[[ -f ad/debug/.build-id/${bid:0:2}/${bid:2}.debug ]] || fail "the archive holds no debug file: $(find ad -type f)"
	cmp -s "ad/debug/.build-id/${bid:0:2}/${bid:2}.debug" verified.debug ||
		fail "the archive's debug file is not the one that was verified"
	note "the debug file that was verified, not root's file at its path now"
}
subtest "her debug file (--debug-dir of hers) swapped for a link to root's file" swap_debug

swap_strip() {
	her es
	secret ss "$(stat -c %s es/prog)"
	paused_archive "mv es/prog es/prog.orig && ln -s $TMP/vault/ss es/prog" -i es.db -x --strip-debug-to-sampled -o "$TMP/as.tar"
	[[ $(cat arch.rc) == 0 ]] || fail "the archive failed: $(cat arch.err)"
	unpack as.tar us
	no_secret us
	tally_ok report -i as.tar --symbols
	grep -q work_a out || fail "the stripped archive gives no work_a: $(cat out)"
	note "--strip-debug-to-sampled: the stripped copy is made from the file that was verified"
}
subtest "--strip-debug-to-sampled: her program swapped after it was verified" swap_strip

link_before() {
	her el
	# root's own copy of her program, with root's bytes after it: the same build-id
	cat el/prog >vault/rootprog
	yes "ROOT-SECRET-$RANDOM" | head -c 4096 >>vault/rootprog || true
	chmod 700 vault/rootprog
	as_nobody sh -c "mv el/prog el/prog.orig && ln -s $TMP/vault/rootprog el/prog"
	tally_ok archive -i el.db -x -o al
	no_secret al
	[[ -z $(find al/images -name prog 2>/dev/null) ]] || fail "the archive holds the file behind the link: $(find al -type f)"
	grep -q "'$TMP/el/prog' (image prog) is not archived: it is a symbolic link now" err ||
		fail "no warning names the link: $(cat err)"
	note "a link at the recorded path is not followed: $(grep 'symbolic link' err)"
}
subtest "a link at the recorded path, to root's file with her build-id, is not followed" link_before
