/* The sampling options of tally record and tally daemon (see sampling.h). */
#define _GNU_SOURCE
#include "tally/sampling.h"
#include "tally/offcpu.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

void tally_sampling_init(struct tally_sampling *s)
{
	memset(s, 0, sizeof(*s));
	s->events_arg = "cpu-clock";
	s->randomize = true;
	s->fp_stack = TALLY_FP_STACK;
	strbuf_init(&s->evnames);
	long n = sysconf(_SC_NPROCESSORS_CONF);
	s->ncpus = n > 0 ? (int)n : 1;
}

void tally_sampling_release(struct tally_sampling *s)
{
	strbuf_release(&s->evnames);
	free(s->cpus);
	s->cpus = NULL;
}

int tally_sampling_opt(struct tally_sampling *s, int opt, const char *arg)
{
	switch (opt) {
	case 'F':
		return tally_parse_u64(arg, "frequency -F", 1, 1000000, &s->freq) ? -EINVAL : 1;
	case 'c':
		return tally_parse_u64(arg, "period -c", 1, UINT64_MAX >> 2, &s->period) ? -EINVAL
											 : 1;
	case TALLY_OPT_NORAND:
		s->randomize = false;
		return 1;
	case 'e':
		s->events_arg = arg;
		return 1;
	case 'C':
		s->cpu_arg = arg;
		return 1;
	case TALLY_OPT_PERPID:
		s->per_pid = true;
		return 1;
	case 'g':
		s->callchain = true;
		return 1;
	case TALLY_OPT_CALLGRAPH:
		if (!strncmp(arg, "fp", 2) && (!arg[2] || arg[2] == ',')) {
			s->callchain = true;
			s->stack_user = 0;
			s->fp_stack = TALLY_FP_STACK;
			if (arg[2] == ',') {
				uint64_t sz;
				if (tally_parse_u64(arg + 3, "frame-pointer stack size", 0, 65528,
						    &sz))
					return -EINVAL;
				/* 1 to 7 would round to 0, the repair off, without a word */
				if (sz && sz < 8)
					return tally_seterr(
						-EINVAL,
						"frame-pointer stack size %" PRIu64
						" is under 8 bytes (0 turns the stack copy off; 2048 is the default)",
						sz);
				s->fp_stack = (uint32_t)(sz & ~7ULL);
			}
		} else if (!strncmp(arg, "dwarf", 5) && (!arg[5] || arg[5] == ',')) {
			s->callchain = true;
			s->stack_user = 16384;
			if (arg[5] == ',') {
				uint64_t sz;
				if (tally_parse_u64(arg + 6, "dwarf stack size", 64, 65528, &sz))
					return -EINVAL;
				s->stack_user = (uint32_t)(sz & ~7ULL);
			}
		} else {
			return tally_seterr(
				-EINVAL,
				"unknown call-graph mode '%s' (known: fp[,SIZE], dwarf[,SIZE])",
				arg);
		}
		return 1;
	case TALLY_OPT_BUILDID_MMAP:
		s->build_id_mmap = true;
		return 1;
	case TALLY_OPT_OFFCPU:
		s->offcpu = true;
		return 1;
	case TALLY_OPT_OFFCPU_MIN: {
		double sec;
		if (tally_parse_duration(arg, "--off-cpu-min", &sec))
			return -EINVAL;
		s->offcpu_min = (uint64_t)(sec * 1e9 + 0.5);
		return 1;
	}
	case TALLY_OPT_SAMPLE_MECH: {
		enum tally_sample_mech m;
		if (tally_sample_parse_mech(arg, &m))
			return -EINVAL;
		s->sample_mech = (int)m;
		return 1;
	}
	case TALLY_OPT_OFFCPU_MECH: {
		enum tally_offcpu_mech m;
		if (tally_offcpu_parse_mech(arg, &m))
			return -EINVAL;
		s->offcpu_mech = (int)m;
		s->offcpu_mech_set = true;
		return 1;
	}
	default:
		return 0;
	}
}

uint64_t tally_max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re");
	unsigned long long maxrate = 0;
	if (f) {
		if (fscanf(f, "%llu", &maxrate) != 1)
			maxrate = 0;
		fclose(f);
	}
	return maxrate;
}

