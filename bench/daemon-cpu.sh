#!/usr/bin/env bash
# bench/daemon-cpu.sh [BUILD_DIR] [--rounds N] [--seconds S] [--hz HZ] [--before TALLY] [--together] [--churn]
#                     [--perf-buildid-mmap] [--push]
#
# The profiler's own CPU time while it samples the whole system: `tally daemon`
# (its default, the samples counted in the kernel where it can, and with
# --sample-mechanism ring, every sample through the ring buffers) and
# `perf record -a` at the same rate per CPU,
# with every CPU kept busy by a spinning loop. Each profiler's CPU time is read
# with `perf stat -e task-clock -p PID` over the same window. Prints one
# Markdown table: median ms of CPU per second of sampling, and per sample
# (tally's sample count from 'tally ctl status').
# By default the profilers run in turn (the order reverses each round). With
# --together they all run at once in each round and are measured over the same
# window: on a machine shared with other work each then sees the same load (the
# others' own work is part of it, a few tenths of a ms a second), which the
# rounds in turn cannot promise.
# --churn also starts a short process every 50 ms (`ls -l /usr/bin`: forks, execs,
# maps and exits, and many places in ls and libc), as a busy machine does: every
# profiler then meets new processes, files and places all the time.
# --before TALLY adds another tally binary (an older build) to every round,
# with its default and, if it has it, with --sample-mechanism bpf: a column each.
# Flushes: each tally daemon is flushed twice ('tally ctl flush') just before the
# window, so the window holds no flush, nor the first one's one-time reading of
# /proc/kallsyms, and the epoch has the two copies on disk that a daemon at work
# has (the flush after writes over the older one: docs/daemon.md); and once
# after it: that flush's CPU time (the task-clock over 2 s around it, less the
# daemon's rate in the window) is the cost of writing what the window gathered.
# Rows then give it, and the rate with a flush every 60 s (the daemon's default
# --flush-interval) added, as if each minute's flush cost what this one did
# (with --seconds 60 or more, it is a minute's worth).
# perf record writes as it goes (its writes are in its window), and does its
# deferred work when it stops: it reads back all it recorded to mark the
# binaries that were hit and save their build-ids. That end is measured too
# (the task-clock from SIGINT to its exit) and counted per second recorded:
# the last row adds each profiler's deferred work to its window's rate.
# --perf-buildid-mmap adds `perf record -a --buildid-mmap`: the kernel puts each
# binary's build-id in its mmap record, so perf has no end to do (and keeps no
# build-id cache). It runs alone, after the others (the kernel gives every
# listener of an mmap the record with a build-id once one asks: docs/sampling.md).
# --push adds two tally daemons that push what each flush adds (docs/push.md)
# to a receiver on 127.0.0.1 (tests/e2e/push_receiver.py): --push-format
# pyroscope (gzipped pprof) and otlp. Their flush row is the flush and its
# push together (perf stat from the flush until the status counts the push
# sent; the push runs on the daemon's own thread), and a row gives the bytes
# of one push's profile, the OTLP message beside the pprof.
#
# Needs: perf, bc; root (or perf_event_paranoid <= 0); python3 for --push.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
build=build rounds=5 secs=15 hz=999 before= together=0 churn=0 bidmmap=0 push=0
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--before) before=$2; shift 2 ;;
	--together) together=1; shift ;;
	--churn) churn=1; shift ;;
	--perf-buildid-mmap) bidmmap=1; shift ;;
	--push) push=1; shift ;;
	-h|--help) bench_help; exit 0 ;;
	-*) echo "bench: unknown option '$1'" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
bench_tally "$build"
tmp=$(mktemp -d /tmp/tally-bench-dcpu.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
ncpu=$(nproc)
rx_url=
if ((push)); then
	mkdir -p "$tmp/rx"
	python3 "$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/push_receiver.py" "$tmp/rx" 2>/dev/null &
	pids+=($!)
	for ((i = 0; i < 100; i++)); do [ -s "$tmp/rx/port" ] && break; sleep 0.05; done
	rx_url="http://127.0.0.1:$(cat "$tmp/rx/port")"
fi
is_push() { case $1 in push-*) return 0 ;; *) return 1 ;; esac; }

