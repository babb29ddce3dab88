#!/bin/bash
# tally annotate on a workload built with -g whose one function spends its
# time in a known loop (the lines marked HOT in tests/workloads/annot.c):
# those lines carry most samples, --asm shows instructions with samples that
# add up and come from those lines; the same for a stripped copy whose debug
# info is found through .gnu_debuglink; a moved source tree is found with
# --source-dir; names in two images need --image; unknown names and bad
# arguments are one-line errors.
. "$SRCDIR/tests/e2e/lib.sh"

src="$SRCDIR/tests/workloads/annot.c"
hot=$(grep -n 'HOT \*/' "$src" | cut -d: -f1 | tr '\n' ' ')
[[ -n $hot ]] || fail "no HOT lines in $src"
tally_ok record -F 2000 -o db -- "$WORKLOADS/annot" 700

# check_json FILE [asm]: hot_function's HOT lines hold >= 80% of its samples
check_json() {
	python3 - "$1" "$hot" "${2:-}" <<'EOF' || fail "annotate JSON $1: see above; $(head -c 1500 "$1")"
import json, sys
f = json.load(open(sys.argv[1]))["functions"]
hot = set(int(x) for x in sys.argv[2].split())
assert len(f) == 1, "expected one hot_function, got %d" % len(f)
f = f[0]
s = f["samples"]
assert s >= 300, "only %d samples" % s
assert f["source"]["file"].endswith("tests/workloads/annot.c"), f["source"]
on_hot = sum(l["samples"] for l in f["lines"] if l["file"] == f["source"]["file"] and l["line"] in hot)
assert on_hot >= 0.8 * s, "the HOT lines %s hold %d of %d samples: %s" % (sorted(hot), on_hot, s,
    [(l["line"], l["samples"]) for l in f["lines"]])
assert sum(l["samples"] for l in f["lines"]) + f["no_line_samples"] == s
if sys.argv[3] == "asm":
    ins = f["instructions"]
    assert ins and all(i["asm"] for i in ins), "no instructions"
    assert sum(i["samples"] for i in ins) == s, "instructions hold %d of %d" % (sum(i["samples"] for i in ins), s)
    with_samples = [i for i in ins if i["samples"]]
    assert len(with_samples) >= 3, "samples on %d instructions only" % len(with_samples)
    on_hot = sum(i["samples"] for i in ins if i["line"] in hot)
    assert on_hot >= 0.8 * s, "instructions of the HOT lines hold %d of %d" % (on_hot, s)
    addrs = [int(i["addr"], 16) for i in ins]
    assert addrs == sorted(addrs) and addrs[0] == int(f["addr"], 16)
print("ok: %s: %d samples, %d on the HOT lines" % (sys.argv[1], s, on_hot))
EOF
}

json() {
	"$TALLY" annotate -i db --samples hot_function --json >a.json 2>a.err || fail "annotate --json failed: $(cat a.err)"
	check_json a.json
	"$TALLY" annotate -i db --samples hot_function --json --asm >asm.json 2>asm.err || fail "annotate --asm --json failed: $(cat asm.err)"
	check_json asm.json asm
}

# text: the source with a count on the HOT lines, the percentages of the function
text() {
	"$TALLY" annotate -i db --samples hot_function >a.txt 2>a.err || fail "annotate failed: $(cat a.err)"
	[[ ! -s a.err ]] || fail "annotate wrote to stderr: $(cat a.err)"
	grep -q "^# source: $src$" a.txt || fail "annotate does not name the source $src: $(head -5 a.txt)"
	python3 - a.txt "$hot" <<'EOF' || fail "text annotation: see above; $(cat a.txt)"
import re, sys
hot = set(int(x) for x in sys.argv[2].split())
rows = {}
for l in open(sys.argv[1]):
    m = re.match(r"^ *(\d+)? +(?:([\d.]+)%)? +(\d+)  (.*)$", l.rstrip("\n"))
    if m:
        rows[int(m.group(3))] = (int(m.group(1) or 0), float(m.group(2) or 0), m.group(4))
assert hot <= set(rows), "HOT lines %s not all listed: %s" % (sorted(hot), sorted(rows))
assert all("HOT" in rows[h][2] for h in hot), "source text is not next to its line number"
pct = sum(rows[h][1] for h in hot)
assert pct >= 80, "the HOT lines show %.2f%%" % pct
assert abs(sum(r[1] for r in rows.values()) - 100) < 0.5, "percentages do not add up to 100"
print("ok: text: HOT lines %.2f%%" % pct)
EOF
}

asm() {
	local n
	"$TALLY" annotate -i db --samples hot_function --asm >asm.txt 2>asm.err || fail "annotate --asm failed: $(cat asm.err)"
	grep -Eq "^ +annot\.c:[0-9]+  .*HOT" asm.txt || fail "--asm shows no source line above its instructions: $(head -20 asm.txt)"
	n=$(grep -Ec '^ +[0-9]+ +[0-9.]+% +[0-9a-f]+  [a-z]' asm.txt || true)
	((n >= 3)) || fail "--asm shows $n instructions with samples: $(cat asm.txt)"
	note "--asm: $n instructions with samples"
}

