#!/bin/bash
# DWARF unwinding opens each sampled image by its path; a process can put a
# FIFO at that path once the file is mapped.  Opened for reading without
# O_NONBLOCK, a FIFO waits for a writer: the root daemon would stop for as
# long as that process lives (forever, if it waits), and record until the
# command ends.  tally opens it as every file another user may have put there:
# not a regular file, so not used; the daemon keeps answering, the recording
# ends with the command, the library's samples are counted.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"

W=$(uniq_copy fifoimage)

# --- the daemon, the process still alive after its samples in the library
mkdir -p dimg
start_daemon d.db --call-graph dwarf --flush-interval 1h
"$W" "$WORKLOADS/libtallywork.so" "$TMP/dimg" 300 stay >d.out 2>&1 &
wl=$!
track_pid "$wl"
wait_for_line d.out '^done$' 60
[[ -p dimg/lib.so ]] || fail "dimg/lib.so is not a FIFO: $(cat d.out)"
# every sample taken so far is aggregated by this flush: the library's among them
rc=0
"$TALLY" ctl --db d.db --timeout 20 flush >ctl.out 2>ctl.err || rc=$?
((rc == 0)) || fail "the daemon (--call-graph dwarf) does not answer once a sampled library's path became a FIFO (ctl exited $rc: $(cat ctl.err))"
kill "$wl"
wait "$wl" 2>/dev/null || true
stop_daemon "$DAEMON_PID"
note "the daemon answers while the process whose library became a FIFO lives"

# --- record
mkdir -p img
rc=0
timeout 60 "$TALLY" record --call-graph dwarf -F 999 -o db -- \
	"$W" "$WORKLOADS/libtallywork.so" "$TMP/img" 300 >rec.out 2>rec.err || rc=$?
((rc != 124)) || fail "record --call-graph dwarf hung (60 s) on an image that became a FIFO"
((rc == 0)) || fail "record exited $rc: $(head -c 800 rec.err)"
grep -qx ready rec.out || fail "the workload did not get to its FIFO: $(head -c 500 rec.out)"
[[ -p img/lib.so ]] || fail "img/lib.so is not a FIFO after the run"
report_json r.json -i db
n=$(tjson r.json image lib.so)
((n > 0)) || fail "no samples in lib.so (the library whose file became a FIFO): $(tjson r.json images | tr '\n' ' ')"
note "record ended (exit $rc), $n samples in the library whose path became a FIFO"