static int add_event(struct tally_sampling *s, const char *name)
{
	if (s->nev == TALLY_SAMPLING_MAX_EVENTS)
		return tally_seterr(-EINVAL, "too many events (at most %d)",
				    TALLY_SAMPLING_MAX_EVENTS);
	const struct tally_event_desc *e = tally_event_find(name);
	int r = tally_event_probe(e);
	if (r)
		return r == -EINVAL ? -EIO : r;
	s->evs[s->nev++] = e;
	strbuf_addf(&s->evnames, ",%s", e->name);
	return 0;
}

/* --off-cpu adds off-cpu; off-cpu always comes with off-cpu-preempted, which
 * takes the preempted intervals its records find (docs/offcpu.md). */
static int resolve_offcpu(struct tally_sampling *s)
{
	bool blocked = false, preempted = false;
	for (int i = 0; i < s->nev; i++) {
		blocked = blocked || s->evs[i]->offcpu == TALLY_OFFCPU_BLOCKED;
		preempted = preempted || s->evs[i]->offcpu == TALLY_OFFCPU_PREEMPTED;
	}
	if (preempted && !blocked)
		return tally_seterr(
			-EINVAL,
			"event 'off-cpu-preempted' is recorded with 'off-cpu' (use --off-cpu)");
	if (s->offcpu_min && !s->offcpu && !blocked)
		return tally_seterr(-EINVAL, "--off-cpu-min needs --off-cpu");
	if (s->offcpu_mech_set && !s->offcpu && !blocked)
		return tally_seterr(-EINVAL, "--off-cpu-mechanism needs --off-cpu");
	if ((s->offcpu || blocked) && s->cpu_arg)
		return tally_seterr(
			-EINVAL,
			"--off-cpu needs every CPU: a task switched out on one comes back on another (leave out -C '%s')",
			s->cpu_arg);
	int r = 0;
	if (s->offcpu && !blocked) {
		r = add_event(s, "off-cpu");
		blocked = true;
	}
	if (!r && blocked && !preempted)
		r = add_event(s, "off-cpu-preempted");
	s->offcpu = s->offcpu || blocked;
	return r;
}

static int resolve_events(struct tally_sampling *s)
{
	int ret = 0;
	char *list = xstrdup(s->events_arg), *save = NULL;
	s->nev = 0;
	strbuf_reset(&s->evnames);
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const struct tally_event_desc *e = tally_event_find(t);
		if (!e) {
			ret = tally_seterr(
				-EINVAL, "unknown event '%s' (see 'tally events' for the list)", t);
			goto out;
		}
		for (int i = 0; i < s->nev; i++)
			if (s->evs[i] == e) {
				ret = tally_seterr(-EINVAL, "event '%s' is given twice", t);
				goto out;
			}
		if (s->nev == TALLY_SAMPLING_MAX_EVENTS) {
			ret = tally_seterr(-EINVAL, "too many events (at most %d)",
					   TALLY_SAMPLING_MAX_EVENTS);
			goto out;
		}
		int r = tally_event_probe(e);
		if (r) {
			/* the machine's answer, not a usage mistake */
			ret = r == -EINVAL ? -EIO : r;
			goto out;
		}
		s->evs[s->nev++] = e;
		strbuf_addf(&s->evnames, "%s%s", s->evnames.len ? "," : "", e->name);
	}
	if (!s->nev)
		ret = tally_seterr(-EINVAL, "no event given to -e");
	if (!ret)
		ret = resolve_offcpu(s);
out:
	free(list);
	return ret;
}

