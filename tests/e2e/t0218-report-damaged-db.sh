#!/bin/bash
# Damage that used to be accepted without a word is refused with one line
# naming the file and the line: an image whose id holds a control character
# or a '/' (it goes into file names: such a database could not be bundled or
# drained), the kernel's kind on an executable, a pid on a file image, a
# name longer than a file name can be, a stacks file although the session
# says 'call-graph: none' (read, then dropped at the next write), an
# impossible start-time, an infinite period-mean.  And an error quoting a
# damaged line never carries its raw bytes to the terminal.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o good -- "$WORKLOADS/split_funcs" 200
tally_ok report -i good

# images: vary one field of the executable's line
exe_ln=$(awk -F'\t' '$2 == "exec" { print NR; exit }' good/images)
[[ -n $exe_ln ]] || fail "no exec image in good/images: $(cat good/images)"
# spoil NAME AWK-ASSIGNMENT: a copy with the executable's line changed
spoil_image() {
	cp -a good "$1"
	awk -F'\t' -v OFS='\t' -v ln="$exe_ln" "NR == ln { $2 } { print }" good/images >"$1/images"
}
spoil_image id11.db '$3 = "ab\x11cd"'
expect_fail_with "^tally: 'id11\.db/images' line $exe_ln: image [0-9]+: its build-id is not lowercase hex" "$TALLY" report -i id11.db
grep -q $'\x11' "$TMP/fail.err" && fail "the error quoted a raw control character"
spoil_image slash.db '$3 = "../../etc"'
expect_fail_with "^tally: 'slash\.db/images' line $exe_ln: image [0-9]+: its build-id is not" "$TALLY" report -i slash.db
spoil_image kernel.db '$2 = "kernel"'
expect_fail_with "^tally: 'kernel\.db/images' line $exe_ln: image [0-9]+: the kernel image is named 'kernel'" "$TALLY" report -i kernel.db
spoil_image pid.db '$5 = "4242"'
expect_fail_with "^tally: 'pid\.db/images' line $exe_ln: image [0-9]+: only jit and nomap images belong to a process" "$TALLY" report -i pid.db
# a name no file can have (it was read, and written out whole wherever the
# image is named: 20 times 10 MB in report --children --json)
spoil_image long.db '$6 = sprintf("%0256d", 0)'
expect_fail_with "^tally: 'long\.db/images' line $exe_ln: image [0-9]+: its name is longer than a file name can be \(255 bytes\)" "$TALLY" report -i long.db --children --json
spoil_image name255.db '$6 = sprintf("%0255d", 0)'
tally_ok report -i name255.db
# nor can such a database be exported (every reader goes through the same checks)
expect_fail_with "^tally: 'id11\.db/images' line $exe_ln" "$TALLY" export -i id11.db --format pprof -o "$TMP/x.pb.gz"

# session values: the line of each, and what it must be
# spoil_session NAME KEY VALUE
spoil_session() {
	cp -a good "$1"
	if grep -q "^$2:" "$1/session"; then
		sed -i "s|^$2:.*|$2: $3|" "$1/session"
	else
		echo "$2: $3" >>"$1/session"
	fi
	grep -n "^$2:" "$1/session" | cut -d: -f1
}
ln=$(spoil_session start.db start-time 9999-99-99T99:99:99Z)
expect_fail_with "^tally: 'start\.db/session' line $ln: 'start-time' must be a UTC time" "$TALLY" report -i start.db
ln=$(spoil_session pmean.db period-mean 1e400)
expect_fail_with "^tally: 'pmean\.db/session' line $ln: 'period-mean' must be decimal numbers" "$TALLY" report -i pmean.db
ln=$(spoil_session dur.db duration "1$(printf '0%.0s' $(seq 400))")
expect_fail_with "^tally: 'dur\.db/session' line $ln: 'duration' must be seconds" "$TALLY" report -i dur.db

# stacks that the session does not announce
cp -a good nocg.db
sed -i 's/^call-graph:.*/call-graph: none/' nocg.db/session
# (what reads the stacks says so; report's summary reads none, see t0670)
expect_fail_with "^tally: 'nocg\.db/stacks' holds call stacks, but the session says 'call-graph: none'" "$TALLY" export -i nocg.db --format pprof -o "$TMP/nocg.pb.gz"

# errors quote damaged lines escaped: a terminal title and clear-screen
# sequence in a session line reach stderr as text, not as escapes
cp -a good esc.db
printf '\033]0;owned\007\033[2J\377\n' >>esc.db/session
ln=$(wc -l <esc.db/session)
expect_fail_with "^tally: 'esc\.db/session' line $ln: expected 'key: value', got '\\\\x1b\]0;owned\\\\x07\\\\x1b\[2J\\\\xff'" "$TALLY" report -i esc.db
LC_ALL=C grep -q '[^[:print:]]' "$TMP/fail.err" && fail "raw bytes in the error: $(od -c "$TMP/fail.err" | head -5)"
true
