#!/usr/bin/env bash
# Same outputs: every report view and export of each database, written by
# two tally builds, compared byte for byte (pprof: the message, gunzipped;
# the gzip bytes may differ). For changes meant to make the views faster
# without changing what they write (docs/performance.md, "Scale").
#   bench/same.sh BEFORE_TALLY AFTER_TALLY DB... [--ref DIR] [--views LIST]
# --ref DIR keeps the before build's outputs there and reuses them (they
# take long to make for a database of millions of stacks); --views a
# comma-separated subset of: children childjson callgraph json tree html
# folded foldedcomm folded1 pprof pprof1 speedscope speedscope1 svg svg1
# callgrind (the 1 variants: --percent-limit 1; foldedcomm: --comm-root).
# Exit 1 when an output differs or a view fails in one build only.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
[ $# -ge 3 ] || { bench_help >&2; exit 2; }
before=$1 after=$2; shift 2
dbs=() ref="" views=children,childjson,callgraph,json,tree,html,folded,foldedcomm,folded1,pprof,pprof1,speedscope,speedscope1,svg,svg1,callgrind
while [ $# -gt 0 ]; do
	case "$1" in
	--ref) ref=$2; shift 2 ;;
	--views) views=$2; shift 2 ;;
	*) dbs+=("$1"); shift ;;
	esac
done
tmp=$(mktemp -d /tmp/tally-same.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
[ -n "$ref" ] || ref=$tmp/ref
mkdir -p "$ref"

# args VIEW DB OUT: the command line of a view, writing OUT (stdout for reports)
args() {
	local v=$1 db=$2 o=$3
	case $v in
	children) echo "report -i $db --children" ;;
	childjson) echo "report -i $db --children --json" ;;
	callgraph) echo "report -i $db --callgraph" ;;
	json) echo "report -i $db --json" ;;
	tree) echo "report -i $db --tree --percent-limit 0.5" ;;
	html) echo "report -i $db --html $o" ;;
	folded) echo "export -i $db --format folded -o $o" ;;
	foldedcomm) echo "export -i $db --format folded --comm-root -o $o" ;;
	folded1) echo "export -i $db --format folded --percent-limit 1 -o $o" ;;
	pprof) echo "export -i $db --format pprof -o $o" ;;
	pprof1) echo "export -i $db --format pprof --percent-limit 1 -o $o" ;;
	speedscope) echo "export -i $db --format speedscope -o $o" ;;
	speedscope1) echo "export -i $db --format speedscope --percent-limit 1 -o $o" ;;
	svg) echo "export -i $db --format svg -o $o" ;;
	svg1) echo "export -i $db --format svg --percent-limit 1 -o $o" ;;
	callgrind) echo "export -i $db --format callgrind -o $o" ;;
	*) echo "bench: no view '$v'" >&2; exit 2 ;;
	esac
}

# make TALLY VIEW DB OUT: OUT holds what the view wrote (or "failed: ...")
make_out() {
	local t=$1 v=$2 db=$3 out=$4 rc=0
	# shellcheck disable=SC2046
	case $v in
	children | childjson | callgraph | json | tree) "$t" $(args "$v" "$db" -) >"$out" 2>"$out.err" || rc=$? ;;
	*) "$t" $(args "$v" "$db" "$out.raw") >/dev/null 2>"$out.err" || rc=$? ;;
	esac
	if ((rc)); then
		{ echo "failed: exit $rc"; cat "$out.err"; } >"$out"
	elif [ -f "$out.raw" ]; then
		case $v in pprof*) gzip -dc "$out.raw" >"$out" ;; *) mv "$out.raw" "$out" ;; esac
	fi
	rm -f "$out.raw" "$out.err"
}

bad=0
for db in "${dbs[@]}"; do
	key=$(echo "$(cd "$db" && pwd)" | tr '/' '_')
	for v in ${views//,/ }; do
		r=$ref/$key.$v
		[ -f "$r" ] || make_out "$before" "$v" "$db" "$r"
		make_out "$after" "$v" "$db" "$tmp/a"
		if cmp -s "$r" "$tmp/a"; then
			echo "same $(basename "$db") $v ($(wc -c <"$r") bytes)"
		else
			echo "DIFFERENT $(basename "$db") $v: $(cmp "$r" "$tmp/a" 2>&1 | head -1)"
			bad=1
		fi
	done
done
exit $bad
