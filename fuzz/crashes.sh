#!/usr/bin/env bash
# make fuzz-crashes: reruns every input of fuzz/crashes/ (TARGET--WHAT) on its
# target and says which still fail (a crash, an oracle, a hang) and which pass
# now. For the fixers of what they found (fuzz/crashes/README.md); it exits
# non-zero while any still fails. Not part of CI until those are fixed.
#
#   fuzz/crashes.sh [FUZZ_BUILD]     (default: build-fuzz)
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZ_BUILD=${1:-build-fuzz}
bad=0
for f in fuzz/crashes/*--*; do
	name=${f##*/}
	t=$FUZZ_BUILD/fuzz/fuzz-${name%%--*}
	[ -x "$t" ] || { echo "fuzz-crashes: no target '$t' for $name" >&2; bad=1; continue; }
	log=$(mktemp)
	timeout 120 "$t" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 "$f" >"$log" 2>&1
	rc=$?
	if ((rc == 0)); then
		echo "fixed:  $name"
	else
		bad=1
		echo "FAILS:  $name: $(grep -m1 -E 'fuzz oracle failed|runtime error|ERROR: ' "$log" | cut -c1-160)"
	fi
	rm -f "$log"
done
exit $bad