spin() {
	for ((c = 0; c < ncpu; c++)); do timeout "$secs" sh -c 'while :; do :; done' & spins+=($!); pids+=($!); done
	if ((churn)); then
		timeout "$secs" sh -c 'while :; do ls -l /usr/bin >/dev/null; sleep 0.05; done' &
		spins+=($!)
		pids+=($!)
	fi
}
wait_spin() { for p in "${spins[@]}"; do wait "$p" 2>/dev/null || true; done; spins=(); }
# cpu_ms PID OUT: the task-clock of PID over the window, in ms, into OUT
cpu_ms() { perf stat -x, -e task-clock -p "$1" -- sleep "$((secs - 2))" 2>&1 | awk -F, '/task-clock/ { print $1 }' >"$2"; }

# start NAME: starts that profiler; its pid in $tmp/NAME.pid
start() {
	local name=$1 bin=$tally args=()
	case $name in
	perf | perf-bid)
		local extra=()
		[ "$name" = perf ] || extra=(--buildid-mmap)
		perf record -a -F "$hz" "${extra[@]}" -o "$tmp/$name.data" -q >/dev/null 2>&1 &
		echo $! >"$tmp/$name.pid"
		date +%s.%N >"$tmp/$name.t0"
		pids+=($!)
		return ;;
	ring) args=(--sample-mechanism ring) ;;
	push-pprof) args=(--push "$rx_url" --push-format pyroscope --push-retry-max 1s) ;;
	push-otlp) args=(--push "$rx_url" --push-format otlp --push-retry-max 1s) ;;
	before) bin=$before ;;
	before-bpf) bin=$before args=(--sample-mechanism bpf) ;;
	esac
	rm -rf "$tmp/$name.db"
	"$bin" daemon --db "$tmp/$name.db" -F "$hz" "${args[@]}" >/dev/null 2>&1
	cp "$tmp/$name.db/daemon.pid" "$tmp/$name.pid"
	pids+=("$(cat "$tmp/$name.pid")")
}
# stop NAME: its sample count (tally) into the result with its ms
status() {
	local name=$1 n=
	! is_perf "$name" || { cat "$tmp/$name.ms" >>"$tmp/$name"; return; }
	local bin=$tally
	case $name in before*) bin=$before ;; esac
	"$bin" ctl --db "$tmp/$name.db" status >"$tmp/status"
	n=$(awk '/^samples:/ { print $2 }' "$tmp/status")
	awk '/^sample-mechanism:/ { print $2 }' "$tmp/status" >"$tmp/$name.mech"
	echo "$(cat "$tmp/$name.ms") $n" >>"$tmp/$name"
}
# flush_ms NAME: the CPU time of one flush of that tally daemon, in ms, appended to $tmp/NAME.flush
flush_ms() {
	local name=$1 bin=$tally pid
	case $name in before*) bin=$before ;; esac
	pid=$(cat "$tmp/$name.pid")
	perf stat -x, -e task-clock -p "$pid" -- sleep 2 2>"$tmp/$name.fstat" &
	local ps=$!
	sleep 0.5
	"$bin" ctl --db "$tmp/$name.db" flush >/dev/null
	wait "$ps"
	local all rate
	all=$(awk -F, '/task-clock/ { print $1 }' "$tmp/$name.fstat")
	rate=$(echo "scale=4; $(cat "$tmp/$name.ms") / ($secs - 2)" | bc)
	printf "%.2f\n" "$(echo "x = $all - $rate * 2; if (x < 0) x = 0; x" | bc)" >>"$tmp/$name.flush"
}
# flush_push_ms NAME: the CPU time of one flush and its push (on the
# daemon's own thread), in ms, to $tmp/NAME.flush; the push's profile bytes to $tmp/NAME.bytes
flush_push_ms() {
	local name=$1 pid sent0 t0 t1 i
	pid=$(cat "$tmp/$name.pid")
	sent0=$("$tally" ctl --db "$tmp/$name.db" status | awk '/^push-sent:/ { print $2 }')
	perf stat -x, -e task-clock -p "$pid" 2>"$tmp/$name.fstat" &
	local ps=$!
	sleep 0.3
	t0=$(date +%s.%N)
	"$tally" ctl --db "$tmp/$name.db" flush >/dev/null
	for ((i = 0; i < 1200; i++)); do
		"$tally" ctl --db "$tmp/$name.db" status >"$tmp/$name.st"
		[ "$(awk '/^push-sent:/ { print $2 }' "$tmp/$name.st")" -gt "$sent0" ] && break
		sleep 0.1
	done
	t1=$(date +%s.%N)
	kill -INT "$ps"
	wait "$ps" 2>/dev/null || true
	local all rate
	all=$(awk -F, '/task-clock/ { print $1 }' "$tmp/$name.fstat")
	rate=$(echo "scale=4; $(cat "$tmp/$name.ms") / ($secs - 2)" | bc)
	printf "%.2f\n" "$(echo "x = $all - $rate * ($t1 - $t0 + 0.3); if (x < 0) x = 0; x" | bc)" >>"$tmp/$name.flush"
	sed -nE 's/^push-last: .*profile ([0-9]+) bytes.*/\1/p' "$tmp/$name.st" >>"$tmp/$name.bytes"
}
# stop NAME: stops it
stop() {
	local pid
	pid=$(cat "$tmp/$1.pid")
	if is_perf "$1"; then
		# its end: from SIGINT to its exit, per second it recorded
		perf stat -x, -e task-clock -p "$pid" 2>"$tmp/$1.estat" &
		local ps=$!
		sleep 0.3
		local t1
		t1=$(date +%s.%N)
		kill -INT "$pid"
		wait "$pid" 2>/dev/null || true
		wait "$ps" 2>/dev/null || true
		printf "%.3f\n" "$(echo "$(awk -F, '/task-clock/ { print $1 }' "$tmp/$1.estat") / ($t1 - $(cat "$tmp/$1.t0"))" | bc -l)" >>"$tmp/$1.end"
		return
	fi
	kill -TERM "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
bin_of() { case $1 in before*) echo "$before" ;; *) echo "$tally" ;; esac; }
is_perf() { case $1 in perf*) return 0 ;; *) return 1 ;; esac; }
# measure NAME...: they run, started together, over one window
measure() {
	local w
	for w in "$@"; do start "$w"; done
	spin
	sleep 1
	local k
	for k in 1 2; do
		for w in "$@"; do is_perf "$w" || "$(bin_of "$w")" ctl --db "$tmp/$w.db" flush >/dev/null; done
		sleep 0.5
	done
	# the pushes of those flushes, done before the window (a daemon that
	# pushes does it on its own thread: it would land in the window)
	for w in "$@"; do
		is_push "$w" || continue
		for ((k = 0; k < 1200; k++)); do
			"$tally" ctl --db "$tmp/$w.db" status | grep -q '^push-backlog: 0 ' && break
			sleep 0.1
		done
	done
	local waits=()
	for w in "$@"; do cpu_ms "$(cat "$tmp/$w.pid")" "$tmp/$w.ms" & waits+=($!); done
	for w in "${waits[@]}"; do wait "$w"; done
	for w in "$@"; do status "$w"; done
	for w in "$@"; do
		if is_push "$w"; then flush_push_ms "$w"; elif ! is_perf "$w"; then flush_ms "$w"; fi
	done
	wait_spin
	for w in "$@"; do stop "$w"; done
}

