#!/bin/bash
# report filters: --exclude-dependent keeps only the program's image,
# --image NAME (file name or full path) one image, --top N at most N rows,
# --event NAME one event, --comm NAME the processes of that name (any
# recording), and --pid one process of a --per-pid database (a one-line error
# on a database without processes).
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record -F 4000 -o db -- "$WORKLOADS/split_images" 600
report_json all.json -i db --symbols
total=$(tjson all.json total)

# --exclude-dependent
report_json ex.json -i db --exclude-dependent
images=$(tjson ex.json images)
[[ $images == split_images ]] || fail "--exclude-dependent: images [$(tr '\n' ' ' <<<"$images")], expected only split_images"
report_text ex.txt -i db --exclude-dependent
ttext ex.txt check image --no-total
rows=$(ttext ex.txt names | awk '{ print $2 }' | sort -u)
[[ $rows == split_images ]] || fail "--exclude-dependent text report: rows [$(tr '\n' ' ' <<<"$rows")], expected only split_images"
note "--exclude-dependent: only split_images"

# --image NAME and --image /full/path
lib=$(readlink -f "$WORKLOADS/libtallywork.so")
full=$(tjson all.json func lib_work libtallywork.so)
for sel in libtallywork.so "$lib"; do
	report_json img.json -i db --image "$sel" --symbols
	images=$(tjson img.json images)
	[[ $images == libtallywork.so ]] || fail "--image $sel: images [$(tr '\n' ' ' <<<"$images")], expected only libtallywork.so"
	funcs=$(tjson img.json funcs)
	has_line lib_work "$funcs" || fail "--image $sel --symbols: no lib_work; functions: $(tr '\n' ' ' <<<"$funcs")"
	for f in own_work main; do
		! has_line "$f" "$funcs" || fail "--image $sel --symbols lists $f, which is not in libtallywork.so"
	done
	n=$(tjson img.json func lib_work)
	[[ $n == "$full" ]] || fail "--image $sel: lib_work has $n samples, $full without the filter"
	note "--image $sel: only libtallywork.so, lib_work $n samples"
done

# --top N
report_json top.json -i db --top 1
images=$(tjson top.json images)
[[ $images == split_images ]] || fail "--top 1: images [$(tr '\n' ' ' <<<"$images")], expected only the largest, split_images"
report_text top.txt -i db --top 1
ttext top.txt check image --top 1
report_text top2.txt -i db --symbols --top 2
ttext top2.txt check symbols --top 2
report_json top2.json -i db --symbols --top 2
images=$(tjson top2.json images)
while read -r i; do
	[[ -n $i ]] || continue
	k=$(tjson top2.json funcs "$i" | wc -l)
	((k <= 2)) || fail "--symbols --top 2: image $i lists $k functions: $(tjson top2.json funcs "$i" | tr '\n' ' ')"
done <<<"$images"
note "--top: at most N rows"

# --event
report_json ev.json -i db --event cpu-clock
n=$(tjson ev.json total)
[[ $n == "$total" ]] || fail "--event cpu-clock on a cpu-clock recording: total $n, expected $total"

# --pid needs a --per-pid database; --comm does not (every recording keeps
# the command name: t1381), and on a one-program recording it is all of it
expect_fail_with "per-pid" "$TALLY" report -i db --pid 1
report_json cm.json -i db --comm split_images
n=$(tjson cm.json total)
[[ $n == "$total" ]] || fail "--comm split_images on its own recording: total $n, expected $total"

tally_ok record --per-pid -F 4000 -o pp -- "$WORKLOADS/forker" 2 150 150
cp out truth.txt
report_json c1.json -i pp --comm split_funcs --symbols
report_json c2.json -i pp --comm forker --symbols
w1=$(tjson c1.json func work_a) k1=$(tjson c1.json func child_fn_0)
w2=$(tjson c2.json func work_a) k2=$(tjson c2.json func child_fn_0)
((w1 > 0 && k1 == 0)) || fail "--comm split_funcs: work_a $w1, child_fn_0 $k1 samples; expected work_a > 0 and child_fn_0 0"
((k2 > 0 && w2 == 0)) || fail "--comm forker: child_fn_0 $k2, work_a $w2 samples; expected child_fn_0 > 0 and work_a 0"
note "--comm: split_funcs has work_a ($w1), forker has child_fn_0 ($k2)"

cpid=$(awk '$1 == "child" && $2 == "child_fn_1" { print $3 }' truth.txt)
[[ -n $cpid ]] || fail "forker printed no 'child child_fn_1 PID' line"
report_json p.json -i pp --pid "$cpid" --symbols
mine=$(tjson p.json func child_fn_1)
others=0
for f in child_fn_0 grandchild_fn work_a; do
	n=$(tjson p.json func $f)
	others=$((others + n))
done
((mine > 0 && others == 0)) || fail "--pid $cpid (child_fn_1's process): child_fn_1 $mine samples, other processes' functions $others; expected > 0 and 0"
note "--pid $cpid: child_fn_1 $mine samples, nothing from other processes"
