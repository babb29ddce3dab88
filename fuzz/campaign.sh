#!/usr/bin/env bash
# A fuzzing campaign (docs/fuzzing.md): each target in turn for SECONDS, from a
# copy of its checked-in corpus, going on past crashes (libFuzzer's fork mode),
# with a summary line per target: executions, coverage, crashes, and where the
# crashing inputs are. The checked-in corpus is never written.
#
#   fuzz/campaign.sh [-j JOBS] [--runs N] [FUZZ_BUILD [SECONDS [TARGET...]]]   (default: build-fuzz 3600, all)
#
# --runs N ends a target after about N executions (10000000: the issue's "10
# million executions or one hour per target", with SECONDS 3600).
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=1
RUNS=-1
while :; do
	case "${1:-}" in
	-j) JOBS=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	*) break ;;
	esac
done
FUZZ_BUILD=${1:-build-fuzz}
SECS=${2:-3600}
shift 2 2>/dev/null || shift $#
names=("$@")
if ((${#names[@]} == 0)); then
	for t in "$FUZZ_BUILD"/fuzz/fuzz-*; do
		[ -f "$t" ] && [ -x "$t" ] && names+=("${t##*/fuzz-}")
	done
fi
OUT=${CAMPAIGN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/tally-campaign.XXXXXX")}
mkdir -p "$OUT"
echo "campaign: $SECS s per target$( ((RUNS > 0)) && echo " or $RUNS executions"), $JOBS job(s), into $OUT"
printf '%-12s %12s %8s %8s %7s %s\n' target executions exec/s cov crashes time
for n in "${names[@]}"; do
	mkdir -p "$OUT/$n/corpus" "$OUT/$n/crash"
	cp -n fuzz/corpus/"$n"/* "$OUT/$n/corpus/" 2>/dev/null
	"$FUZZ_BUILD/fuzz/fuzz-$n" -fork="$JOBS" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
		-max_total_time="$SECS" -runs="$RUNS" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
		-artifact_prefix="$OUT/$n/crash/" "$OUT/$n/corpus" >"$OUT/$n.log" 2>&1
	# fork mode's status lines: '#RUNS: cov: C ft: F corp: ... exec/s: E oom/timeout/crash: O/T/C time: Ss ...'
	last=$(grep -E '^#[0-9]+: cov:' "$OUT/$n.log" | tail -1)
	runs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
	cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$last")
	otc=$(sed -E 's/.*oom\/timeout\/crash: ([0-9\/]+).*/\1/' <<<"$last")
	tm=$(sed -E 's/.* time: ([0-9]+)s.*/\1/' <<<"$last")
	eps=$(( ${runs:-0} / (${tm:-1} > 0 ? ${tm:-1} : 1) ))
	printf '%-12s %12s %8s %8s %7s %ss (oom/timeout/crash %s; %s saved)\n' "$n" "${runs:-?}" "${eps:-?}" "${cov:-?}" \
		"$(ls "$OUT/$n/crash" | wc -l)" "${tm:-?}" "${otc:-?}" "$OUT/$n/crash"
done
