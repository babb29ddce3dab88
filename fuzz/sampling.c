/* The sampling options of record and daemon (sampling.h): event specs (-e),
 * -F, -c, -C, --call-graph, through tally_sampling_opt and then
 * tally_sampling_resolve, which also asks this machine (each event is probed
 * with perf_event_open, the CPUs online are read). The input is lines 'OPT
 * VALUE', OPT one of F c e C G (--call-graph) g n (--no-randomize) p
 * (--per-pid) o (--off-cpu) m (--off-cpu-min) M (--off-cpu-mechanism) S
 * (--sample-mechanism).
 * Oracles: what is accepted has 1 to 16 distinct known events named as the
 * event table names them, one rate within bounds, at least one CPU of the
 * machine, a DWARF stack size in bounds, with --off-cpu the off-cpu event, a
 * minimum wait a uint64 of ns holds and known mechanisms; refusals are one
 * line. */
#include "fuzz.h"

#include "tally/collect.h"
#include "tally/offcpu.h"
#include "tally/sampling.h"

#include <inttypes.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	struct tally_sampling s;
	tally_sampling_init(&s);
	int r = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && r >= 0;
	     l = strtok_r(NULL, "\n", &save)) {
		int opt;
		switch (l[0]) {
		case 'F': case 'c': case 'e': case 'C': case 'g': opt = l[0]; break;
		case 'G': opt = TALLY_OPT_CALLGRAPH; break;
		case 'n': opt = TALLY_OPT_NORAND; break;
		case 'p': opt = TALLY_OPT_PERPID; break;
		case 'o': opt = TALLY_OPT_OFFCPU; break;
		case 'm': opt = TALLY_OPT_OFFCPU_MIN; break;
		case 'M': opt = TALLY_OPT_OFFCPU_MECH; break;
		case 'S': opt = TALLY_OPT_SAMPLE_MECH; break;
		default: continue;
		}
		const char *arg = l[1] == ' ' ? l + 2 : l + 1;
		r = tally_sampling_opt(&s, opt, arg);
		FUZZ_CHECK(r == 1 || r == -EINVAL, "option '%c' gave %d", l[0], r);
	}
	if (r >= 0)
		r = tally_sampling_resolve(&s);
	if (r) {
		fuzz_check_errmsg();
	} else {
		FUZZ_CHECK(s.nev >= 1 && s.nev <= TALLY_SAMPLING_MAX_EVENTS, "%d events", s.nev);
		for (int i = 0; i < s.nev; i++) {
			FUZZ_CHECK(tally_event_find(s.evs[i]->name) == s.evs[i],
				   "event %d is not the table's", i);
			for (int k = 0; k < i; k++)
				FUZZ_CHECK(s.evs[i] != s.evs[k], "event '%s' twice",
					   s.evs[i]->name);
		}
		FUZZ_CHECK(s.evnames.len && !strchr(s.evnames.buf, ' '), "event names '%s'",
			   s.evnames.buf);
		FUZZ_CHECK(!!s.freq != !!s.period, "freq %" PRIu64 " and period %" PRIu64, s.freq,
			   s.period);
		FUZZ_CHECK(s.freq <= 1000000 && s.period <= UINT64_MAX >> 2, "rate out of bounds");
		bool any = false;
		for (int i = 0; i < s.ncpus; i++)
			any = any || s.cpus[i];
		FUZZ_CHECK(any, "no CPU to sample");
		bool off = false;
		for (int i = 0; i < s.nev; i++)
			off = off || s.evs[i]->offcpu == TALLY_OFFCPU_BLOCKED;
		FUZZ_CHECK(!s.offcpu || off, "--off-cpu without the off-cpu event");
		FUZZ_CHECK(s.offcpu_min < UINT64_MAX / 2, "--off-cpu-min of %" PRIu64 " ns",
			   s.offcpu_min);
		FUZZ_CHECK(s.offcpu_mech == TALLY_OFFCPU_AUTO ||
				   s.offcpu_mech == TALLY_OFFCPU_BPF ||
				   s.offcpu_mech == TALLY_OFFCPU_TRACEPOINT,
			   "mechanism %d", s.offcpu_mech);
		FUZZ_CHECK(s.sample_mech == TALLY_SAMPLE_RING || s.sample_mech == TALLY_SAMPLE_BPF,
			   "sample mechanism %d", s.sample_mech);
		FUZZ_CHECK(!s.stack_user || (s.stack_user >= 64 && s.stack_user <= 65528 &&
					     s.stack_user % 8 == 0),
			   "DWARF stack size %" PRIu32, s.stack_user);
	}
	tally_sampling_release(&s);
	free(text);
	return 0;
}
