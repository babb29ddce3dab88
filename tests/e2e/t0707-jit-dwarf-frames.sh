#!/bin/bash
# --call-graph dwarf through JIT frames in the middle of the stack, where rbp
# is no frame pointer (the jitframes workload: driver -> [JIT] -> mid ->
# [JIT] -> spin): the unwind passes them with their CFI and reaches driver
# and main in nearly every sample, whatever gives the CFI:
#   - the jitdump's JIT_CODE_UNWINDING_INFO records (.eh_frame and
#     .eh_frame_hdr after the code, as V8 and python3.13 -X perf_jit write them);
#   - copies of CPython's perf trampoline (_Py_trampoline_func_start..end in
#     the program, named in a perf map as python3.12 -X perf names them)
#     recognized by their bytes, the template having no CFI (as CPython ships
#     it): rules derived from its instructions;
#   - copies of a template whose binary has CFI for it (.eh_frame), of bytes
#     no derivation knows: that CFI, relocated.
# JIT code without any CFI stops the unwind there, and the session blames the
# missing CFI, not the stack copy (which held the whole stack).
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-jit.sh"

[[ -x $WORKLOADS/jitframes ]] || skip "no jitframes workload (x86-64 only)"

# run NAME WORKLOAD MODE: record it with --call-graph dwarf into NAME, and
# the shares of driver and main into NAME.shares
run() {
	local name=$1 w=$2 mode=$3 rc=0
	"$TALLY" record --call-graph dwarf -F 2000 -o "$name" -- "$WORKLOADS/$w" 600 "$mode" "$TMP" >"$name.out" 2>"$name.err" || rc=$?
	jit_cleanup "$(workload_pid "$name.out")"
	((rc == 0)) || fail "record $w $mode exited $rc: $(head -c 800 "$name.err")"
	stack_shares "$name" driver main spin 'jf_.*|py::.*|jit_.*' >"$name.shares"
	note "$w $mode: $(tr '\n' ' ' <"$name.shares")(truth: driver $(truth driver "$name.out")%)"
}

# through NAME WORKLOAD MODE: the stacks pass the JIT frames to driver and main
through() {
	run "$@"
	local name=$1 t d m j
	t=$(truth driver "$name.out")
	d=$(share_of driver "$name.shares")
	m=$(share_of main "$name.shares")
	j=$(share_of 'jf_.*|py::.*|jit_.*' "$name.shares")
	fcmp "$j" '>=' 80 || fail "$2 $3: JIT frames in only $j% of the stacks (the JIT code is where spin is called from)"
	fcmp "$d" '>=' "$(minus "$t" 5)" || fail "$2 $3: driver in $d% of the stacks, its truth is $t%: the unwind stopped at the JIT frames ($(cat "$name.shares" | tr '\n' ' '))"
	fcmp "$m" '>=' "$(minus "$t" 5)" || fail "$2 $3: main in $m% of the stacks (truth for driver: $t%)"
}

subtest "a jitdump's unwinding info" through dump jitframes dump
subtest "copies of CPython's trampoline (no CFI in the binary)" through tramp jitframes tramp
subtest "copies of a template with CFI in its binary" through tramp_cfi jitframes_cfi tramp

nocfi() {
	run mapped jitframes mapped
	local d r stack why
	d=$(share_of driver mapped.shares)
	fcmp "$d" '<' 20 || fail "JIT code without CFI: driver in $d% of the stacks (the unwind cannot pass it: is the test still right?)"
	why=$(session_key mapped dwarf-stop-reasons)
	stack=$(sed -n 's/.*stack copy too small \([0-9]*\).*/\1/p' <<<"$why")
	r=$(session_key mapped dwarf-stopped-early)
	[[ $stack =~ ^[0-9]+$ && $r =~ ^[0-9]+$ ]] || fail "session: dwarf-stop-reasons '$why', dwarf-stopped-early '$r'"
	((stack * 10 <= r)) ||
		fail "JIT code without CFI: $stack of $r short unwinds blamed on the stack copy ('$why'); the copy held the whole stack, the JIT frame had no CFI"
	note "JIT code without CFI: $why"
}
subtest "JIT code without CFI: the unwind stops there and says why" nocfi