static int resolve_cpus(struct tally_sampling *s)
{
	int ncpus = s->ncpus;
	free(s->cpus);
	s->cpus = xcalloc((size_t)ncpus, sizeof(bool));
	if (s->cpu_arg) {
		if (tally_parse_cpulist(s->cpu_arg, ncpus, s->cpus))
			return -EINVAL;
	} else {
		for (int i = 0; i < ncpus; i++)
			s->cpus[i] = true;
	}
	/* offline CPUs cannot be sampled: keep the online ones */
	int ret = 0;
	struct strbuf on = STRBUF_INIT;
	if (strbuf_read_file(&on, "/sys/devices/system/cpu/online", 0) == 0) {
		on.buf[strcspn(on.buf, "\n")] = '\0';
		bool *online = xcalloc((size_t)ncpus, sizeof(bool));
		if (tally_parse_cpulist(on.buf, ncpus, online) == 0) {
			bool any = false;
			for (int i = 0; i < ncpus && !ret; i++) {
				if (s->cpu_arg && s->cpus[i] && !online[i]) {
					ret = tally_seterr(
						-EINVAL,
						"CPU %d is offline (choose online CPUs with -C)",
						i);
					break;
				}
				s->cpus[i] = s->cpus[i] && online[i];
				any = any || s->cpus[i];
			}
			if (!any && !ret)
				for (int i = 0; i < ncpus; i++)
					s->cpus[i] = online[i];
		}
		free(online);
	}
	strbuf_release(&on);
	return ret;
}

int tally_sampling_resolve(struct tally_sampling *s)
{
	if (s->freq && s->period)
		return tally_seterr(-EINVAL, "-F and -c both set the sampling rate: give one");
	if (!s->freq && !s->period)
		s->freq = 999;
	int r = resolve_events(s);
	if (r)
		return r;
	/* the kernel caps sampling frequency */
	uint64_t maxrate = tally_max_sample_rate();
	if (s->freq && maxrate && s->freq > maxrate)
		return tally_seterr(-EINVAL,
				    "-F %" PRIu64
				    " is above kernel.perf_event_max_sample_rate (%" PRIu64
				    ") (use a lower -F, or raise the sysctl)",
				    s->freq, maxrate);
	r = resolve_cpus(s);
	if (r || s->sample_mech != TALLY_SAMPLE_BPF)
		return r;
	/* what the options alone rule out (the target is known at open) */
	struct tally_collect_opts co;
	memset(&co, 0, sizeof(co));
	tally_sampling_collect_opts(s, &co);
	co.target = TALLY_TARGET_SYSTEM;
	return tally_sample_bpf_fits(&co);
}

void tally_sampling_collect_opts(const struct tally_sampling *s, struct tally_collect_opts *co)
{
	co->events = s->evs;
	co->nevents = s->nev;
	co->freq = s->period ? 0 : s->freq;
	co->period = s->period;
	co->randomize = s->randomize;
	co->callchain = s->callchain;
	co->stack_user = s->stack_user;
	/* frame-pointer chains: the top of the stack, to unwind the functions
	 * without a frame pointer there with their CFI (docs/callgraph.md) */
	co->leaf_stack = s->callchain && !s->stack_user ? s->fp_stack : 0;
	co->build_id_mmap = s->build_id_mmap;
	co->cpus = s->cpus;
	co->ncpus = s->ncpus;
	co->offcpu_min = s->offcpu_min;
	co->offcpu_mech = s->offcpu_mech;
	co->sample_mech = s->sample_mech;
}

void tally_cpus_string(const bool *set, int n, struct strbuf *sb)
{
	bool first = true;
	for (int i = 0; i < n; i++) {
		if (!set[i])
			continue;
		int j = i;
		while (j + 1 < n && set[j + 1])
			j++;
		strbuf_addf(sb, "%s%d", first ? "" : ",", i);
		first = false;
		if (j > i)
			strbuf_addf(sb, "-%d", j);
		i = j;
	}
}

