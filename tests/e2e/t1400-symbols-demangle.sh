#!/bin/bash
# C++ and Rust names, demangled in every view (report text and JSON, the
# call-graph views, annotate, the exports); inlined functions qualified by
# their namespaces, so two inlined `compare` are two names; --no-demangle
# keeps the symbol table's names; text columns show pprof's short names
# unless --full-names. cxxsplit (C++, g++) and rsplit (Rust, rustc, built
# here when rustc is installed) print their own split.
. "$SRCDIR/tests/e2e/lib.sh"

W="$WORKLOADS/cxxsplit"
[[ -x $W ]] || skip "the C++ workload was not built (no C++ compiler when meson set the build up: Debian package g++)"
tally_ok record -g -F 2000 -o db -- "$W" 1500
cp out truth.txt

cxx_json() {
	report_json sym.json -i db --symbols --image cxxsplit
	python3 - sym.json >shares.txt <<'PY' || fail "--symbols JSON: $(cat shares.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
f = {}
for e in d["events"]:
    for i in e["images"]:
        for x in i["functions"]:
            f[x["name"]] = f.get(x["name"], 0) + x["samples"]
bad = [n for n in f if n.startswith("_Z")]
if bad:
    print("mangled names left: %s" % bad); sys.exit(1)
want = {"ns_a::Grid<int>::sweep(int)": "ns_a::Grid::sweep", "ns_b::churn(double)": "ns_b::churn",
        "ns_a::compare": "ns_a::compare", "ns_b::compare": "ns_b::compare"}
missing = [n for n in want if n not in f]
if missing:
    print("no rows %s among %s" % (missing, sorted(f))); sys.exit(1)
tot = sum(f[n] for n in want)
for n, t in want.items():
    print(t, "%.2f" % (100.0 * f[n] / tot), f[n], tot)
PY
	while read -r fn share n tot; do
		share_near "$share" "$tot" "$(truth "$fn" truth.txt)" "--symbols: $fn ($n samples)"
	done <shares.txt
}
subtest "C++ names demangled in --symbols JSON, in the measured split; inlined compare twice, qualified" cxx_json

cxx_text() {
	report_text sym.txt -i db --symbols --image cxxsplit
	grep -Eq '  ns_a::Grid::sweep$' sym.txt || fail "text --symbols has no short 'ns_a::Grid::sweep' row: $(head -c 1500 sym.txt)"
	grep -Eq '  ns_b::churn$' sym.txt || fail "text --symbols has no short 'ns_b::churn' row: $(head -c 1500 sym.txt)"
	grep -Eq '  ns_a::compare \(inlined\)$' sym.txt || fail "text --symbols has no 'ns_a::compare (inlined)': $(head -c 1500 sym.txt)"
	grep -Eq '  ns_b::compare \(inlined\)$' sym.txt || fail "text --symbols has no 'ns_b::compare (inlined)': $(head -c 1500 sym.txt)"
	! grep -q '_Z' sym.txt || fail "text --symbols has mangled names: $(grep _Z sym.txt | head -3)"
	report_text full.txt -i db --symbols --image cxxsplit --full-names
	grep -Fq 'ns_a::Grid<int>::sweep(int)' full.txt || fail "--full-names does not show 'ns_a::Grid<int>::sweep(int)': $(head -c 1500 full.txt)"
	report_text raw.txt -i db --symbols --image cxxsplit --no-demangle
	grep -Fq '_ZN4ns_a4GridIiE5sweepEi' raw.txt || fail "--no-demangle does not show '_ZN4ns_a4GridIiE5sweepEi': $(head -c 1500 raw.txt)"
	report_text tree.txt -i db --callers ns_a::compare
	grep -Fq 'ns_a::compare (inlined)  [cxxsplit]' tree.txt || fail "--callers by the short name: $(head -c 1500 tree.txt)"
	grep -Fq 'ns_b::mix  [cxxsplit]' tree.txt || fail "--callers ns_a::compare has no caller ns_b::mix: $(head -c 1500 tree.txt)"
}
subtest "text: short names, --full-names, --no-demangle, --callers by short name" cxx_text

