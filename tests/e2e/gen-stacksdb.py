#!/usr/bin/env python3
"""gen-stacksdb.py DIR < STACKS: write a tally database (docs/format.md, format
version 1) holding exactly the call stacks read from stdin, one a line as
folded stacks are written: `root;caller;...;leaf COUNT`.  Every function is
in one JIT image whose perf map names it, so reports and exports resolve every
frame without any binary.  For tests that need a known shape (a deep thin
stack, a function called from several places) whose figures the test can
work out from the same lines."""
import os
import sys

import synthdb

PID = 4343
IMAGE_ID = "5eed0000f1a3e000"
BASE = 0x10000
FSIZE = 0x100


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    stacks = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        frames, count = line.rsplit(" ", 1)
        stacks.append((frames.split(";"), int(count)))
    names = []
    index = {}
    for frames, _ in stacks:
        for n in frames:
            if n not in index:
                index[n] = len(names)
                names.append(n)
    os.makedirs(os.path.join(out, "jit"))
    with open(os.path.join(out, "jit", "perf-%d-%s.map" % (PID, IMAGE_ID)), "w") as f:
        for i, n in enumerate(names):
            f.write("%x %x %s\n" % (BASE + i * FSIZE, FSIZE, n))
    leaf = {}
    total = 0
    with open(os.path.join(out, "stacks"), "w") as f:
        f.write("# count[,count...] pid frames (image-index:hex-offset, leaf first)\n")
        for frames, count in stacks:
            total += count
            lo = BASE + index[frames[-1]] * FSIZE + 8
            leaf[lo] = leaf.get(lo, 0) + count
            fr = ["0:%x" % lo] + ["0:%x" % (BASE + index[n] * FSIZE + 0x10) for n in reversed(frames[:-1])]
            f.write("%d 0 %s\n" % (count, " ".join(fr)))
    synthdb.write_rest(out, PID, IMAGE_ID, leaf, total, "gen-stacksdb.py", "synthetic", False, 1024, "10.000")
    print("wrote %s: %d stacks, %d samples, %d functions" % (out, len(stacks), total, len(names)))


main()
