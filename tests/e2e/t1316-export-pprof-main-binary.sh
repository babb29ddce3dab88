#!/bin/bash
# export --format pprof: the main binary (pprof's "File:", the first mapping)
# is the profiled program's executable: the one with the most samples in its
# code or below it in the stacks, not a wrapper that ran more code of its own
# (here a shell loop that then runs touchmem as its child, whose time is in the kernel's
# page faults under its own frames: the pyenv-shim case).
. "$SRCDIR/tests/e2e/lib.sh"
need_tool go golang-go

"$TALLY" record -g -o w.db -- bash -c "i=0; while [ \$i -lt 300000 ]; do i=\$((i+1)); done; '$WORKLOADS/touchmem' 4096 100; true" \
	>/dev/null 2>rec.err || fail "record: $(cat rec.err)"
"$TALLY" report -i w.db --json >r.json 2>/dev/null || fail "report"
read -r bash_self tm_self < <(python3 -c '
import json, sys
d = json.load(open("r.json"))
imgs = {r["name"]: r["samples"] for r in d["events"][0]["images"]}
print(imgs.get("bash", 0), imgs.get("touchmem", 0))')
note "samples in their own code: bash $bash_self, touchmem $tm_self"
((bash_self > tm_self)) || skip "bash ran less code of its own ($bash_self) than touchmem ($tm_self): the case does not arise here"
"$TALLY" export -i w.db --format pprof -o w.pb.gz 2>err || fail "export: $(cat err)"
go tool pprof -symbolize=none -top w.pb.gz >top.txt 2>top.err || fail "go tool pprof: $(cat top.err)"
file=$(awk '/^File: / { print $2; exit }' top.txt)
[[ $file == touchmem ]] || fail "pprof's main binary is '$file', expected touchmem: $(head -3 top.txt)"
