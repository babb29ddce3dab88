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
for line in open(sys.argv[1]):
    t = json.loads(line)
    r = t.get("result")
    if r == "OK": p += 1
    elif r == "SKIP":
        s += 1
        out = (t.get("stdout") or "").strip().splitlines()
        skipped.append((t["name"], out[-1] if out else ""))
    else: f += 1
for name, why in skipped:
    print(f"skipped {name}: {why}")
print(f"{p} passed, {f} failed, {s} skipped")
PY
exit $rc
