#!/bin/bash
# off-CPU call graphs with frame pointers through libc's chain of functions
# without them: fpchain's wait_long and wait_other (3 waits to 1, by its own
# clock around each) each wait in nanosleep(), which calls clock_nanosleep,
# neither with a frame pointer, both called through one function pointer (the
# chain from rbp is the same for both and names neither). `record --off-cpu
# -g` gives each one's share of the off-CPU time within 3 points of the
# truth (every wait is recorded: no sampling error), with the sched_switch
# tracepoint and its stack copy (t1323: the BPF program's), and the unwind
# line counts the repaired stacks.
. "$SRCDIR/tests/e2e/lib.sh"

. "$SRCDIR/tests/e2e/lib-offcpu.sh"

tracepoint() {
	fpchain_offcpu tracepoint
}

subtest "the tracepoint's stack copy" tracepoint
