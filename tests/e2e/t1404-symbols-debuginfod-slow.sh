#!/bin/bash
# --debuginfod against slow servers: --debuginfod-timeout bounds the whole
# report, not each image (seven images without debug info and a server that
# never answers take about the limit, not seven times it); a failure that
# libdebuginfod cached is called one by --explain; on a terminal the report
# shows what it is waiting for on stderr, and nothing when stderr is a file.
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir bin
for w in split_funcs inline_chain recurse annot; do
	objcopy --strip-all "$WORKLOADS/$w" "bin/$w"
done
tally_ok record -F 1000 -o db -- sh -c './bin/split_funcs 300 && ./bin/inline_chain 300 && ./bin/recurse 300 && ./bin/annot 300'
export DEBUGINFOD_CACHE_PATH="$TMP/cache"

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# a server that accepts and never answers
ps=$(port)
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $ps)); s.listen(64); c = []
end = time.time() + 120
while time.time() < end:
    s.settimeout(1)
    try: c.append(s.accept())
    except OSError: pass
" &
track_pid $!
wait_port "$ps"

whole() {
	rm -rf cache
	local t0 t1 asked
	t0=$(date +%s.%N)
	DEBUGINFOD_URLS="http://127.0.0.1:$ps" report_text ex.txt -i db --explain --debuginfod --debuginfod-timeout 1
	t1=$(date +%s.%N)
	asked=$(grep -c "debuginfod (http" ex.txt || true)
	((asked >= 4)) || fail "only $asked images went to debuginfod: $(cat ex.txt)"
	grep -q "gave up at the time limit" ex.txt || fail "no image says the limit was reached: $(cat ex.txt)"
	grep -q "not asked: the report's --debuginfod-timeout of 1.0 s was spent on other images" ex.txt ||
		fail "no image says the report's limit was spent: $(cat ex.txt)"
	fcmp "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '<' 4 ||
		fail "the report took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s with --debuginfod-timeout 1 and $asked images"
	note "$asked images, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
}
# (the bound is of wall time, which a busy machine stretches: retried once)
subtest "--debuginfod-timeout bounds the whole report" retry_busy "the report within its --debuginfod-timeout" whole

cached() {
	rm -rf cache
	mkdir srv
	local p
	p=$(port)
	(cd srv && exec python3 -m http.server "$p" --bind 127.0.0.1 >/dev/null 2>&1) &
	track_pid $!
	wait_port "$p"
	DEBUGINFOD_URLS="http://127.0.0.1:$p" report_text first.txt -i db --explain split_funcs --debuginfod
	grep -q "debuginfod (http://127.0.0.1:$p): No such file or directory after" first.txt ||
		fail "the first ask is not a plain 'not found': $(grep debuginfod first.txt)"
	DEBUGINFOD_URLS="http://127.0.0.1:$p" report_text second.txt -i db --explain split_funcs --debuginfod
	grep -Eq "debuginfod \(http://127.0.0.1:$p\): a failure cached by libdebuginfod [0-9]+ s ago \('$TMP/cache/[0-9a-f]+/debuginfo'\), not asked again until it expires" second.txt ||
		fail "the second ask does not say the failure was cached: $(grep debuginfod second.txt)"
	note "$(grep -o 'a failure cached.*ago' second.txt)"
}
subtest "a failure libdebuginfod cached is called one" cached

progress() {
	rm -rf cache
	command -v script >/dev/null || skip "no 'script' (util-linux) to give the report a terminal"
	# stderr a terminal: the line says what the report waits for
	DEBUGINFOD_URLS="http://127.0.0.1:$ps" script -qec "'$TALLY' report -i db --symbols --debuginfod --debuginfod-timeout 2 >/dev/null" /dev/null >tty.out 2>&1 </dev/null ||
		fail "the report under a terminal failed: $(tail -c 500 tty.out)"
	grep -aq "tally: debuginfod: asking for [^ ]*'s debug info" tty.out || fail "no progress line on the terminal: $(tail -c 500 tty.out | od -c | head -8)"
	# stderr a file: nothing but the report's own warnings
	rm -rf cache
	DEBUGINFOD_URLS="http://127.0.0.1:$ps" "$TALLY" report -i db --symbols --debuginfod --debuginfod-timeout 2 >/dev/null 2>file.err ||
		fail "the report failed: $(cat file.err)"
	! grep -aq "asking for\|$(printf '\r')" file.err || fail "progress written to a file: $(od -c file.err | head -5)"
}
subtest "progress on a terminal's stderr, none in a file" progress
