#!/bin/bash
# A pprof profile large enough to be compressed in pieces side by side (a
# piece per 32768 samples, and one for the fields after the samples:
# 100000 distinct stacks make five, about 3.8 MB in all) is one whole gzip
# stream: gzip -t accepts it (its CRC and length are the whole message's),
# and the message it holds decodes to every stack's sample (100000, the
# gen-bigdb database's distinct stacks) with the session's samples in all;
# `go tool pprof` reads the same total. The pieces are the same on any
# machine (only how many run at once depends on the CPUs), so the file is
# the same from one run to the next.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"

python3 "$SRCDIR/tests/e2e/gen-bigdb.py" big.db 100000 >gen.out || fail "gen-bigdb.py failed: $(cat gen.out)"
total=$(session_key big.db samples)
tally_ok export -i big.db --format pprof -o big.pb.gz

check_stream() {
	gzip -t big.pb.gz || fail "big.pb.gz is not one whole gzip stream"
	zcat big.pb.gz >big.pb || fail "zcat big.pb.gz failed"
	local n
	n=$(stat -c %s big.pb)
	((n >= 2 * 1048576)) || fail "the message is $n bytes: too small to be compressed in pieces"
	note "a message of $n bytes, compressed in pieces, is one gzip stream"
}
subtest "the gzip stream is whole" check_stream

# the message decoded by hand (protobuf's wire format): samples (field 2),
# each's first value (field 2 of Sample, packed), locations (field 4)
check_message() {
	[[ -s big.pb ]] || skip "no message (the stream did not decompress)"
	python3 - big.pb >counts.txt <<'PY' || fail "the message does not decode: $(cat counts.txt)"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests", "e2e"))
from mutate import fields, varint  # protobuf's wire format, read by hand
d = open(sys.argv[1], "rb").read()
samples = locations = total = 0
for f, _, v in fields(d):
    if f == 2:
        samples += 1
        for g, _, u in fields(v):
            if g == 2:
                total += varint(u, 0)[0]
    elif f == 4:
        locations += 1
print(samples, locations, total)
PY
	local s l t
	read -r s l t <counts.txt
	((s == 100000)) || fail "$s samples in the message, not the database's 100000 stacks"
	((l > 0)) || fail "no locations in the message"
	((t == total)) || fail "the samples add up to $t, the session counted $total"
	note "$s samples, $l locations, $t samples in all"
}
subtest "every stack's sample is in the message" check_message

check_gopprof() {
	need_tool go golang-go
	gopprof_ok top.txt -sample_index=samples -top big.pb.gz
	local t
	t=$(awk '/^Showing nodes accounting for/ { v = $(NF - 1); print v; exit }' top.txt)
	[[ $t == "$total" ]] || fail "go tool pprof shows a total of '$t', the session counted $total: $(head -5 top.txt)"
	note "go tool pprof: $t samples"
}
subtest "go tool pprof reads the total" check_gopprof

check_same() {
	tally_ok export -i big.db --format pprof -o again.pb.gz
	cmp -s big.pb.gz again.pb.gz || fail "two exports of one database differ"
	note "two exports give the same $(stat -c %s big.pb.gz) bytes"
}
subtest "the same file from one run to the next" check_same
