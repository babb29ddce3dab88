#!/bin/bash
# The daemon fills the build-id cache too: a program it samples is copied
# into the cache while it runs (before the flush that writes its epoch), so
# once the program is deleted the flushed epoch still names its functions,
# in the split the workload measured.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/daemon.sh"
. "$SRCDIR/tests/e2e/lib-diff.sh"
. "$SRCDIR/tests/e2e/lib-names.sh"
((EUID == 0)) || skip "the daemon samples the whole machine: root is needed"
use_cache
# the daemon copies whatever the machine runs meanwhile: bounded
export TALLY_BUILDID_CACHE_SIZE=512M

prog=$(uniq_copy split_funcs)
id=$(build_id "$prog")
[[ -n $id ]] || skip "the workloads have no GNU build-id"
start_daemon d.db --flush-interval 1h
"$prog" 800 >truth.txt
wait_cached "$id"
rm "$prog"
ctl --db d.db flush
stop_daemon "$DAEMON_PID"

name=$(basename "$prog")
report_json r.json -i d.db --symbols --image "$name"
for f in work_a work_b work_c; do
	(($(tjson r.json func "$f" "$name") > 0)) || fail "the epoch does not name $f once $name is gone: $(tjson r.json funcs | head -20 | tr '\n' ' ')"
done
check_shares func r.json truth.txt 5 work_a work_b work_c
