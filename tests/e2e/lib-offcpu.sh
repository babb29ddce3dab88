# Helpers of the off-CPU tests (t1320, t1330, t1390), sourced after lib.sh.

# session_field DB KEY N: field N (1-based) of a comma-separated session value
session_field() {
	session_key "$1" "$2" | cut -d, -f"$3"
}

# within A B PCT WHAT: |A - B| <= PCT% of B
within() {
	awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b * p / 100) }' ||
		fail "$4: tally says $1, the workload measured $2 (+/- $3%)"
	note "$4: tally $1, measured $2 (+/- $3%)"
}

# blocked_whole_run DB: a -p recording (DB) of one thread that waits nearly
# all the time holds blocked time for about the whole recording (85% to 102%
# of its duration)
blocked_whole_run() {
	local dur lo hi
	dur=$(session_key "$1" duration)
	[[ -n $dur ]] || dur=2
	lo=$(awk -v d="$dur" 'BEGIN { printf "%.0f", d * 0.85e9 }')
	hi=$(awk -v d="$dur" 'BEGIN { printf "%.0f", d * 1.02e9 }')
	between "$(session_field "$1" off-cpu-ns 1)" "$lo" "$hi" ||
		fail "-p on a process that waits: blocked $(session_field "$1" off-cpu-ns 1) ns in $dur s, expected $lo-$hi"
	note "-p: blocked $(session_field "$1" off-cpu-ns 1) ns in $dur s"
}

# need_offcpu_bpf: skips when the off-CPU BPF program cannot run here (no BTF,
# no privilege, built without libbpf: the machine's answer); fails when
# recording with it fails for any other reason
need_offcpu_bpf() {
	local rc=0
	"$TALLY" record --off-cpu --off-cpu-mechanism bpf -o probe -- true >probe.out 2>probe.err || rc=$?
	((rc == 0)) && return 0
	grep -Eq "off-CPU BPF program|built without BPF" probe.err ||
		fail "--off-cpu-mechanism bpf failed for another reason than BPF: $(head -1 probe.err)"
	skip "the off-CPU BPF program cannot run here: $(head -1 probe.err)"
}