void tally_sampling_session(const struct tally_sampling *s, struct tally_collector *col,
			    const struct tally_agg *a, const char *target, const char *command,
			    struct tally_meta *m)
{
	struct utsname un;
	uname(&un);
	tally_meta_set(m, "format-version", "%d", TALLY_FORMAT_VERSION);
	tally_meta_set(m, "tool", "tally %s", TALLY_VERSION);
	tally_meta_set(m, "host", "%s", un.nodename);
	tally_meta_set(m, "kernel-release", "%s", un.release);
	tally_meta_set(m, "arch", "%s", un.machine);
	tally_meta_set(m, "target", "%s", target);
	if (command)
		tally_meta_set(m, "command", "%s", command);
	struct strbuf cs = STRBUF_INIT;
	tally_cpus_string(s->cpus, s->ncpus, &cs);
	tally_meta_set(m, "cpus", "%s", cs.buf ? cs.buf : "");
	strbuf_release(&cs);
	tally_meta_set(m, "events", "%s", s->evnames.buf);
	/* each sample through the ring, or counted in the kernel (docs/sampling.md) */
	tally_meta_set(m, "sample-mechanism", "%s",
		       tally_sample_mech_name(tally_collector_sample_mech(col)));
	if (tally_collector_sample_mech_why(col))
		tally_meta_set(m, "sample-mechanism-why", "%s",
			       tally_collector_sample_mech_why(col));
	if (tally_collector_sample_mech(col) == TALLY_SAMPLE_BPF) {
		tally_meta_set(m, "sample-map-full", "%" PRIu64,
			       tally_collector_sample_overflow(col));
		tally_meta_set(m, "sample-tables-emptied", "%" PRIu64,
			       tally_collector_sample_tables_emptied(col));
	}
	if (s->period)
		tally_meta_set(m, "sampling", "period %" PRIu64, s->period);
	else
		tally_meta_set(m, "sampling", "frequency %" PRIu64, s->freq);
	{
		/* only a fixed mean period can be randomized: -F on a counting event lets the
		 * kernel adapt it */
		struct strbuf rz = STRBUF_INIT, pk = STRBUF_INIT;
		for (int e = 0; e < s->nev; e++) {
			bool fixed = tally_collector_mean_period(col, e) != 0;
			strbuf_addf(&rz, "%s%s", e ? "," : "",
				    s->randomize && fixed ? "yes" : "no");
			/* off-CPU: one sample per wait, no period at all */
			strbuf_addf(&pk, "%s%s", e ? "," : "",
				    s->evs[e]->offcpu ? "switch"
				    : fixed           ? "fixed"
						      : "adaptive");
		}
		tally_meta_set(m, "randomized", "%s", rz.buf);
		tally_meta_set(m, "period-kind", "%s", pk.buf);
		if (s->randomize) {
			/* what the redraws reached, said and measured (docs/sampling.md) */
			struct strbuf rt = STRBUF_INIT;
			for (int e = 0; e < s->nev; e++) {
				uint64_t reached, total;
				tally_collector_random_samples(col, e, &reached, &total);
				strbuf_addf(&rt, "%s%" PRIu64 "/%" PRIu64, e ? "," : "", reached,
					    total);
			}
			tally_meta_set(m, "randomized-scope", "%s", tally_collector_scope(col));
			tally_meta_set(m, "randomized-samples", "%s", rt.buf);
			strbuf_release(&rt);
		}
		strbuf_release(&rz);
		strbuf_release(&pk);
	}
	{
		struct strbuf pm = STRBUF_INIT, pmin = STRBUF_INIT, pmax = STRBUF_INIT,
			      iv = STRBUF_INIT;
		for (int e = 0; e < s->nev; e++) {
			uint64_t mn, mx;
			double mean;
			tally_collector_periods(col, e, &mn, &mx, &mean);
			strbuf_addf(&pm, "%s%.0f", e ? "," : "", mean);
			strbuf_addf(&pmin, "%s%" PRIu64, e ? "," : "", mn);
			strbuf_addf(&pmax, "%s%" PRIu64, e ? "," : "", mx);
			uint64_t a10, a50, a90;
			tally_collector_intervals(col, e, &a10, &a50, &a90);
			strbuf_addf(&iv, "%s%" PRIu64 "/%" PRIu64 "/%" PRIu64, e ? "," : "", a10,
				    a50, a90);
		}
		tally_meta_set(m, "period-mean", "%s", pm.buf);
		tally_meta_set(m, "period-min", "%s", pmin.buf);
		tally_meta_set(m, "period-max", "%s", pmax.buf);
		tally_meta_set(m, "interval-p10-p50-p90", "%s", iv.buf);
		strbuf_release(&pm);
		strbuf_release(&pmin);
		strbuf_release(&pmax);
		strbuf_release(&iv);
	}
	tally_meta_set(m, "per-pid", "%s", s->per_pid ? "yes" : "no");
	if (s->stack_user) {
		tally_meta_set(m, "call-graph", "dwarf");
		tally_meta_set(m, "stack-size", "%u", s->stack_user);
		tally_meta_set(m, "dwarf-unwinds", "%" PRIu64, a->uw_samples);
		tally_meta_set(m, "dwarf-stopped-early", "%" PRIu64, a->uw_short);
		tally_meta_set(m, "dwarf-joined-fp", "%" PRIu64, a->uw_joined);
		tally_meta_set(m, "dwarf-stop-reasons",
			       "stack copy too small %" PRIu64
			       ", no CFI or unreadable frame %" PRIu64 ", depth limit %" PRIu64,
			       a->uw_why_stack, a->uw_why_cfi, a->uw_why_depth);
		/* the DWARF unwinder's own depth limit (user frames) */
		tally_meta_set(m, "max-stack", "%zu", ARRAY_SIZE(a->scratch_pcs));
	} else {
		tally_meta_set(m, "call-graph", "%s", s->callchain ? "fp" : "none");
		if (s->callchain && s->fp_stack) {
			tally_meta_set(m, "fp-leaf-stack", "%u", s->fp_stack);
			tally_meta_set(m, "fp-leaf-checked", "%" PRIu64, a->fp_leaf_checked);
			tally_meta_set(m, "fp-leaf-repaired", "%" PRIu64, a->fp_leaf_repaired);
			tally_meta_set(m, "fp-leaf-unchecked", "%" PRIu64, a->fp_leaf_unchecked);
			tally_meta_set(m, "fp-repair-frames", "%" PRIu64, a->fp_repair_frames);
			tally_meta_set(m, "fp-repair-stops", TALLY_FP_STOPS_FMT,
				       a->fp_repair_stops[TALLY_FP_NOCFI],
				       a->fp_repair_stops[TALLY_FP_SHORT],
				       a->fp_repair_stops[TALLY_FP_LOST],
				       a->fp_repair_stops[TALLY_FP_DEPTH]);
		}
		if (s->callchain) {
			struct strbuf ms = STRBUF_INIT;
			if (strbuf_read_file(&ms, "/proc/sys/kernel/perf_event_max_stack", 64) == 0)
				tally_meta_set(m, "max-stack", "%d", atoi(ms.buf));
			strbuf_release(&ms);
		}
	}
	struct tally_offcpu_stats os;
	if (tally_collector_offcpu_stats(col, &os)) {
		/* the totals a report of off-cpu and off-cpu-preempted adds up to (docs/offcpu.md)
		 */
		tally_meta_set(m, "off-cpu-waits", "%" PRIu64 ",%" PRIu64, os.waits[0],
			       os.waits[1]);
		tally_meta_set(m, "off-cpu-ns", "%" PRIu64 ",%" PRIu64, os.ns[0], os.ns[1]);
		tally_meta_set(m, "off-cpu-min-ns", "%" PRIu64, s->offcpu_min);
		tally_meta_set(m, "off-cpu-dropped", "%" PRIu64 " waits, %" PRIu64 " ns",
			       os.dropped, os.dropped_ns);
		tally_meta_set(m, "off-cpu-unmatched", "%" PRIu64, os.unmatched);
		/* how: the BPF program (waits summed in the kernel) or the tracepoint */
		tally_meta_set(m, "off-cpu-mechanism", "%s",
			       tally_collector_offcpu_mech(col, NULL));
		if (!strcmp(tally_collector_offcpu_mech(col, NULL), "bpf")) {
			tally_meta_set(m, "off-cpu-lost", "%" PRIu64 " waits, %" PRIu64 " ns",
				       os.lost, os.lost_ns);
			if (s->callchain) {
				tally_meta_set(m, "off-cpu-no-stack", "%" PRIu64 " waits",
					       os.nostack);
				tally_meta_set(m, "off-cpu-stack-turnovers", "%" PRIu64,
					       os.turnovers);
				tally_meta_set(m, "off-cpu-no-slice", "%" PRIu64 " waits",
					       os.noslice);
			}
		}
	}
	if (a->jit_untrusted)
		tally_meta_set(m, "jit-untrusted", "%u", a->jit_untrusted);
	for (size_t i = 0; i < a->njit_warnings; i++) {
		/* the report repeats them: the database is where users look later */
		char key[48];
		snprintf(key, sizeof(key), "jit-warning-%zu", i + 1);
		tally_meta_set(m, key, "%s", a->jit_warnings[i]);
	}
}

