# A Python program whose time is all inside driver(), split between hot_a
# and hot_b (a workload for the JIT call-graph tests: t0708; run it with
# python3.12 -X perf or python3.13 -X perf_jit).
#
#   python3 pywork.py [SECONDS [DEPTH]]
#     DEPTH  driver() runs under DEPTH nested calls of down() (default 0)
#
# Prints `pid N`, then `truth driver P` (the share of the process's CPU
# time spent inside driver(), startup and exit included in the whole) and
# `truth hot_a P`, `truth hot_b P`.
import os
import sys
import time


def hot_a(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def hot_b(n):
    s = 0
    for i in range(n):
        s ^= i
    return s


def driver(secs):
    t0 = time.monotonic()
    ta = tb = 0.0
    r = 0
    while time.monotonic() - t0 < secs:
        c0 = time.process_time()
        r += hot_a(20000)
        c1 = time.process_time()
        r += hot_b(10000)
        ta += c1 - c0
        tb += time.process_time() - c1
    return r, ta, tb


def down(depth, secs):
    if depth == 0:
        c0 = time.process_time()
        r, ta, tb = driver(secs)
        return r, time.process_time() - c0, ta, tb
    return down(depth - 1, secs)


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print("pid %d" % os.getpid(), flush=True)
    r, td, ta, tb = down(depth, secs)
    # the whole: the process's CPU time, its startup (before this script ran) included
    whole = sum(os.times()[:2])
    for name, t in (("driver", td), ("hot_a", ta), ("hot_b", tb)):
        print("truth %s %.2f" % (name, 100.0 * t / whole if whole > 0 else 0.0))
    print("done" if r else "?")


main()
