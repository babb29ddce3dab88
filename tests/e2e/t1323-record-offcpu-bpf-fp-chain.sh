#!/bin/bash
# t1322 with the BPF mechanism: fpchain's wait_long and wait_other wait in
# nanosleep -> clock_nanosleep (no frame pointers), called through one
# function pointer, so the frame-pointer chain the kernel walks names
# neither. `record --off-cpu --off-cpu-mechanism bpf -g` keeps the top of
# the user stack at each switch-out (its registers and 2048 bytes) for the
# repair with CFI: each one's share of the off-CPU time within 3 points of
# its truth, the unwind line counts the repaired stacks, and the session
# counts next to no wait without its top of the stack (off-cpu-no-slice).
# Skips where the BPF program cannot run.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-offcpu.sh"

need_offcpu_bpf

bpf() {
	fpchain_offcpu bpf
	local ns waits
	ns=$(session_key bpf.db off-cpu-no-slice | awk '{ print $1 }')
	waits=$(session_field bpf.db off-cpu-waits 1)
	[[ -n $ns && -n $waits ]] || fail "the session has no off-cpu-no-slice ('$ns') or off-cpu-waits ('$waits')"
	fcmp "$ns" "<=" "$(awk -v w="$waits" 'BEGIN { print w / 100 }')" ||
		fail "$ns of $waits waits kept no top of the stack (off-cpu-no-slice), expected at most 1%"
	note "off-cpu-no-slice: $ns of $waits waits"
}

subtest "the BPF program's stack slices" bpf