static int sampling_handle(void *ctx, int code, const char *arg)
{
	int r = tally_sampling_opt(ctx, code, arg);
	return r < 0 ? r : 0;
}

#define SAID_(x) #x
#define SAID(x) SAID_(x)
#define FP_STACK_SAID SAID(TALLY_FP_STACK)

static const struct tally_option sampling_options[] = {
	TALLY_OPT('F', "freq", TALLY_ARG_REQUIRED, "HZ", "samples per second (default 999)", 'F'),
	TALLY_OPT('c', "period", TALLY_ARG_REQUIRED, "N",
		  "one sample every N events (instead of -F)", 'c'),
	TALLY_OPT(0, "no-randomize", TALLY_ARG_NONE, NULL, "keep the sampling period fixed",
		  TALLY_OPT_NORAND),
	TALLY_OPT('e', "event", TALLY_ARG_REQUIRED, "LIST",
		  "events, comma-separated (default cpu-clock; see 'tally events')", 'e'),
	TALLY_OPT('C', "cpu", TALLY_ARG_REQUIRED, "LIST", "only these CPUs (e.g. 0,2-3)", 'C'),
	TALLY_OPT(0, "per-pid", TALLY_ARG_NONE, NULL, "a separate profile per process",
		  TALLY_OPT_PERPID),
	TALLY_OPT('g', NULL, TALLY_ARG_NONE, NULL, "record call chains (same as --call-graph fp)",
		  'g'),
	TALLY_OPT(0, "call-graph", TALLY_ARG_REQUIRED, "MODE",
		  "fp[,SIZE]: frame pointers and kernel chains, the functions without\n"
		  "one at the top of the stack unwound with CFI over a SIZE-byte copy\n"
		  "(default " FP_STACK_SAID "; 0: none);\n"
		  "dwarf[,SIZE]: unwind a SIZE-byte user stack copy (default 16384) with\n"
		  "the binaries' CFI while recording",
		  TALLY_OPT_CALLGRAPH),
	TALLY_OPT(0, "build-id-mmap", TALLY_ARG_NONE, NULL,
		  "take build-ids from the kernel at mmap time (see docs/sampling.md)",
		  TALLY_OPT_BUILDID_MMAP),
	TALLY_OPT(0, "sample-mechanism", TALLY_ARG_REQUIRED, "HOW",
		  "ring (record's and top's default): every sample through the ring\n"
		  "buffers; bpf: samples counted in the kernel per place by a BPF\n"
		  "program, read every 4 s or when processes start, map or end\n"
		  "(whole system, no call graph, at most 4 events; docs/sampling.md);\n"
		  "auto (the daemon's default): bpf where it can, else ring",
		  TALLY_OPT_SAMPLE_MECH),
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_sampling_group = { "sampling", sampling_options,
						     sampling_handle };

/* apart: tally top shows on-CPU time only and does not take them */
static const struct tally_option offcpu_options[] = {
	TALLY_OPT(0, "off-cpu", TALLY_ARG_NONE, NULL,
		  "also the time off the CPU per stack: events off-cpu (blocked) and\n"
		  "off-cpu-preempted, in ns, from sched_switch (docs/offcpu.md)",
		  TALLY_OPT_OFFCPU),
	TALLY_OPT(0, "off-cpu-min", TALLY_ARG_REQUIRED, "TIME",
		  "drop waits shorter than TIME (e.g. 1ms; counted in the session)",
		  TALLY_OPT_OFFCPU_MIN),
	TALLY_OPT(0, "off-cpu-mechanism", TALLY_ARG_REQUIRED, "HOW",
		  "bpf: waits summed in the kernel by a BPF program (cheapest);\n"
		  "tracepoint: a sched_switch record per switch; auto (default): bpf\n"
		  "when it loads and no call graph is asked, else tracepoint",
		  TALLY_OPT_OFFCPU_MECH),
	TALLY_OPTION_END,
};

const struct tally_optgroup tally_offcpu_group = { "off-CPU time", offcpu_options,
						   sampling_handle };