# --- a stripped copy: the debug file found through .gnu_debuglink
stripped() {
	need_tool objcopy binutils
	mkdir strip && cp "$WORKLOADS/annot" strip/annot
	objcopy --only-keep-debug strip/annot strip/annot.debug
	objcopy --strip-debug --strip-unneeded strip/annot
	objcopy --add-gnu-debuglink=strip/annot.debug strip/annot
	! readelf -S strip/annot | grep debug_line >/dev/null || fail "test setup: strip left .debug_line in the binary"
	tally_ok record -F 2000 -o sdb -- strip/annot 700
	"$TALLY" annotate -i sdb --samples hot_function --json --asm >s.json 2>s.err || fail "annotate of the stripped binary failed: $(cat s.err)"
	check_json s.json asm
	# without its debug file it cannot be named at all
	mv strip/annot.debug hidden.debug
	expect_fail_with "^tally: no function 'hot_function' with cpu-clock samples in 'sdb' \(see 'tally report -i sdb --symbols'\)$" \
		"$TALLY" annotate -i sdb --samples hot_function
	mv hidden.debug strip/annot.debug
}

# --- a source tree moved since the build: found with --source-dir
moved() {
	local sd
	need_tool cc gcc
	mkdir -p tree/sub
	sed -n '/^WL_NOINLINE uint64_t hot_function/,/^}/p' "$src" | sed 's/WL_NOINLINE/__attribute__((noinline, noipa))/' >tree/sub/moved.c
	cat >>tree/sub/moved.c <<'EOC'
#include <time.h>
volatile unsigned long long sink;
int main(void)
{
	struct timespec ts;
	do {
		sink += hot_function(40000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	} while (ts.tv_sec == 0 && ts.tv_nsec < 400000000);
	return 0;
}
EOC
	sed -i '1i #include <stdint.h>' tree/sub/moved.c
	(cd tree && cc -O2 -g -o ../moved sub/moved.c) || fail "cc failed"
	tally_ok record -F 2000 -o mdb -- ./moved
	mv tree elsewhere
	"$TALLY" annotate -i mdb --samples hot_function >m.txt 2>m.err || fail "annotate with the source moved failed: $(cat m.err)"
	grep -q "^# source '$TMP/tree/sub/moved.c' not found (point --source-dir at its tree)" m.txt ||
		fail "annotate does not say the source is missing: $(head -5 m.txt)"
	grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9a-f]+  [a-z]' m.txt || fail "with the source missing, annotate shows no disassembly: $(cat m.txt)"
	for sd in elsewhere "$TMP/tree=$TMP/elsewhere"; do
		"$TALLY" annotate -i mdb --samples hot_function --source-dir "$sd" >m2.txt 2>m2.err || fail "annotate --source-dir $sd failed: $(cat m2.err)"
		grep -q "^# source: .*elsewhere/sub/moved.c$" m2.txt || fail "--source-dir $sd: source not found: $(head -5 m2.txt)"
		grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9]+  .*x \^= x' m2.txt || fail "--source-dir $sd: no samples next to the loop's text: $(cat m2.txt)"
		note "--source-dir $sd: found $(grep '^# source:' m2.txt)"
	done
}

# --- one name in two images: --image chooses
two_images() {
	cp "$WORKLOADS/annot" annot2
	tally_ok record -F 2000 -o two.db -- sh -c "'$WORKLOADS/annot' 300 && ./annot2 300"
	expect_fail_with "^tally: function 'hot_function' is in several images: annot(2)?, annot(2)? \(choose one with --image NAME\)$" \
		"$TALLY" annotate -i two.db --samples hot_function
	"$TALLY" annotate -i two.db --samples hot_function --image annot2 --json >two.json 2>two.err || fail "annotate --image annot2 failed: $(cat two.err)"
	python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["functions"]; assert len(f)==1 and f[0]["image"]=="annot2", f' two.json ||
		fail "--image annot2 did not choose annot2: $(head -c 500 two.json)"
}

# --- errors: one line each
errors() {
	expect_fail_with "^tally: no function 'no_such_fn' with cpu-clock samples in 'db' \(see 'tally report -i db --symbols'\)$" \
		"$TALLY" annotate -i db --samples no_such_fn
	expect_fail_with "^tally: no image 'libnothing.so' with samples in 'db'" "$TALLY" annotate -i db --samples hot_function --image libnothing.so
	expect_fail_with "^tally: event 'page-faults' is not in 'db' \(it has: cpu-clock\)$" "$TALLY" annotate -i db --samples hot_function --event page-faults
	expect_fail_with "^tally: name a function to annotate" "$TALLY" annotate -i db
	expect_fail_with "^tally: unexpected argument 'main': annotate takes one function" "$TALLY" annotate -i db --samples hot_function main
	expect_fail_with "^tally: no database at 'nothing.db'" "$TALLY" annotate -i nothing.db --samples hot_function
	((LAST_RC == 1)) || fail "annotate of a missing database exited $LAST_RC, expected 1"
}

subtest "--json: the HOT lines hold the samples" json
subtest "text: the source with its counts" text
subtest "--asm: instructions under their source lines" asm
subtest "a stripped binary, its debug file by .gnu_debuglink" stripped
subtest "a moved source tree and --source-dir" moved
subtest "one name in two images: --image" two_images
subtest "errors: one line each" errors
