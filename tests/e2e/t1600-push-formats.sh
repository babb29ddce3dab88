#!/bin/bash
# tally push sends a database to each backend's endpoint in the form that
# backend reads (docs/push.md), to the tests' own receiver on 127.0.0.1,
# and what arrived is read back by the real readers: the pprof of
# Pyroscope's multipart form and of Parca's JSON by go tool pprof, the OTLP
# request by the protobuf runtime over the pinned field numbers. In each the
# samples are those the database holds, the functions are named (symbolized
# here), the mappings carry the build-ids, and the labels say the host, the
# command and the user's own (-tagfocus keeps them); headers come from the
# command line and from a file; a daemon's database goes epoch by epoch.
. "$SRCDIR/tests/e2e/lib.sh"
. "$SRCDIR/tests/e2e/lib-export.sh"
. "$SRCDIR/tests/e2e/lib-push.sh"

tally_ok record -g -o a.db -- "$WORKLOADS/split_funcs" 400
report_json a.json -i a.db --samples
total=$(tjson a.json total)
((total > 50)) || fail "the recording has only $total samples"
host=$(session_key a.db host)
bid=$(awk -v p="$WORKLOADS/split_funcs" '$0 ~ p { print; exit }' a.db/images | grep -Eo '[0-9a-f]{40}' | head -1)
[[ -n $bid ]] || fail "no build-id of split_funcs in a.db/images: $(cat a.db/images)"
start_receiver "$TMP/rx"
printf 'Authorization: Bearer s3cret-token\n# a comment\nX-Scope-OrgID: tenant-7\n' >headers
chmod 600 headers

pyroscope() {
	need_tool go golang-go
	tally_ok push -i a.db --to "$RX_URL" --format pyroscope --app shop.api --label team=blue --label zone=eu-1 \
		--header 'X-Extra: one' --header-file headers
	grep -q "pushed 'a.db' to '$RX_URL/ingest' (pyroscope: $total samples" err || fail "its line: $(cat err)"
	local r=$RX/req-0001
	[[ $(rx_field $r.json path) == /ingest ]] || fail "path $(rx_field $r.json path)"
	# the series: the service's name and labels, as Pyroscope's labelset parser reads them
	local name
	name=$(rx_field $r.json query.name)
	[[ $name == "shop.api{host=$host,team=blue,zone=eu-1}" ]] || fail "name=$name"
	local from until
	from=$(rx_field $r.json query.from)
	until=$(rx_field $r.json query.until)
	((from > 1000000000 && until >= from)) || fail "from=$from until=$until"
	[[ $(rx_field $r.json header.content-type) == multipart/form-data* ]] || fail "content type $(rx_field $r.json header.content-type)"
	[[ $(rx_field $r.json header.authorization) == "Bearer s3cret-token" ]] || fail "the header file's Authorization did not arrive"
	[[ $(rx_field $r.json header.x-scope-orgid) == tenant-7 ]] || fail "the header file's X-Scope-OrgID did not arrive"
	[[ $(rx_field $r.json header.x-extra) == one ]] || fail "--header did not arrive"
	# the profile part, read by go tool pprof
	local n
	n=$(pprof_count $r.profile)
	((n == total)) || fail "pprof holds $n samples, the database $total"
	gopprof_ok tags.txt -tags $r.profile
	for want in "host:" "$host" "comm:" "split_funcs" "team:" "blue" "zone:" "eu-1"; do
		grep -q -- "$want" tags.txt || fail "go tool pprof -tags has no '$want': $(head -20 tags.txt)"
	done
	gopprof_ok top.txt -top -tagfocus team=blue $r.profile
	grep -q "work_a" top.txt || fail "-tagfocus team=blue: no work_a (not symbolized?): $(head -20 top.txt)"
	# the mapping of the program with its build-id
	grep -A200 '^Mappings' $r.profile.raw | grep -q "$bid" || fail "no mapping with the build-id $bid: $(grep -A5 '^Mappings' $r.profile.raw)"
	note "pyroscope: $n samples, name=$name, labels and build-id as read by go tool pprof"
}

parca() {
	need_tool go golang-go
	tally_ok push -i a.db --to "$RX_URL/profiles/writeraw" --format parca --app shop --label team=blue
	local r
	r=$RX/req-$(printf %04d "$(rx_count)")
	[[ $(rx_field $r.json path) == /profiles/writeraw ]] || fail "path $(rx_field $r.json path)"
	[[ $(rx_field $r.json header.content-type) == application/json ]] || fail "content type"
	python3 - $r.body "$host" <<'EOF' || fail "the WriteRawRequest JSON: $(head -c 500 $r.body)"
import json, sys
req = json.load(open(sys.argv[1]))
assert req["normalized"] is False
s = req["series"]
assert len(s) == 1 and len(s[0]["samples"]) == 1, s
labels = {l["name"]: l["value"] for l in s[0]["labels"]["labels"]}
assert labels == {"__name__": "tally", "service_name": "shop", "host": sys.argv[2], "team": "blue"}, labels
EOF
	local n
	n=$(pprof_count $r.profile)
	((n == total)) || fail "the rawProfile holds $n samples, the database $total"
	grep -A200 '^Mappings' $r.profile.raw | grep -q "$bid" || fail "no mapping with the build-id $bid"
	note "parca: $n samples in the rawProfile, series labels __name__, service_name, host, team"
}

