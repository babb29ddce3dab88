#!/usr/bin/env bash
# Runs every test (unit and end-to-end) in a build directory and prints one
# closing line: "N passed, N failed, N skipped".
#
#   scripts/check.sh [BUILD [MESON TEST ARGS...]]
#   LOAD=N scripts/check.sh ...   the same with N CPU hogs running beside it
#
# LOAD=N (make check LOAD=N) starts N processes that keep a CPU busy each, as
# other work on a shared machine does: each runs busy stretches of 1 to 3 s
# in a child process, one after the other, so processes come and go as well.
# They run at the tests' priority and end with this script.  A failed test
# is listed at the end with its own figures: its FAIL lines and the load it
# ran under (the `load:` lines of tests/e2e/lib.sh).
set -uo pipefail
build=${1:-build}
load=${LOAD:-0}
[[ $load =~ ^[0-9]+$ ]] || { echo "check.sh: LOAD='$load' is not a number of CPU hogs (LOAD=2, say)" >&2; exit 2; }

hogs=()
stop_hogs() {
	local pid
	for pid in "${hogs[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || true
	done
	for pid in "${hogs[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	hogs=()
}
trap stop_hogs EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
for ((i = 0; i < load; i++)); do
	# a process group of its own, ended whole at the end
	setsid bash -c 'while :; do
		( end=$((SECONDS + 1 + RANDOM % 3)); while ((SECONDS < end)); do :; done )
	done' &
	hogs+=($!)
done
((load == 0)) || echo "check.sh: under load: $load CPU hogs (process groups ${hogs[*]}) beside the suite, on $(nproc) CPUs"

start=$SECONDS
meson test -C "$build" --num-processes 2 --print-errorlogs "${@:2}"
rc=$?
wall=$((SECONDS - start))
stop_hogs
python3 - "$build/meson-logs/testlog.json" "$load" "$wall" <<'PY'
import json, sys
p = f = s = 0
skipped = []
subskips = []
failed = []
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t.get("result")
    out = t.get("stdout") or ""
    err = t.get("stderr") or ""
    # e2e subtests (tests/e2e/lib.sh) a passing file skipped
    if r == "OK":
        for l in out.splitlines():
            if l.startswith("SKIPPED subtest: "):
                subskips.append((t["name"], l[len("SKIPPED subtest: "):]))
    if r == "OK": p += 1
    elif r == "SKIP":
        s += 1
        # the reason: the last SKIP line (lib.sh's closing `load:` line is on stderr)
        lines = [l for l in out.strip().splitlines() if l.startswith("SKIP")] or out.strip().splitlines()
        skipped.append((t["name"], lines[-1] if lines else ""))
    else:
        f += 1
        # the test's own figures: what failed and the load it ran under
        figs = [l for l in (out + "\n" + err).splitlines()
                if l.startswith(("FAIL", "not ok", "load:", "busy (")) or "failed under load" in l]
        failed.append((t["name"], r, t.get("duration"), figs))
for name, why in skipped:
    print(f"skipped {name}: {why}")
for name, why in subskips:
    print(f"skipped subtest of {name}: {why}")
for name, r, dur, figs in failed:
    print(f"failed {name} ({r}" + (f", {dur:.0f} s)" if isinstance(dur, (int, float)) else ")"))
    for l in figs[:12]:
        print("    " + l[:400])
load, wall = int(sys.argv[2]), int(sys.argv[3])
print(f"{p} passed, {f} failed, {s} skipped" + (f" (under load: {load} CPU hogs)" if load else "") + f", {wall // 60} min {wall % 60} s")
PY
exit $rc