[ -z "$before" ] || [ -x "$before" ] || { echo "bench: no tally at '$before' (give --before an older build's tally)" >&2; exit 2; }
who=(tally ring perf)
((bidmmap == 0)) || who+=(perf-bid)
((push == 0)) || who+=(push-pprof push-otlp)
if [ -n "$before" ]; then
	who+=(before)
	grep -q -- --sample-mechanism < <("$before" daemon --help 2>&1) && who+=(before-bpf)
fi
spins=()
for ((r = 1; r <= rounds; r++)); do
	order=("${who[@]}")
	if ! ((r % 2)); then
		order=()
		for ((k = ${#who[@]} - 1; k >= 0; k--)); do order+=("${who[$k]}"); done
	fi
	if ((together)); then
		group=()
		for w in "${order[@]}"; do [ "$w" = perf-bid ] || group+=("$w"); done
		measure "${group[@]}"
		((bidmmap == 0)) || measure perf-bid
	else
		for w in "${order[@]}"; do measure "$w"; done
	fi
	line="bench: round $r of $rounds:"
	for w in "${who[@]}"; do line+=" $w $(tail -n1 "$tmp/$w")"; done
	line+=" (perf's end: $(tail -n1 "$tmp/perf.end") ms/s recorded)"
	echo "$line" >&2
done
win=$((secs - 2))
cols=() files=()
for w in "${who[@]}"; do
	case $w in
	tally) cols+=("tally daemon ($(cat "$tmp/tally.mech"))") ;;
	ring) cols+=("tally daemon --sample-mechanism ring ($(cat "$tmp/ring.mech"))") ;;
	push-pprof) cols+=("tally daemon --push (pyroscope: pprof)") ;;
	push-otlp) cols+=("tally daemon --push (otlp)") ;;
	perf) cols+=("perf record -a") ;;
	perf-bid) cols+=("perf record -a --buildid-mmap") ;;
	before) cols+=("before: tally daemon ($(cat "$tmp/before.mech"))") ;;
	before-bpf) cols+=("before: --sample-mechanism bpf ($(cat "$tmp/before-bpf.mech"))") ;;
	esac
	files+=("$w")