cxx_annotate() {
	for n in ns_b::churn 'ns_b::churn(double)' _ZN4ns_b5churnEd; do
		"$TALLY" annotate -i db "$n" >ann.txt 2>ann.err || fail "annotate '$n' failed: $(cat ann.err)"
		grep -Fq '# ns_b::churn(double)  [cxxsplit]' ann.txt || fail "annotate '$n' header: $(head -3 ann.txt)"
	done
}
subtest "annotate takes the short, full and mangled name" cxx_annotate

cxx_exports() {
	tally_ok export -i db --format folded -o f.folded
	grep -Fq ';ns_b::mix(int, double*, double*);ns_a::compare ' f.folded || fail "folded stacks lack 'ns_b::mix(...);ns_a::compare': $(head -3 f.folded)"
	! grep -q '_Z' f.folded || fail "folded stacks have mangled names: $(grep -m3 _Z f.folded)"
	tally_ok export -i db --format callgrind -o cg.out
	grep -Fq 'fn=' cg.out && ! grep -E '^c?fn=.*_Z' cg.out | grep . >/dev/null || fail "callgrind has mangled names: $(grep -m3 -E '^c?fn=.*_Z' cg.out)"
	grep -Fq 'ns_a::Grid<int>::sweep(int)' cg.out || fail "callgrind has no 'ns_a::Grid<int>::sweep(int)'"
	tally_ok export -i db --format svg -o f.svg
	grep -Fq 'ns_a::Grid&lt;int&gt;::sweep(int)' f.svg || fail "the SVG has no 'ns_a::Grid<int>::sweep(int)'"
	tally_ok export -i db --format folded -o raw.folded --no-demangle
	grep -Fq '_ZN4ns_b5churnEd' raw.folded || fail "export --no-demangle: no '_ZN4ns_b5churnEd' in the folded stacks"
}
subtest "exports (folded, callgrind, SVG) demangled; export --no-demangle" cxx_exports

rust_names() {
	local rustc
	rustc=$(command -v rustc || true)
	[[ -n $rustc || ! -x $HOME/.cargo/bin/rustc ]] || rustc=$HOME/.cargo/bin/rustc
	[[ -n $rustc ]] || skip "rustc is not installed (the Rust case needs it; Debian package rustc)"
	"$rustc" -O -g -C force-frame-pointers=yes -o rsplit "$SRCDIR/tests/workloads/rsplit.rs" 2>rustc.err ||
		skip "rustc could not build the Rust workload: $(head -c 300 rustc.err)"
	tally_ok record -F 2000 -o rdb -- ./rsplit 1200
	cp out rtruth.txt
	report_json r.json -i rdb --symbols --image rsplit
	python3 - r.json <<'PY' || fail "Rust --symbols: mangled names left"
import json, sys
d = json.load(open(sys.argv[1]))
bad = [x["name"] for e in d["events"] for i in e["images"] for x in i["functions"] if x["name"].startswith(("_ZN", "_R"))]
print(bad[:5]); sys.exit(1 if bad else 0)
PY
	report_json rn.json -i rdb --symbols --image rsplit --no-inline
	python3 - rn.json >rshares.txt <<'PY' || fail "Rust --symbols --no-inline: $(cat rshares.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["name"]: x["samples"] for e in d["events"] for i in e["images"] for x in i["functions"]}
want = {"rsplit::grid::Grid<T>::sweep": "rsplit::grid::Grid::sweep", "rsplit::churn": "rsplit::churn"}
if any(n not in f for n in want):
    print("no %s among %s" % (list(want), sorted(f)[:20])); sys.exit(1)
tot = sum(f[n] for n in want)
for n, t in want.items():
    print(t, "%.2f" % (100.0 * f[n] / tot), f[n], tot)
PY
	while read -r fn share n tot; do
		share_near "$share" "$tot" "$(truth "$fn" rtruth.txt)" "Rust --symbols --no-inline: $fn ($n samples)"
	done <rshares.txt
	report_text r.txt -i rdb --symbols --image rsplit --no-inline
	grep -Eq '  rsplit::grid::Grid::sweep$' r.txt || fail "Rust text: no short 'rsplit::grid::Grid::sweep': $(head -c 1000 r.txt)"
}
subtest "Rust names demangled (legacy mangling, hash dropped), in the measured split" rust_names

