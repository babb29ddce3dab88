#!/bin/bash
# A filter that matches nothing is an error, not an empty report: `report`
# (text, JSON, HTML) and `export` with --image, --pid, --comm or --label that
# select no sample say which filter matched nothing and what there is instead
# (the images, processes, commands or label values with samples), in one
# line, exit 1, and write nothing; the same filters that match still work.
. "$SRCDIR/tests/e2e/lib.sh"

tally_ok record --per-pid -F 2000 -o p.db -- "$WORKLOADS/split_images" 300
pid=$(awk -F'\t' '$2 == "split_images" { print $1; exit }' p.db/tasks)
[[ -n $pid ]] || fail "no split_images task in p.db/tasks: $(cat p.db/tasks)"

# check_refusal WHAT REGEX ARGS...: report (text, JSON, HTML) and export refuse
check_refusal() {
	local what=$1 re=$2
	shift 2
	expect_fail_with "^tally: nothing to report: 'p\.db' has no samples in the selection: $re" "$TALLY" report -i p.db "$@"
	[[ ! -s fail.out ]] || fail "report $what printed a report: $(head -5 fail.out)"
	expect_fail_with "^tally: nothing to report: 'p\.db' has no samples in the selection: $re" "$TALLY" report -i p.db --json "$@"
	[[ ! -s fail.out ]] || fail "report --json $what printed: $(head -c 300 fail.out)"
	expect_fail_with "^tally: nothing to report: 'p\.db' has no samples in the selection: $re" "$TALLY" report -i p.db --html x.html "$@"
	[[ ! -e x.html ]] || fail "report --html $what wrote x.html"
	local f
	for f in folded pprof; do
		expect_fail_with "^tally: nothing to export: 'p\.db' has no samples in the selection: $re" \
			"$TALLY" export -i p.db --format $f -o x.$f "$@"
		[[ ! -e x.$f ]] || fail "export --format $f $what wrote x.$f"
	done
	note "$what: $LAST_ERR"
}

image() {
	check_refusal "--image nosuch" "--image 'nosuch' matches no image with samples \(images with samples: [^()]*\)$" --image nosuch
	grep -q "\bsplit_images\b" <<<"$LAST_ERR" && grep -q "\blibtallywork\.so\b" <<<"$LAST_ERR" ||
		fail "the error does not name the images with samples: $LAST_ERR"
}
pid() {
	check_refusal "--pid 1" "--pid 1 has no samples \(processes with samples: .*\b$pid \(split_images\)" --pid 1
}
comm() {
	check_refusal "--comm nosuch" "--comm 'nosuch' matches no process with samples \(commands with samples: split_images\)" --comm nosuch
	# a filter that matches is no error; two that match each alone are checked together
	tally_ok report -i p.db --comm split_images --image libtallywork.so
	grep -q "libtallywork.so" out || fail "--comm split_images --image libtallywork.so lost the library: $(cat out)"
	tally_ok export -i p.db --pid "$pid" --format pprof -o ok.pb.gz
	[[ -s ok.pb.gz ]] || fail "export --pid $pid wrote nothing"
}
label() {
	tally_ok record -F 2000 -o a.db -- "$WORKLOADS/split_funcs" 150
	tally_ok record -F 2000 -o b.db -- "$WORKLOADS/split_funcs" 150
	tally_ok merge -o m.db --label host=alpha a.db --label host=beta b.db
	expect_fail_with "^tally: nothing to report: 'm\.db' has no samples in the selection: no samples have the --label values asked \(the values with samples: host=alpha, host=beta\)$" \
		"$TALLY" report -i m.db --label host=gamma
	expect_fail_with "^tally: nothing to export: 'm\.db' has no samples in the selection: no samples have the --label values asked" \
		"$TALLY" export -i m.db --label host=gamma --format pprof -o l.pb.gz
	[[ ! -e l.pb.gz ]] || fail "export --label host=gamma wrote l.pb.gz"
	tally_ok report -i m.db --label host=beta
}

subtest "--image that matches nothing" image
subtest "--pid that matches nothing" pid
subtest "--comm that matches nothing; filters that match" comm
# without --per-pid, --comm selects by the command name the recording kept
comm_label() {
	tally_ok record -F 2000 -o np.db -- "$WORKLOADS/split_images" 150
	expect_fail_with "^tally: nothing to report: 'np\.db' has no samples in the selection: --comm 'nosuch' matches no process with samples \(commands with samples: split_images\)$" \
		"$TALLY" report -i np.db --comm nosuch
	expect_fail_with "^tally: nothing to export: 'np\.db' has no samples in the selection: --comm 'nosuch'" \
		"$TALLY" export -i np.db --comm nosuch --format pprof -o np.pb.gz
	tally_ok report -i np.db --comm split_images
}

subtest "--label that matches nothing" label
subtest "--comm without --per-pid (the comm label)" comm_label
