#!/bin/bash
# export --format pprof: the main binary (pprof's "File:", the first mapping)
# is the executable with the most samples in its code or below it in the
# stacks (lib/export/pprof.c), not the one that ran the most code of its own:
# a wrapper (a shell loop that then runs touchmem as its child, whose time is
# in the kernel's page faults under its own frames: the pyenv-shim case) that
# ran more code of its own than touchmem but less in all leaves touchmem the
# main binary; a wrapper that did more in all is the main binary itself.
# Which case a run makes depends on the machine (bash's loop against
# touchmem's faults: "bash 348 ms, touchmem 506 ms with its children" on one,
# bash ahead in all on another), so each case is measured from the database
# (the rule's own figures, from its stacks), the loop sized from a first run
# to make it, and the figures said.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

# figures DB: `IMAGE SELF ALL` for each executable of DB's stacks: the
# samples whose leaf is in it, and those of the stacks that hold it
figures() {
	python3 - "$1" <<'PY' || fail "cannot read the stacks of $1 (above)"
import os, subprocess, sys
db = sys.argv[1]
kind, name = {}, {}
for l in open(db + "/images"):
    if l.startswith("#"):
        continue
    f = l.rstrip("\n").split("\t")
    kind[int(f[0])], name[int(f[0])] = f[1], f[5]
out = subprocess.run(["python3", os.environ["SRCDIR"] + "/tests/e2e/stacks.py", "text", db],
                     capture_output=True, text=True, check=True).stdout
own, all_ = {}, {}
for l in out.splitlines():
    if l.startswith("#"):
        continue
    w = l.split()
    c = sum(int(x.split(":")[0]) for x in w[0].split(","))
    imgs = [int(fr.split(":")[0]) for fr in w[3:]]
    if imgs and kind.get(imgs[0]) == "exec":
        own[imgs[0]] = own.get(imgs[0], 0) + c
    for i in set(imgs):
        if kind.get(i) == "exec":
            all_[i] = all_.get(i, 0) + c
for i in sorted(all_, key=lambda i: -all_[i]):
    print(name[i], own.get(i, 0), all_[i])
PY
}

# run LABEL LOOPS: record the wrapper (LOOPS rounds of a shell loop, then
# touchmem) with -g; its figures in LABEL.fig, pprof's main binary in LABEL.main
run() {
	tally_ok record -g -o "$1.db" -- bash -c "i=0; while [ \$i -lt $2 ]; do i=\$((i+1)); done; '$WORKLOADS/touchmem' 4096 100; true"
	figures "$1.db" >"$1.fig"
	tally_ok export -i "$1.db" --format pprof -o "$1.pb.gz"
	gopprof_ok "$1.top" -symbolize=none -top "$1.pb.gz"
	awk '/^File: / { print $2; exit }' "$1.top" >"$1.main"
}
# fig LABEL IMAGE self|all: a figure of LABEL.fig
fig() { awk -v i="$2" -v k="$3" '$1 == i { print (k == "self" ? $2 : $3); f = 1 } END { if (!f) print 0 }' "$1.fig"; }
said() { echo "bash $(fig "$1" bash self) of its own and $(fig "$1" bash all) in all, touchmem $(fig "$1" touchmem self) and $(fig "$1" touchmem all)"; }

need_tool go golang-go
# a first run, to size the loop of each case from what it measured
run first 100000
bs=$(fig first bash self) ba=$(fig first bash all) ts=$(fig first touchmem self) ta=$(fig first touchmem all)
((ba > 0 && ta > 0 && bs > 0)) || fail "the first run has no samples of bash or touchmem: $(said first)"
note "100000 rounds of the loop: $(said first) samples"

# loops_for LABEL LOOPS F: the rounds of the loop that give bash F times
# touchmem's samples in all, from run LABEL of LOOPS rounds
loops_for() {
	awk -v b="$(fig "$1" bash all)" -v t="$(fig "$1" touchmem all)" -v n="$2" -v f="$3" 'BEGIN { printf "%d", n * f * t / b }'
}

# make_case LABEL F COND: runs sized for F (from the first run, and once more
# from that run when COND, an arithmetic test of the figures, does not hold)
make_case() {
	local n prev=first pn=100000 try
	for try in 1 2; do
		n=$(loops_for $prev $pn "$2")
		run "$1" "$n"
		bs=$(fig "$1" bash self) ba=$(fig "$1" bash all) ts=$(fig "$1" touchmem self) ta=$(fig "$1" touchmem all)
		if (($3)); then
			note "$n rounds of the loop: $(said "$1")"
			return 0
		fi
		note "$n rounds of the loop did not make the case ($(said "$1")): sized again from them"
		prev=$1 pn=$n
	done
	skip "two sizes of the loop did not make the case (the last, $n rounds: $(said "$1")): bash's own code against touchmem's faults is too different here"
}

wrapper_less() {
	# bash's code ahead of touchmem's own, its samples in all a third of touchmem's
	make_case less 0.35 'bs > ts && ba < ta'
	[[ $(cat less.main) == touchmem ]] || fail "pprof's main binary is '$(cat less.main)', expected touchmem ($(said less)): $(head -3 less.top)"
}

wrapper_more() {
	# bash ahead of touchmem in all: twice its samples
	make_case more 2 'ba > ta'
	[[ $(cat more.main) == bash ]] || fail "pprof's main binary is '$(cat more.main)', expected bash ($(said more)): $(head -3 more.top)"
}

subtest "a wrapper with more code of its own, fewer samples in all: the child is the main binary" wrapper_less
subtest "a wrapper with more samples in all: the wrapper is the main binary" wrapper_more
