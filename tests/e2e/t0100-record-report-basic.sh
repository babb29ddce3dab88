#!/bin/bash
# record + report basics: split_funcs's work_a/b/c shares match its measured
# 6:3:1 split, -F is honoured, and the text reports have the documented layout.
. "$SRCDIR/tests/e2e/lib.sh"

F=4000
tally_ok record -F $F -o db -- "$WORKLOADS/split_funcs" 1000
cp out truth.txt
cpu_ms=$(info_val cpu_ms truth.txt)

report_json sym.json -i db --symbols
check_split func sym.json truth.txt work_a work_b work_c

total=$(tjson sym.json total)
abc=0
for f in work_a work_b work_c; do
	n=$(tjson sym.json func "$f" split_funcs)
	abc=$((abc + n))
done
fcmp "$abc" '>=' "$(awk -v t="$total" 'BEGIN { print 0.9 * t }')" ||
	fail "work_a+work_b+work_c in image split_funcs have $abc of $total samples, expected at least 90%"
note "work_a+b+c: $abc of $total samples"

# -F HZ: about HZ samples per second of CPU time
expect=$(awk -v f=$F -v ms="$cpu_ms" 'BEGIN { printf "%d", f * ms / 1000 }')
between "$total" "$(awk -v e="$expect" 'BEGIN { print 0.75 * e }')" "$(awk -v e="$expect" 'BEGIN { print 1.25 * e + 50 }')" ||
	fail "-F $F over ${cpu_ms} ms of CPU time gave $total samples, expected about $expect (+/-25%)"
note "-F $F: $total samples for ${cpu_ms} ms of CPU (expected ~$expect)"

# text: per-image summary
report_text img.txt -i db --samples
ttext img.txt check image
names=$(ttext img.txt names | awk '{ print $2 }')
has_line split_funcs "$names" || fail "text report has no row for image split_funcs; rows: $(tr '\n' ' ' <<<"$names")"
text_total=$(ttext img.txt total)
[[ $text_total == "$total" ]] || fail "text report Total is '$text_total', JSON total is $total"
note "text image report: layout ok, Total $text_total"

# text: functions
report_text symt.txt -i db --symbols
ttext symt.txt check symbols
names=$(ttext symt.txt names | awk '{ print $2 }')
for f in work_a work_b work_c; do
	has_line "$f" "$names" || fail "--symbols text report has no row for function $f; rows: $(head -20 <<<"$names" | tr '\n' ' ')"
done
note "text symbols report: layout ok, work_a/b/c present"

# the JSON image summary agrees with the JSON function breakdown
report_json img.json -i db
itotal=$(tjson img.json total)
[[ $itotal == "$total" ]] || fail "report --json total is $itotal but report --symbols --json total is $total"
images=$(tjson img.json images)
has_line split_funcs "$images" || fail "report --json lists no image split_funcs; images: $(tr '\n' ' ' <<<"$images")"

# default database name: tally.db in the current directory
tally_ok record -F $F -- "$WORKLOADS/split_funcs" 100
[[ -d tally.db ]] || fail "record without -o did not create the directory tally.db (cwd has: $(ls | tr '\n' ' '))"
report_json def.json --symbols
n=$(tjson def.json func work_a)
((n > 0)) || fail "report without -i (tally.db) shows no samples in work_a"
note "default database tally.db: work_a has $n samples"
