#!/usr/bin/env python3
"""gen-bigdb.py [--weird] DIR STACKS [FUNCTIONS [SEED]]: write a synthetic tally database
(docs/format.md, format version 1) with STACKS distinct call stacks over
FUNCTIONS functions (default 5000) of one JIT image whose perf map names them,
so that reports resolve every frame without any binary.  For tests and
benchmarks of large profiles (tests/e2e/t0653, bench/html.sh).

The stacks form a tree: a common root (_start, run_loop, dispatch), then
one branch per base-16 digit of the stack's number, then a tail of 0 to 9
frames; half the leaves are among 40 hot functions.  Counts are 1 to 8 samples, and one stack in 997 holds 2000: a few
paths are hot, most are not, as in a real profile.  The output is the same
for the same arguments."""
import os
import sys

import synthdb

PID = 4242
IMAGE_ID = "5eed5eed5eed5eed"
BASE = 0x10000
FSIZE = 0x100


def h(*xs):
    v = 0x9E3779B97F4A7C15
    for x in xs:
        v ^= x + 0x632BE59BD9B4E019 + ((v << 6) & 0xFFFFFFFFFFFFFFFF) + (v >> 2)
        v = (v * 0xFF51AFD7ED558CCD) & 0xFFFFFFFFFFFFFFFF
        v ^= v >> 33
    return v


def main():
    weird = "--weird" in sys.argv
    if weird:
        sys.argv.remove("--weird")
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, nstacks = sys.argv[1], int(sys.argv[2])
    nfuncs = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    if nstacks < 1 or nfuncs < 16:
        sys.exit("need at least 1 stack and 16 functions")
    os.makedirs(os.path.join(out, "jit"))
    names = ["_start", "run_loop", "dispatch"]
    names += ["fn_%05d_%s" % (i, ("parse", "eval", "emit", "hash", "walk", "sort", "load", "store")[i % 8])
              for i in range(len(names), nfuncs)]
    with open(os.path.join(out, "jit", "perf-%d-%s.map" % (PID, IMAGE_ID)), "wb") as f:
        for i, n in enumerate(names):
            name = n.encode()
            if weird and i == 3:
                name = b"op<b>&amp;\"quoted\" 'x' \x01\xff]]></script>"
            f.write(b"%x %x %s\n" % (BASE + i * FSIZE, FSIZE, name))

    digits = 1
    while 16 ** digits < nstacks:
        digits += 1
    leaf = {}
    total = 0
    with open(os.path.join(out, "stacks"), "w") as f:
        f.write("# count[,count...] pid frames (image-index:hex-offset, leaf first)\n")
        for i in range(nstacks):
            path = [0, 1, 2]
            prefix = seed
            for d in range(digits):
                c = (i >> (4 * (digits - 1 - d))) & 15
                prefix = h(prefix, c)
                path.append(3 + prefix % (nfuncs - 3))
            for t in range(h(seed, i, 7) % 10):
                path.append(3 + h(seed, i, t) % (nfuncs - 3))
            if h(seed, i, 5) % 2:
                path.append(3 + h(seed, i, 6) % 40)
            count = 2000 if i % 997 == 0 else 1 + h(seed, i) % 8
            total += count
            lo = BASE + path[-1] * FSIZE + h(seed, i, 99) % FSIZE
            leaf[lo] = leaf.get(lo, 0) + count
            frames = ["0:%x" % lo] + ["0:%x" % (BASE + fn * FSIZE + 0x10) for fn in reversed(path[:-1])]
            f.write("%d 0 %s\n" % (count, " ".join(frames)))

    synthdb.write_rest(out, PID, IMAGE_ID, leaf, total, "gen-bigdb.py", "synthetic %d stacks" % nstacks, True, 127,
                       "60.000")
    print("wrote %s: %d stacks, %d samples, %d functions" % (out, nstacks, total, nfuncs))


main()
