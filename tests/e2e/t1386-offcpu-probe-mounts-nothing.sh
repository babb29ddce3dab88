#!/bin/bash
# Asking what is available changes nothing on the machine: with tracefs not
# mounted, `tally events` (which probes the off-CPU events) and `record
# --off-cpu` with the BPF mechanism leave it unmounted; the tracepoint
# mechanism, which reads sched_switch's format from tracefs, mounts it itself
# (as perf does) and records. Run in a private mount namespace, so that the
# machine's own tracefs is never touched.
. "$SRCDIR/tests/e2e/lib.sh"

((EUID == 0)) || skip "needs root (a private mount namespace and tracefs)"
need_tool unshare util-linux
"$TALLY" events >events.txt 2>/dev/null || true
grep -Eq '^off-cpu +tracepoint +available' events.txt ||
	skip "off-CPU recording is unavailable here: $("$TALLY" record --off-cpu -o x -- true 2>&1 | head -1)"

cat >inner.sh <<'IN'
set -u
for d in /sys/kernel/debug/tracing /sys/kernel/tracing; do
	while mountpoint -q "$d" 2>/dev/null; do umount "$d" || exit 3; done
done
mounted() { mount | grep -c ' type tracefs ' || true; }
echo "start $(mounted)"
"$TALLY" events >ev.out 2>ev.err
echo "events $(mounted) $(grep -c '^off-cpu .*available' ev.out)"
if "$TALLY" record --off-cpu --off-cpu-mechanism bpf -o b.db -- sleep 0.05 >b.out 2>b.err; then
	echo "bpf $(mounted)"
else
	echo "bpf-unavailable $(head -1 b.err)"
fi
"$TALLY" record --off-cpu --off-cpu-mechanism tracepoint -o t.db -- sleep 0.05 >t.out 2>t.err || { echo "tracepoint-failed $(head -1 t.err)"; exit 0; }
echo "tracepoint $(mounted)"
IN
TALLY=$TALLY unshare -m --propagation private bash inner.sh >ns.out 2>ns.err ||
	skip "cannot make a private mount namespace without tracefs: $(head -c 300 ns.err)"
cat ns.out
[[ $(awk '$1 == "start" { print $2 }' ns.out) == 0 ]] || fail "tracefs is still mounted in the namespace: $(cat ns.out)"
read -r _ m avail < <(grep '^events ' ns.out)
[[ $m == 0 ]] || fail "'tally events' mounted tracefs"
[[ $avail == 1 ]] || fail "'tally events' does not list off-cpu as available when tracefs is not mounted (a recording mounts it)"
if grep -q '^bpf ' ns.out; then
	[[ $(awk '$1 == "bpf" { print $2 }' ns.out) == 0 ]] || fail "record --off-cpu with the BPF mechanism mounted tracefs"
else
	echo "SKIPPED PART: $(grep '^bpf-unavailable' ns.out)"
fi
grep -q '^tracepoint-failed' ns.out && fail "record --off-cpu-mechanism tracepoint without tracefs mounted: $(grep '^tracepoint-failed' ns.out)"
[[ $(awk '$1 == "tracepoint" { print $2 }' ns.out) -ge 1 ]] || fail "record --off-cpu-mechanism tracepoint did not mount tracefs to read sched_switch's format"
[[ -f t.db/session ]] && grep -q '^events: .*off-cpu' t.db/session || fail "the tracepoint recording wrote no off-CPU database"
