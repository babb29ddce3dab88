#!/bin/bash
# stripped code is not one row: a stripped copy of split_funcs (work_a, work_b,
# work_c 6:3:1 by the workload's own clock; no .symtab, and an executable's
# .dynsym has none of them) gives three rows named IMAGE+0xADDRESS from its
# .eh_frame FDEs, at the functions' addresses, with the measured split, in the
# function report, the call graph, the folded export and annotate; perf's
# per-address rows of the same run (perf attached to the process tally
# records) summed over the same ranges agree, each within the binomial error
# of its samples. A MiniDebugInfo copy
# (.gnu_debugdata naming work_a only) names work_a and numbers the other two.
. "$SRCDIR/tests/e2e/lib.sh"

need_tool strip binutils
need_tool objcopy binutils
need_tool nm binutils
W="$WORKLOADS/split_funcs"
cp "$W" sf.s
strip --strip-all sf.s
declare -A ADDR END
while read -r a s t n; do
	ADDR[$n]=$((16#$a))
	END[$n]=$((16#$a + 16#$s))
done < <(nm -S "$W" | awk '$4 ~ /^work_[abc]$/')
for n in work_a work_b work_c; do
	[[ -n ${ADDR[$n]:-} ]] || fail "nm finds no $n in $W"
done
rowname() { printf 'sf.s+0x%x' "${ADDR[$1]}"; }

stripped_rows() {
	tally_ok record -g -o s.db -- ./sf.s 1500
	cp "$TMP/out" truth.txt
	report_json s.json -i s.db --symbols
	tjson s.json funcs sf.s >funcs
	tjson s.json shares func "$(rowname work_a)" "$(rowname work_b)" "$(rowname work_c)" >shares
	tot=$(awk '{ s += $3 } END { print s + 0 }' shares)
	for n in work_a work_b work_c; do
		grep -qx "$(rowname $n)" funcs || fail "no row '$(rowname $n)' for $n; rows: $(head -c 600 funcs | tr '\n' ' ')"
		share_near "$(awk -v r="$(rowname $n)" '$1 == r { print $2 }' shares)" "$tot" "$(truth $n truth.txt)" "stripped $n ($(rowname $n))"
	done
	# nearly all of the image's samples are in the three rows, none in [.text]/[unknown]
	img=$(tjson s.json image sf.s)
	three=$(awk '{ s += $3 } END { print s + 0 }' shares)
	fcmp "$three" ">=" "$(awk -v i=$img 'BEGIN { print 0.97 * i }')" || fail "the three rows hold $three of the image's $img samples"
	# the same rows in the call graph, the exports and annotate
	report_json c.json -i s.db --children
	python3 - c.json "$(rowname work_a)" <<'PY' || fail "--children has no caller for $(rowname work_a)"
import json, sys
fs = json.load(open(sys.argv[1]))["events"][0]["functions"]
f = [f for f in fs if f["name"] == sys.argv[2]]
sys.exit(0 if f and f[0]["callers"] and f[0]["self"] > 0 else 1)
PY
	"$TALLY" export -i s.db --format folded -o s.folded
	grep -q ";$(rowname work_b) [0-9]*$" s.folded || fail "the folded export has no stack ending in $(rowname work_b): $(head -c 400 s.folded)"
	"$TALLY" annotate -i s.db "$(rowname work_c)" --asm >ann.txt 2>ann.err || fail "annotate $(rowname work_c): $(cat ann.err)"
	grep -q "address 0x$(printf %x "${ADDR[work_c]}"), $((END[work_c] - ADDR[work_c])) bytes" ann.txt ||
		note "annotate's header: $(head -1 ann.txt) (nm size $((END[work_c] - ADDR[work_c])))"
	grep -q "^# $(rowname work_c) " ann.txt || fail "annotate header: $(head -1 ann.txt)"
}

against_perf() {
	local tot ptot
	# perf on the run tally records (it follows tally into sf.s), with a
	# build-id cache of its own (perf_around): the machine's (~/.debug) may hold
	# the unstripped split_funcs under the same build-id, and perf would name
	# the functions from it instead of listing the stripped copy's addresses
	perf_around perf.data "$TALLY" record -o p.db -- ./sf.s 1500
	report_json p.json -i p.db --symbols
	tjson p.json shares func "$(rowname work_a)" "$(rowname work_b)" "$(rowname work_c)" >p.shares
	tot=$(awk '{ s += $3 } END { print s + 0 }' p.shares)
	perf_counts perf.data sf.s >perf.rows
	awk '$2 == "sf.s" && $3 ~ /^0x/ { print $3, $1 }' perf.rows >perf.addr
	[[ -s perf.addr ]] || fail "perf lists no addresses in the stripped sf.s: $(head -5 perf.rows)"
	declare -A P
	for n in work_a work_b work_c; do
		P[$n]=$(python3 -c '
import sys
lo, hi = int(sys.argv[2]), int(sys.argv[3])
print(sum(int(w[1]) for w in (l.split() for l in open(sys.argv[1])) if lo <= int(w[0], 16) < hi))' perf.addr ${ADDR[$n]} ${END[$n]})
	done
	ptot=$((P[work_a] + P[work_b] + P[work_c]))
	all=$(awk '{ s += $1 } END { print s + 0 }' perf.rows)
	((ptot * 2 > all)) || skip "perf's addresses in the three functions hold only $ptot of its $all samples of sf.s"
	for n in work_a work_b work_c; do
		share_near "$(awk -v r="$(rowname $n)" '$1 == r { print $2 }' p.shares)" "$tot" \
			"$(awk -v p=${P[$n]} -v t=$ptot 'BEGIN { printf "%.2f", 100 * p / t }')" "tally vs perf's addresses summed, the same run: $n" "$ptot"
	done
}

minidebuginfo_names() {
	need_tool xz xz-utils
	# as Fedora's find-debuginfo makes it, keeping the name of work_a only
	cp "$W" full
	objcopy --only-keep-debug full dbg
	echo work_a >keep
	objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=keep dbg mini
	xz -f mini
	cp full sf.m
	strip --strip-all -R .comment sf.m
	objcopy --add-section .gnu_debugdata=mini.xz sf.m
	tally_ok record -o m.db -- ./sf.m 1200
	cp "$TMP/out" mtruth.txt
	report_json m.json -i m.db --symbols
	b=$(printf 'sf.m+0x%x' "${ADDR[work_b]}") c=$(printf 'sf.m+0x%x' "${ADDR[work_c]}")
	tjson m.json shares func work_a "$b" "$c" >m.shares
	tot=$(awk '{ s += $3 } END { print s + 0 }' m.shares)
	share_near "$(awk '$1 == "work_a" { print $2 }' m.shares)" "$tot" "$(truth work_a mtruth.txt)" "MiniDebugInfo: work_a by name"
	share_near "$(awk -v r="$b" '$1 == r { print $2 }' m.shares)" "$tot" "$(truth work_b mtruth.txt)" "MiniDebugInfo: work_b as $b"
	share_near "$(awk -v r="$c" '$1 == r { print $2 }' m.shares)" "$tot" "$(truth work_c mtruth.txt)" "MiniDebugInfo: work_c as $c"
}

damaged_hdr() {
	# a damaged .eh_frame_hdr (garbage table, a count past the section) costs the
	# rows, never a crash or a hang: the report still runs, on the same samples
	[[ -f s.db/session ]] || skip "needs stripped-rows' database"
	read -r off size < <(readelf -S -W sf.s | python3 -c '
import sys
for l in sys.stdin:
    w = l.replace("[", " ").replace("]", " ").split()
    if ".eh_frame_hdr" in w:
        i = w.index(".eh_frame_hdr")
        print(int(w[i + 3], 16), int(w[i + 4], 16))')
	[[ -n ${off:-} ]] || skip "readelf shows no .eh_frame_hdr in sf.s"
	for how in garbage count; do
		mkdir -p "bad-$how"
		python3 - sf.s "bad-$how/sf.s" $off $size $how <<'PY'
import sys
src, dst, off, size, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
b = bytearray(open(src, "rb").read())
if how == "garbage":
    for i in range(off + 12, off + size):
        b[i] = (i * 37) & 0xff
else:
    b[off + 8:off + 12] = (0x7fffffff).to_bytes(4, "little")
open(dst, "wb").write(b)
PY
		chmod +x "bad-$how/sf.s"
		rc=0
		timeout 60 "$TALLY" report -i s.db --symbols --json --image-path "$TMP/bad-$how" >bad.json 2>bad.err || rc=$?
		((rc == 0)) || fail "$how .eh_frame_hdr: report exited $rc: $(head -c 400 bad.err)"
		[[ $(tjson bad.json image sf.s) == "$(tjson s.json image sf.s)" ]] ||
			fail "$how .eh_frame_hdr: sf.s has $(tjson bad.json image sf.s) samples, the good file $(tjson s.json image sf.s)"
		note "$how .eh_frame_hdr: report ran, rows: $(tjson bad.json funcs sf.s | head -5 | tr '\n' ' ')"
	done
}

subtest stripped-rows stripped_rows
subtest against-perf against_perf
subtest minidebuginfo-names minidebuginfo_names
subtest damaged-eh-frame-hdr damaged_hdr
