#!/usr/bin/env bash
# Runs every test (unit and end-to-end) in a build directory and prints one
# closing line: "N passed, N failed, N skipped".
set -uo pipefail
build=${1:-build}
meson test -C "$build" --num-processes 2 --print-errorlogs "${@:2}"
rc=$?
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
p = f = s = 0
skipped = []
subskips = []
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t.get("result")
    # e2e subtests (tests/e2e/lib.sh) a passing file skipped
    if r == "OK":
        for l in (t.get("stdout") or "").splitlines():
            if l.startswith("SKIPPED subtest: "):
                subskips.append((t["name"], l[len("SKIPPED subtest: "):]))
    if r == "OK": p += 1
    elif r == "SKIP":
        s += 1
        out = (t.get("stdout") or "").strip().splitlines()
        skipped.append((t["name"], out[-1] if out else ""))
    else: f += 1
for name, why in skipped:
    print(f"skipped {name}: {why}")
for name, why in subskips:
    print(f"skipped subtest of {name}: {why}")
print(f"{p} passed, {f} failed, {s} skipped")
PY
exit $rc
