#!/bin/bash
# A stripped binary (objcopy --strip-debug --strip-unneeded, with a
# .gnu_debuglink) whose debug file sits in a temporary build-id directory
# given by --debug-dir resolves the same functions and lines as the unstripped
# binary; without it the report says where it looked; the debuglink next to
# the binary is found on its own; a debug file with another build-id at the
# build-id path is never used (--explain says so).
. "$SRCDIR/tests/e2e/lib.sh"

command -v objcopy >/dev/null || skip "no objcopy (binutils)"
mkdir bin full dbg other
cp "$WORKLOADS/inline_chain" full/inline_chain
bid=$(readelf -n full/inline_chain | awk '/Build ID/ { print $3 }')
[[ -n $bid ]] || skip "the workload has no GNU build-id"
objcopy --only-keep-debug full/inline_chain ic.debug
objcopy --strip-debug --strip-unneeded --add-gnu-debuglink=ic.debug full/inline_chain bin/inline_chain
! readelf -S bin/inline_chain | grep -E '\.symtab|\.debug_info' >/dev/null || fail "test setup: objcopy left .symtab or .debug_info"
mkdir -p "dbg/.build-id/${bid:0:2}"
mv ic.debug "dbg/.build-id/${bid:0:2}/${bid:2}.debug"

tally_ok record -F 2000 -o db -- ./bin/inline_chain 700

rows() { # rows FILE: "function|file:line samples" per line row of inline_chain
	python3 - "$1" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
for e in d["events"]:
    for i in e["images"]:
        if i["name"] == "inline_chain":
            for r in i.get("lines", i.get("functions", [])):
                print("%s%s|%s:%s %d" % (r.get("function", r.get("name")), " (inlined)" if r.get("inlined") else "",
                                        os.path.basename(r.get("file") or "-"), r.get("line"), r["samples"]))
PY
}
# the reference: the unstripped copy, found by --image-path (same build-id)
report_json ref.json -i db --lines --image-path full
rows ref.json | sort >ref.txt
grep -q '^leaf_mix (inlined)|inline_chain.c' ref.txt || fail "the unstripped copy gives no leaf_mix line: $(cat ref.txt)"

# stripped, no debug file found: no names, no lines, and --explain says where it looked
report_json none.json -i db --lines
! grep -q leaf_mix <(rows none.json) || fail "the stripped binary named leaf_mix without its debug file"
report_text explain.txt -i db --explain inline_chain
grep -q "/usr/lib/debug/.build-id/${bid:0:2}/${bid:2}.debug' (system build-id directory): not there" explain.txt ||
	fail "--explain does not say it looked in /usr/lib/debug/.build-id: $(cat explain.txt)"
grep -q "\.gnu_debuglink" explain.txt || fail "--explain does not mention the debuglink: $(cat explain.txt)"
grep -Eq 'lines and inlines: none' explain.txt || fail "--explain does not say why there are no lines: $(cat explain.txt)"

# --debug-dir: the same functions, lines and counts as the unstripped copy
report_json dd.json -i db --lines --debug-dir "$TMP/nothing-here" --debug-dir dbg
rows dd.json | sort >dd.txt
diff ref.txt dd.txt >/dev/null || fail "--debug-dir gives other rows than the unstripped binary: $(diff ref.txt dd.txt | head -20)"
report_json ddsym.json -i db --symbols --debug-dir dbg
report_json refsym.json -i db --symbols --image-path full
diff <(rows refsym.json | sort) <(rows ddsym.json | sort) >/dev/null || fail "--symbols with --debug-dir differs from the unstripped binary"
note "stripped + --debug-dir: $(wc -l <dd.txt) line rows, identical to the unstripped binary's"

# the debuglink next to the binary is found without any option
cp "dbg/.build-id/${bid:0:2}/${bid:2}.debug" bin/ic.debug
report_json dl.json -i db --lines
diff ref.txt <(rows dl.json | sort) >/dev/null || fail "the debuglink next to the binary gives other rows: $(diff ref.txt <(rows dl.json | sort) | head)"
rm bin/ic.debug
note "debuglink next to the binary: found"

# a debug file with another build-id at this build-id's path is never used
oid=$(readelf -n "$WORKLOADS/split_funcs" | awk '/Build ID/ { print $3 }')
mkdir -p "other/.build-id/${bid:0:2}"
objcopy --only-keep-debug "$WORKLOADS/split_funcs" "other/.build-id/${bid:0:2}/${bid:2}.debug"
report_json wrong.json -i db --lines --debug-dir other
! grep -Eq 'work_a|leaf_mix' <(rows wrong.json) || fail "a debug file with build-id $oid was used for $bid: $(rows wrong.json | head)"
report_text wrong.txt -i db --explain inline_chain --debug-dir other
grep -q "has build-id $oid, the profile recorded $bid: another file, not used" wrong.txt ||
	fail "--explain does not say the debug file has another build-id: $(cat wrong.txt)"
note "debug file with another build-id: not used, --explain says so"
