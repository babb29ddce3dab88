#!/usr/bin/env bash
# `make demo`: profile the bundled demo workload and show its reports.
set -euo pipefail
build=${1:-build}
tally="$build/tally"
db="$build/demo.db"
echo "== tally record -g -o $db --force -- $build/tally-demo"
"$tally" record -g -o "$db" --force -F 2999 -- "$build/tally-demo"
echo
echo "== tally report -i $db"
"$tally" report -i "$db"
echo
echo "== tally report -i $db --symbols --top 5"
"$tally" report -i "$db" --symbols --top 5
echo
echo "== tally report -i $db --lines --top 5 --image tally-demo"
"$tally" report -i "$db" --lines --top 5 --image tally-demo
echo
echo "== tally report -i $db --html $build/demo.html; tally export -i $db --format svg -o $build/demo.svg"
"$tally" report -i "$db" --html "$build/demo.html"
"$tally" export -i "$db" --format svg -o "$build/demo.svg"
echo
echo "Open $build/demo.html (or $build/demo.svg) in a browser: flame graphs, function tables, source."
echo "Next: 'tally events' lists what this machine can sample; docs/cli.md has every option."
