#!/bin/bash
# annotate --asm names a direct call's or jump's target as objdump (binutils)
# and perf do: a PLT entry <name@plt>, another function <name>, a place in
# the function itself <function+0xOFF>, instead of a bare address. Checked
# against objdump's own disassembly of the same function, every branch.
. "$SRCDIR/tests/e2e/lib.sh"
need_tool objdump binutils

tally_ok record -o t.db -- "$WORKLOADS/threads" 2 200
"$TALLY" annotate -i t.db thread_fn_0 --asm --samples >a.txt 2>a.err || fail "annotate --asm: $(cat a.err)"
# objdump's branches of thread_fn_0: "ADDR mnemonic TARGET <NAME>"
objdump -d --no-show-raw-insn "$WORKLOADS/threads" |
	awk '/<thread_fn_0>:$/ { on = 1; next } on && /^$/ { exit } on && /<.*>$/ && ($2 ~ /^(call|j)/) { sub(":", "", $1); print $1, $2, $3, $4 }' >want.txt
[[ -s want.txt ]] || skip "objdump shows no branch with a named target in thread_fn_0"
grep -q '@plt>' want.txt || fail "thread_fn_0 calls nothing through the PLT here: the test proves too little: $(cat want.txt)"
n=0
while read -r addr mn target name; do
	# tally: "ADDR  mnemonic 0xTARGET <NAME>" (addresses without leading zeros)
	a=$(printf '%x' "0x$addr")
	line=$(grep -E "^ *([0-9.]+ +[0-9.]+% +)?$a  " a.txt | head -1)
	[[ -n $line ]] || fail "annotate has no instruction at $a: $(head -20 a.txt)"
	[[ $line == *"0x$target $name"* ]] || fail "at $a objdump says '$mn $target $name', tally: '$line'"
	n=$((n + 1))
done <want.txt
note "$n branches of thread_fn_0 name their targets as objdump does ($(grep -c '@plt>' want.txt) through the PLT)"
