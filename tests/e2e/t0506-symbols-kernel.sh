#!/bin/bash
# A kernel-heavy workload (split_kernel): its kernel samples are named from
# the database's kernel.syms (not [unknown]), in every view; --explain kernel
# says where the names come from and that source lines need --vmlinux.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o db -- "$WORKLOADS/split_kernel" 800
[[ -z $(session_key db kernel-symbols) ]] || skip "kernel symbols were unavailable while recording: $(session_key db kernel-symbols)"
report_json k.json -i db --symbols --image kernel
kern=$(tjson k.json image kernel)
unk=$(tjson k.json func '[unknown]' kernel)
((kern > 50)) || fail "only $kern kernel samples from split_kernel"
fcmp "$unk" '<=' "$(awk -v k="$kern" 'BEGIN { print 0.05 * k }')" || fail "$unk of $kern kernel samples are [unknown]"
nf=$(tjson k.json funcs kernel | wc -l)
((nf >= 2)) || fail "kernel samples in only $nf named functions: $(tjson k.json funcs kernel | tr '\n' ' ')"
report_json kc.json -i db --children
python3 - kc.json <<'PY' || fail "--children names no kernel function with samples"
import json, sys
d = json.load(open(sys.argv[1]))
k = [f for f in d["events"][0]["functions"] if f["image"] == "kernel" and f["name"] != "[unknown]" and f["inclusive"] > 0]
sys.exit(0 if len(k) >= 2 else 1)
PY
report_text ex.txt -i db --explain kernel
grep -q "functions: named from kernel.syms" ex.txt || fail "--explain kernel: $(cat ex.txt)"
grep -q "give --vmlinux" ex.txt || fail "--explain kernel does not say lines need --vmlinux: $(cat ex.txt)"
note "kernel: $kern samples, $unk unknown, $nf functions"