done
how=$([ "$together" = 1 ] && echo "all at once" || echo "in turn")
row() { local s="| $1 |"; shift; for v in "$@"; do s+=" $v |"; done; echo "$s"; }
ms=() share=() per=() fl=() with=() end=() all=() bytes=()
for f in "${files[@]}"; do
	m=$(cut -d' ' -f1 "$tmp/$f" | median)
	ms+=("$(echo "scale=2; $m / $win" | bc)")
	if is_perf "$f"; then
		fl+=("—")
		with+=("$(echo "scale=2; $m / $win" | bc)")
		em=$(median "$tmp/$f.end")
		end+=("$em")
		all+=("$(echo "scale=2; ($m / $win) + $em" | bc)")
	else
		fm=$(median "$tmp/$f.flush")
		fl+=("$fm")
		with+=("$(echo "scale=2; ($m / $win) + ($fm / 60)" | bc)")
		end+=("—")
		all+=("$(echo "scale=2; ($m / $win) + ($fm / 60)" | bc)")
	fi
	share+=("$(echo "scale=3; $m / $win / 10" | bc)%")
	if is_push "$f"; then bytes+=("$(median "$tmp/$f.bytes")"); else bytes+=("—"); fi
	if is_perf "$f"; then
		per+=("—")
	else
		n=$(cut -d' ' -f2 "$tmp/$f" | median)
		per+=("$(echo "scale=2; $m * 1000 / $n" | bc) ($n samples)")
	fi
done
load_what="$ncpu CPUs busy"
((churn == 0)) || load_what+=", a short process every 50 ms"
row "profiler's own CPU, whole system at $hz Hz per CPU ($load_what), $how, median of $rounds" "${cols[@]}"
row "---" "${cols[@]/*/---}"
row "ms of CPU per second" "${ms[@]}"
row "share of one CPU" "${share[@]}"
row "µs per sample" "${per[@]}"
row "ms of CPU of one flush (what $secs s gathered; --push: and its push)" "${fl[@]}"
row "ms of CPU per second, with a flush every 60 s" "${with[@]}"
row "perf: ms of CPU at its end (SIGINT to exit: reading back what it recorded for build-ids), per second recorded" "${end[@]}"
row "ms of CPU per second, all in (tally: a flush every 60 s; perf: its end)" "${all[@]}"
((push == 0)) || row "bytes of one push's profile (what $secs s gathered)" "${bytes[@]}"