otlp() {
	need_otlp_decoder
	tally_ok push -i a.db --to "$RX_URL" --format otlp --app shop --label team=blue
	local r
	r=$RX/req-$(printf %04d "$(rx_count)")
	[[ $(rx_field $r.json path) == /v1development/profiles ]] || fail "path $(rx_field $r.json path)"
	[[ $(rx_field $r.json header.content-type) == application/x-protobuf ]] || fail "content type"
	[[ $(rx_field $r.json header.content-encoding) == gzip ]] || fail "the OTLP body is not gzipped"
	gzip -t <$r.body || fail "the body says gzip and is not"
	otlp_json $r.profile o.json
	python3 - o.json "$total" "$host" "$bid" "$WORKLOADS/split_funcs" <<'EOF' || fail "the OTLP request: $(head -c 1500 o.json)"
import json, sys
d = json.load(open(sys.argv[1]))
total, host, bid, prog = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
counts = [p for p in d["profiles"] if p["unit"] == "count"]
assert len(counts) == 1 and counts[0]["sum"] == total, d["profiles"]
assert counts[0]["period_type"] == "cpu" and counts[0]["time"] > 0, counts
ns = [p for p in d["profiles"] if p["unit"] == "nanoseconds"]
assert len(ns) == 1 and ns[0]["sum"] > 0, d["profiles"]
assert d["resource"] == {"service.name": "shop", "host.name": host, "team": "blue"}, d["resource"]
assert {"file": prog, "build_id": bid} in d["mappings"], d["mappings"]
assert d["attrs"].get("process.executable.name=split_funcs") == total, d["attrs"]
assert any(k.startswith("work_") for k in d["leaves"]), d["leaves"]
assert d["scope"] == "tally"
EOF
	note "otlp: $total samples, resource service.name/host.name/team, build-id on the mapping, comm as process.executable.name"
}

daemon_db() {
	need_tool go golang-go
	# a daemon's database, written by hand from two recordings: each epoch goes as its own profile
	mkdir d.db
	printf 'format-version: 1\nlayout: epochs\n' >d.db/tally-daemon
	tally_ok record -o d.db/202601010000 -- "$WORKLOADS/split_funcs" 200
	tally_ok record -o d.db/202601010100 -- "$WORKLOADS/split_funcs" 200
	local before
	before=$(rx_count)
	tally_ok push -i d.db --to "$RX_URL" --format pyroscope
	(($(rx_count) == before + 2)) || fail "$(($(rx_count) - before)) requests for two epochs"
	grep -q "epoch 202601010000 of 'd.db'" err && grep -q "epoch 202601010100 of 'd.db'" err || fail "its lines: $(cat err)"
	local e n
	for e in 202601010000 202601010100; do
		before=$(rx_count)
		tally_ok push -i d.db --epoch $e --to "$RX_URL" --format pyroscope
		(($(rx_count) == before + 1)) || fail "--epoch $e sent $(($(rx_count) - before)) requests"
		report_json e.json -i d.db --epoch $e --samples
		n=$(pprof_count "$RX/req-$(printf %04d "$(rx_count)").profile")
		[[ $n == $(tjson e.json total) ]] || fail "epoch $e: pushed $n samples, it holds $(tjson e.json total)"
	done
	note "a daemon's database: one request per epoch, --epoch picks one"
}

refusals() {
	rx_answer 503
	expect_fail_with "answered 503" "$TALLY" push -i a.db --to "$RX_URL" --format pyroscope
	rx_answer 400
	expect_fail_with "answered 400" "$TALLY" push -i a.db --to "$RX_URL" --format otlp
	rx_answer 200
	# nothing listens there (the receiver's port, once it is gone, is not reused this fast)
	expect_fail_with "cannot push to 'http://127.0.0.1:1/ingest'" "$TALLY" push -i a.db --to http://127.0.0.1:1 --format pyroscope
}

subtest "pyroscope: multipart pprof at /ingest, series name, headers from the command line and a file" pyroscope
subtest "parca: WriteRawRequest JSON at /profiles/writeraw, rawProfile read by go tool pprof" parca
subtest "otlp: ExportProfilesServiceRequest at /v1development/profiles, decoded by protobuf" otlp
subtest "a daemon's database: each epoch its own profile, --epoch selects" daemon_db
subtest "a server that refuses, and none at all: one line, exit 1" refusals
