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
    with open(os.path.join(out, "jit-%s-%d.prof" % (IMAGE_ID, PID)), "w") as f:
        f.write("format-version: 1\nimage: jit\npath: /tmp/perf-%d.map\nimage-id: %s\nid-kind: xxh64\n"
                "kind: jit\nindex: 0\nevents: cpu-clock\nsamples: %d\n\n" % (PID, IMAGE_ID, total))
        for off in sorted(leaf):
            f.write("%x %d\n" % (off, leaf[off]))
    with open(os.path.join(out, "images"), "w") as f:
        f.write("# index\tkind\timage-id\tid-kind\tpid\tname\tpath\n")
        f.write("0\tjit\t%s\txxh64\t%d\tjit\t/tmp/perf-%d.map\n" % (IMAGE_ID, PID, PID))
    with open(os.path.join(out, "tasks"), "w") as f:
        f.write("%d\tsynthetic\t/usr/bin/synthetic\n" % PID)
    with open(os.path.join(out, "session"), "w") as f:
        f.write("format-version: 1\ntool: gen-stacksdb.py\nhost: synthetic\ntarget: command\n"
                "command: synthetic\nevents: cpu-clock\nsampling: frequency 999\nrandomized: no\n"
                "per-pid: no\ncall-graph: fp\nmax-stack: 1024\nstart-time: 2026-01-01T00:00:00Z\n"
                "duration: 10.000\nsamples: %d\nlost: 0\nthrottled: 0\nimages: 1\n" % total)
    print("wrote %s: %d stacks, %d samples, %d functions" % (out, len(stacks), total, len(names)))


main()
