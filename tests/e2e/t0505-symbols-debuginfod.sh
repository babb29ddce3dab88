#!/bin/bash
# --debuginfod (opt-in) fetches a stripped binary's debug file from
# DEBUGINFOD_URLS (here a local HTTP server on the loopback) and names its
# functions and lines; without --debuginfod nothing is asked; a server that
# never answers is given up at --debuginfod-timeout and the report goes on.
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir bin srv
cp "$WORKLOADS/inline_chain" full
bid=$(readelf -n full | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
objcopy --strip-all full bin/inline_chain
mkdir -p "srv/buildid/$bid"
objcopy --only-keep-debug full "srv/buildid/$bid/debuginfo"
tally_ok record -F 2000 -o db -- ./bin/inline_chain 500

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
p1=$(port)
(cd srv && exec python3 -m http.server "$p1" --bind 127.0.0.1 >/dev/null 2>&1) &
track_pid $!
wait_port "$p1"
export DEBUGINFOD_CACHE_PATH="$TMP/cache" DEBUGINFOD_URLS="http://127.0.0.1:$p1"

report_json off.json -i db --symbols
[[ $(tjson off.json func hot_loop) == 0 ]] || fail "without --debuginfod the debug file was fetched"
[[ ! -d cache/$bid ]] || fail "without --debuginfod the cache has the debug file"
report_json on.json -i db --lines --debuginfod
n=$(tjson on.json func leaf_mix inline_chain)
((n > 0)) || fail "--debuginfod: leaf_mix not named: $(head -c 600 on.json) $(cat on.json.err)"
report_text ex.txt -i db --explain inline_chain --debuginfod
grep -q "(debuginfod): build-id $bid matches: used" ex.txt || fail "--explain does not say the debuginfod file was used: $(cat ex.txt)"
note "--debuginfod: leaf_mix $n samples"

# a server that accepts and never answers: given up at the limit
p2=$(port)
python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $p2)); s.listen(8); c = []
end = time.time() + 60
while time.time() < end:
    s.settimeout(1)
    try: c.append(s.accept())
    except OSError: pass
" &
track_pid $!
# listening before the report asks (a fixed sleep lost the race on a loaded machine)
wait_port "$p2"
rm -rf cache
DEBUGINFOD_URLS="http://127.0.0.1:$p2" report_text hang.txt -i db --explain inline_chain --debuginfod --debuginfod-timeout 1
grep -q "gave up at the time limit" hang.txt || fail "--debuginfod-timeout 1 with a silent server: $(cat hang.txt)"
note "silent server: $(grep -o 'gave up.*' hang.txt)"
