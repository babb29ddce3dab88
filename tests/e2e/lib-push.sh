# Helpers for the push tests (t16xx-push-*.sh), sourced after lib.sh (and
# lib-export.sh for gopprof): the tests' own receiver on 127.0.0.1
# (push_receiver.py), and what it stored read back with the real readers:
# `go tool pprof` for the pprof of Pyroscope's and Parca's requests, the
# protobuf runtime over lib/push/otlp.proto for OTLP (push_decode.py).

# start_receiver DIR: the receiver, storing into DIR; sets RX (DIR) and RX_URL.
RX= RX_URL=
start_receiver() {
	RX=$1
	mkdir -p "$RX"
	python3 "$SRCDIR/tests/e2e/push_receiver.py" "$RX" 2>"$RX.err" &
	track_pid $!
	local i
	for ((i = 0; i < 200; i++)); do
		[[ -s $RX/port ]] && break
		sleep 0.05
	done
	[[ -s $RX/port ]] || fail "the receiver did not start: $(head -c 1000 "$RX.err")"
	RX_URL="http://127.0.0.1:$(cat "$RX/port")"
}

# rx_answer STATUS: what the receiver answers from now on.
rx_answer() {
	echo "$1" >"$RX/status.tmp"
	mv "$RX/status.tmp" "$RX/status"
}

# rx_count: how many requests it stored; rx_ok_count: how many it answered 2xx.
rx_count() {
	find "$RX" -name 'req-*.json' | wc -l
}
rx_ok_count() {
	local n=0 f
	for f in "$RX"/req-*.json; do
		[[ -e $f ]] || continue
		[[ $(rx_field "$f" status) == 2* ]] && n=$((n + 1))
	done
	echo "$n"
}

# rx_wait N [SECONDS]: waits until it stored at least N requests.
rx_wait() {
	local i
	for ((i = 0; i < ${2:-30} * 20; i++)); do
		(($(rx_count) >= $1)) && return 0
		sleep 0.05
	done
	fail "the receiver stored $(rx_count) requests, not $1, within ${2:-30} s; daemon log: $(tail -5 "${DB:-/nonexistent}/daemon.log" 2>/dev/null)"
}

# rx_field JSON KEY: a field of a stored request (status, path, or query.NAME, header.NAME).
rx_field() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
k = sys.argv[2]
if k.startswith("query."):
    print(m["query"].get(k[6:], [""])[0])
elif k.startswith("header."):
    h = {a.lower(): b for a, b in m["headers"].items()}
    print(h.get(k[7:].lower(), ""))
else:
    print(m[k])
EOF
}

# pprof_count FILE: the samples (the first value, samples/count) of a pprof file, by go tool pprof -raw.
pprof_count() {
	gopprof_ok "$1.raw" -raw "$1"
	awk '/^Samples:/ { on = 1; next } /^Locations/ { on = 0 } on && /^ *[0-9]+( +[0-9]+)*: / { s += $1 } END { print s + 0 }' "$1.raw"
}

# need_otlp_decoder: protoc and a python3 with the protobuf runtime (sets OTLP_PY).
OTLP_PY=
need_otlp_decoder() {
	need_tool protoc protobuf-compiler
	local p
	for p in python3 /usr/bin/python3; do
		if "$p" -c 'import google.protobuf' 2>/dev/null; then
			OTLP_PY=$p
			return 0
		fi
	done
	skip "no python3 with the protobuf runtime (Debian package python3-protobuf; scripts/deps.sh --test installs it)"
}

# otlp_json FILE OUT: the OTLP request in FILE decoded and checked (push_decode.py) into OUT.
otlp_json() {
	"$OTLP_PY" "$SRCDIR/tests/e2e/push_decode.py" otlp "$SRCDIR/lib/push" "$1" >"$2" 2>"$2.err" ||
		fail "the OTLP request $1 does not decode: $(head -c 1500 "$2.err")"
}

# otlp_count FILE: the samples of the OTLP request in FILE (its samples/count Profile).
otlp_count() {
	otlp_json "$1" "$1.json"
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sum(p["sum"] for p in d["profiles"] if p["unit"] == "count"))' "$1.json"
}

# rx_samples: the samples of every request answered 2xx, summed (decoded by format).
rx_samples() {
	local f n=0 k
	for f in "$RX"/req-*.json; do
		[[ -e $f ]] || continue
		[[ $(rx_field "$f" status) == 2* ]] || continue
		k=$(rx_count_one "${f%.json}")
		n=$((n + k))
	done
	echo "$n"
}

# rx_count_one BASE: the samples of one stored request.
rx_count_one() {
	[[ -s $1.profile ]] || fail "request $1 has no profile: $(cat "$1.json")"
	if [[ $(rx_field "$1.json" path) == */v1development/profiles ]]; then
		otlp_count "$1.profile"
	else
		pprof_count "$1.profile"
	fi
}

# push_status KEY: a push line of the daemon's status (push-last, push-backlog, push-error, push-sent).
push_status() {
	ctl --db "$DB" status
	status_val "$1"
}

# backlog_samples: the samples the daemon's status says are not sent yet.
backlog_samples() {
	push_status push-backlog | awk '{ print $1 }'
}

# wait_pushed [SECONDS]: waits until the daemon has sent everything flushed
# (its backlog 0) and says no error; fails with its status when it does not.
wait_pushed() {
	local i
	for ((i = 0; i < ${1:-120} * 10; i++)); do
		ctl --db "$DB" status
		if [[ $(status_val push-backlog | awk '{ print $1 }') == 0 && $(status_val push-error) == none ]]; then
			return 0
		fi
		sleep 0.1
	done
	fail "the daemon did not send its backlog within ${1:-120} s: $(grep '^push' "$TMP/ctl.out" | tr '\n' ' '); log: $(tail -5 "$DB/daemon.log")"
}

# flushed_samples: what the daemon wrote into its epochs, all of them (tally report --samples).
flushed_samples() {
	db_total "$DB" --samples
}

# start_burner: one CPU kept busy by a copy of the sleeper (nice 19) until
# the test ends, so that every flush has samples.
start_burner() {
	local b
	b=$(uniq_copy sleeper)
	nice -n 19 "$b" 0 burn >/dev/null 2>&1 &
	track_pid $!
}
