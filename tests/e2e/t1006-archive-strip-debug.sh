#!/bin/bash
# --strip-debug-to-sampled: each debug file (here libc's, from the system's
# debug package, and the workload's own DWARF) keeps only the compile units
# the samples need; the archive is smaller than without it, and report
# --symbols, --lines, --children and annotate give exactly the rows the full
# archive gives. --list measures the stripped files as they are written.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -g -F 2000 -o db -- "$WORKLOADS/split_images" 400
tally_ok archive -i db --list
dbg=$(awk '$2 == "debug" && $5 == "(debug" && $8 == "libc.so.6)" { print $3 }' out)
[[ -n $dbg ]] || skip "no debug file of libc.so.6 on this machine (install libc6-dbg): $(awk '$2 != "db"' out)"
full_size=$(awk -v m="$dbg" '$3 == m { print $1 }' out)

tally_ok archive -i db -o full.tar.zst
tally_ok archive -i db -o strip.tar.zst --strip-debug-to-sampled
tally_ok archive -i db -o stripdir --strip-debug-to-sampled
tally_ok archive -i db --list --strip-debug-to-sampled
cp out slist.txt
strip_size=$(awk -v m="$dbg" '$3 == m { print $1 }' slist.txt)
[[ $strip_size -lt $((full_size / 2)) ]] || fail "libc's debug file: $strip_size bytes stripped, $full_size whole: not under half"
grep -F "$dbg" slist.txt | grep -E '([0-9]+) of ([0-9]+) compile units kept' >/dev/null || fail "--list does not say which units were kept: $(grep -F "$dbg" slist.txt)"
read -r kept units < <(grep -F "$dbg" slist.txt | sed -E 's/.* ([0-9]+) of ([0-9]+) compile units kept.*/\1 \2/')
((kept >= 1 && kept < units / 10)) || fail "libc: $kept of $units compile units kept"
[[ $(stat -c %s "stripdir/$dbg") == "$strip_size" ]] || fail "--list said $strip_size bytes, the archive holds $(stat -c %s "stripdir/$dbg")"
readelf -S "stripdir/$dbg" >/dev/null 2>&1 || fail "the stripped debug file is not an ELF file readelf reads"
note "libc debug file: $full_size -> $strip_size bytes ($kept of $units units); tarball $(stat -c %s full.tar.zst) -> $(stat -c %s strip.tar.zst) bytes"
(($(stat -c %s strip.tar.zst) < $(stat -c %s full.tar.zst))) || fail "the stripped tarball is not smaller"

rows() {
	case $2 in
	annotate) "$TALLY" annotate -i "$1" own_work --asm --json 2>"$TMP/rows.err" |
		python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("database",None); print(json.dumps(d,sort_keys=True))' ;;
	*) "$TALLY" report -i "$1" "$2" 2>"$TMP/rows.err" | grep -v '^#' ;;
	esac || fail "$2 from $1: $(cat "$TMP/rows.err")"
}
for w in --symbols --lines --children annotate; do
	rows full.tar.zst "$w" >ref.txt
	rows strip.tar.zst "$w" >got.txt
	diff ref.txt got.txt >/dev/null || fail "$w: the stripped archive differs: $(diff ref.txt got.txt | head)"
	rows archive:stripdir "$w" >got.txt
	diff ref.txt got.txt >/dev/null || fail "$w: the stripped directory archive differs: $(diff ref.txt got.txt | head)"
done
grep -q 'memset' <(rows full.tar.zst --lines) || fail "test setup: no libc line rows (memset) to compare"
note "--symbols, --lines, --children, annotate: the same rows stripped and whole"
