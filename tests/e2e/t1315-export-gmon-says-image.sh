#!/bin/bash
# export --format gmon says which image it wrote on its closing line: the
# executable it chose (the one with the most samples) without --image, the
# one named with it, and what its bins count (time in ticks of 1/10000 s);
# gprof reads the file against that image.
. "$SRCDIR/tests/e2e/lib.sh"

"$TALLY" record -o s.db -- "$WORKLOADS/split_funcs" 300 >/dev/null 2>rec.err || fail "record: $(cat rec.err)"
"$TALLY" export -i s.db --format gmon -o g.out 2>err || fail "export: $(cat err)"
grep -q "^tally: wrote 'g.out' (gmon, [0-9]* bytes; of image '$WORKLOADS/split_funcs', the executable with the most samples; time in ticks of 0\\.0001 s (rate 10000 Hz), each sample weighted by its period)\$" err ||
	fail "the closing line does not name the image: $(cat err)"
libc=$("$TALLY" report -i s.db --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(next((r["path"] for r in d["events"][0]["images"] if r["name"].startswith("libc")), ""))' 2>/dev/null || true)
if [[ -n $libc ]]; then
	"$TALLY" export -i s.db --format gmon --image "$libc" -o g2.out 2>err2 || fail "export --image libc: $(cat err2)"
	grep -q "^tally: wrote 'g2.out' (gmon, [0-9]* bytes; of image '$libc'; time in ticks of 0\\.0001 s (rate 10000 Hz), each sample weighted by its period)\$" err2 || fail "--image: the closing line: $(cat err2)"
else
	note "no libc samples: --image not checked"
fi
if command -v gprof >/dev/null; then
	gprof -b "$WORKLOADS/split_funcs" g.out >gp.txt 2>gp.err || fail "gprof: $(cat gp.err)"
	grep -q work_a gp.txt || fail "gprof shows no work_a: $(head -10 gp.txt)"
fi
