/* The collector (include/tally/collect.h, internal.h): which mechanisms
 * bring the samples and the off-CPU time, opening and closing it, turning
 * collection on and off (per CPU too), rates, and what it tells the session
 * and the status. A poll is poll.c's. */
#define _GNU_SOURCE
#include "internal.h"
#include "sample-bpf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/perf_event.h>
#include <unistd.h>

int tally_sample_parse_mech(const char *s, enum tally_sample_mech *out)
{
	static const char *const names[] = { "ring", "bpf", "auto" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum tally_sample_mech)i;
			return 0;
		}
	return tally_seterr(-EINVAL, "unknown sample mechanism '%s' (known: ring, bpf, auto)", s);
}

const char *tally_sample_mech_name(enum tally_sample_mech m)
{
	return m == TALLY_SAMPLE_BPF ? "bpf" : m == TALLY_SAMPLE_AUTO ? "auto" : "ring";
}

/* Why the BPF program cannot count the samples o asks for, or NULL. */
static const char *counted_unfit(const struct tally_collect_opts *o)
{
	if (o->target != TALLY_TARGET_SYSTEM)
		return "it counts the whole system only";
	if (o->callchain || o->stack_user || o->leaf_stack)
		return "call graphs asked";
	if (o->ncpus > SB_MAX_CPUS)
		return "more CPUs than it has slots for";
	/* the sampling events are all of the PMU or software kinds (the
	 * tracepoints of the event table are off-CPU's, which it leaves alone) */
	for (int ev = SB_MAX_EVENTS; ev < o->nevents; ev++)
		if (!o->events[ev]->offcpu)
			return "more than 4 events";
	return NULL;
}

int tally_sample_bpf_fits(const struct tally_collect_opts *o)
{
	const char *why = counted_unfit(o);
	return why ? tally_seterr(
			     -EINVAL,
			     "--sample-mechanism bpf cannot count these samples: %s (use --sample-mechanism ring)",
			     why)
		   : 0;
}

/* --sample-mechanism: the program counts the samples when bpf is asked, or
 * for auto where it fits and loads (it is loaded before the events are
 * opened: their rings then wake the wait at each side-band record, and
 * attached to them after); the ring elsewhere, c->sample_why saying why. */
static int open_samples(struct tally_collector *c)
{
	if (c->o.sample_mech != TALLY_SAMPLE_RING) {
		bool asked = c->o.sample_mech == TALLY_SAMPLE_BPF;
		const char *why = counted_unfit(&c->o);
		if (why && asked)
			return tally_sample_bpf_fits(&c->o);
		if (why)
			snprintf(c->sample_why, sizeof(c->sample_why), "%s", why);
		int r = why ? 0 : mech_counted_open(c, asked, &c->samples);
		if (r)
			return r;
	}
	if (!c->samples)
		c->samples = mech_ring_new();
	return 0;
}

/* --off-cpu-mechanism: the BPF program when asked, or for auto when it loads
 * and no call graph is asked (docs/offcpu.md: its frame-pointer walk loses the
 * callers of libc's frameless wrappers, and DWARF needs a stack copy); the
 * tracepoint elsewhere, c->off_why saying why. */
static int open_offcpu(struct tally_collector *c)
{
	if (c->off_ev < 0)
		return 0;
	if (c->o.offcpu_mech == TALLY_OFFCPU_AUTO && c->o.callchain) {
		c->off_why = "call graphs asked";
	} else if (c->o.offcpu_mech != TALLY_OFFCPU_TRACEPOINT) {
		int r = mech_offcpu_bpf_open(c, c->o.offcpu_mech == TALLY_OFFCPU_BPF, &c->offcpu);
		if (r)
			return r;
	}
	return c->offcpu ? 0 : mech_offcpu_tp_open(c, &c->offcpu);
}

int tally_collector_open(struct tally_collector **out, const struct tally_collect_opts *opts)
{
	struct tally_collector *c = xcalloc(1, sizeof(*c));
	int ret = 0;
	c->o = *opts;
	c->off_ev = c->pre_ev = -1;
	for (int ev = 0; ev < opts->nevents; ev++) {
		if (opts->events[ev]->offcpu == TALLY_OFFCPU_BLOCKED)
			c->off_ev = ev;
		else if (opts->events[ev]->offcpu == TALLY_OFFCPU_PREEMPTED)
			c->pre_ev = ev;
	}
	/* a record per context switch: room for a burst of them between two polls;
	 * a stack copy per sample: room for as many samples as a plain one has
	 * with 512 bytes of it, up to the DWARF mode's 2 MiB */
	size_t pages = opts->stack_user ? 512 : c->off_ev >= 0 ? 512 : 128;
	if (opts->leaf_stack > 512 && pages < 512)
		pages = opts->leaf_stack >= 2048 ? 512 : 256;
	size_t pagesz = (size_t)sysconf(_SC_PAGESIZE);
	/* the trailer of non-sample records: pid/tid, time, cpu, identifier */
	rings_init(&c->rings, pagesz, (opts->ring_pages ? opts->ring_pages : pages) * pagesz, 32);
	periods_init(&c->per, opts);
	c->cpu_on = xcalloc((size_t)opts->ncpus, sizeof(bool));
	for (int cpu = 0; cpu < opts->ncpus; cpu++)
		c->cpu_on[cpu] = opts->cpus[cpu];
	ret = open_offcpu(c);
	if (!ret)
		ret = open_samples(c);
	if (ret)
		goto fail;
	rounds_init(&c->rounds, c->samples->ops->counts, false);
	ret = evfds_open(c);
	if (!ret && c->samples->ops->attach)
		ret = c->samples->ops->attach(c, c->samples);
	if (!ret && c->offcpu && c->offcpu->ops->attach)
		ret = c->offcpu->ops->attach(c, c->offcpu);
	if (ret)
		goto fail;
	*out = c;
	return 0;
fail:
	tally_collector_free(c);
	return ret;
}

void mech_free(struct mech *m)
{
	if (m && m->ops->free)
		m->ops->free(m);
	else
		free(m);
}

void tally_collector_free(struct tally_collector *c)
{
	if (!c)
		return;
	rings_release(&c->rings);
	evfds_close(c);
	periods_release(&c->per);
	free(c->cpu_on);
	free(c->pfd);
	mech_free(c->offcpu);
	mech_free(c->samples);
	free(c);
}

/* The mechanisms follow the collector: on while enabled and not paused. */
static void mechs_follow(struct tally_collector *c)
{
	struct mech *ms[] = { c->samples, c->offcpu };
	for (size_t i = 0; i < ARRAY_SIZE(ms); i++)
		if (ms[i] && ms[i]->ops->enable)
			ms[i]->ops->enable(c, ms[i], c->enabled && !c->paused);
}

/* Collection stops: what the mechanisms hold open is counted at the next round. */
static void mechs_pause(struct tally_collector *c)
{
	struct mech *ms[] = { c->samples, c->offcpu };
	for (size_t i = 0; i < ARRAY_SIZE(ms); i++)
		if (ms[i] && ms[i]->ops->pause)
			ms[i]->ops->pause(c, ms[i]);
}

int tally_collector_enable(struct tally_collector *c)
{
	c->enabled = true;
	mechs_follow(c);
	/* the command's task events enable themselves at its exec; its cgroup's now */
	if (c->o.target == TALLY_TARGET_CHILD)
		return evfds_switch(c, true, false);
	return evfds_apply(c, -1);
}

int tally_collector_disable(struct tally_collector *c)
{
	c->enabled = false;
	mechs_pause(c);
	mechs_follow(c);
	return evfds_switch(c, false, true);
}

int tally_collector_pause(struct tally_collector *c, bool paused)
{
	c->paused = paused;
	if (paused)
		mechs_pause(c);
	mechs_follow(c);
	return c->enabled ? evfds_apply(c, -1) : 0;
}

bool tally_collector_paused(const struct tally_collector *c)
{
	return c->paused;
}

int tally_collector_cpu_set(struct tally_collector *c, int cpu, bool on)
{
	if (cpu < 0 || cpu >= c->o.ncpus || !c->o.cpus[cpu])
		return tally_seterr(-EINVAL, "CPU %d is not sampled by this collector", cpu);
	c->cpu_on[cpu] = on;
	return c->enabled ? evfds_apply(c, cpu) : 0;
}

int tally_collector_cpu_rate(struct tally_collector *c, int cpu, uint64_t freq, uint64_t period)
{
	if (cpu < 0 || cpu >= c->o.ncpus || !c->o.cpus[cpu])
		return tally_seterr(-EINVAL, "CPU %d is not sampled by this collector", cpu);
	if (!freq == !period)
		return tally_seterr(-EINVAL, "give a frequency or a period");
	int ne = c->o.nevents;
	/* check every event first: a change applies to all of them or to none */
	for (int ev = 0; ev < ne; ev++) {
		const struct tally_event_desc *d = c->o.events[ev];
		if (d->time_based || d->offcpu)
			continue; /* off-cpu: one sample per switch, whatever the rate */
		if (c->per.mean[ev] && freq)
			return tally_seterr(-EINVAL,
					    "event '%s' samples every %" PRIu64
					    " events here: give a period, not a frequency",
					    d->name, c->per.mean[ev]);
		if (!c->per.mean[ev] && period)
			return tally_seterr(
				-EINVAL,
				"event '%s' samples at a frequency here (the kernel adapts its period): give a frequency, not a period",
				d->name);
	}
	for (int ev = 0; ev < ne; ev++) {
		uint64_t *mean = periods_cpu(&c->per, cpu, ev);
		if (c->o.events[ev]->offcpu)
			continue;
		if (c->o.events[ev]->time_based)
			*mean = period ? period : 1000000000ULL / freq;
		else if (c->per.mean[ev])
			*mean = period;
		for (size_t i = 0; i < c->nfds; i++) {
			struct evfd *f = &c->fds[i];
			if (f->cpu != cpu || f->event != ev)
				continue;
			/* for a freq-mode event the kernel takes the value as the new frequency */
			uint64_t v = *mean ? (c->o.randomize ? periods_draw(&c->per, *mean) : *mean)
					   : freq;
			int e = 0;
			if (*mean)
				e = evfds_set_period(c, f, v);
			else if (ioctl(f->fd, PERF_EVENT_IOC_PERIOD, &v) < 0)
				e = -errno;
			if (e && e != -ESRCH)
				return tally_seterr(
					e, "cannot change the rate of event '%s' on CPU %d: %s",
					c->o.events[ev]->name, cpu, strerror(-e));
		}
		if (c->o.events[ev]->time_based || c->per.mean[ev])
			/* the interval statistics restart at the new period */
			periods_restart(&c->per, cpu, ev);
	}
	c->per.freq_cpu[cpu] = freq; /* 0: given as a period */
	return 0;
}

void tally_collector_cpu_state(const struct tally_collector *c, int cpu, struct tally_cpu_state *st)
{
	memset(st, 0, sizeof(*st));
	if (cpu < 0 || cpu >= c->o.ncpus)
		return;
	st->opened = c->o.cpus[cpu];
	st->on = c->cpu_on[cpu];
	st->sampling = st->opened && st->on && !c->paused && c->enabled;
	st->freq = c->per.freq_cpu[cpu];
	st->period = c->o.nevents ? *periods_cpu(&c->per, cpu, 0) : 0;
}

void tally_collector_periods(const struct tally_collector *c, int event, uint64_t *min,
			     uint64_t *max, double *mean)
{
	*min = *max = 0;
	*mean = 0;
	if (c)
		periods_summary(&c->per, event, min, max, mean);
}

size_t tally_collector_intervals(struct tally_collector *c, int event, uint64_t *p10, uint64_t *p50,
				 uint64_t *p90)
{
	*p10 = *p50 = *p90 = 0;
	return c ? periods_percentiles(&c->per, event, p10, p50, p90) : 0;
}

void tally_collector_random_samples(const struct tally_collector *c, int event, uint64_t *reached,
				    uint64_t *total)
{
	*reached = *total = 0;
	if (c)
		periods_reached(&c->per, event, reached, total);
}

uint64_t tally_collector_mean_period(const struct tally_collector *c, int event)
{
	return c ? c->per.mean[event] : 0;
}

const char *tally_collector_scope(const struct tally_collector *c)
{
	if (!c)
		return "none";
	if (c->o.target == TALLY_TARGET_SYSTEM)
		return "every task (per-CPU events)";
	if (c->o.use_cgroup)
		return "every task of the command (per-CPU events on its own cgroup)";
	return "the original tasks only (threads and children started later keep the period drawn when they were created)";
}

void mech_stats(const struct tally_collector *c, const struct mech *m, struct mech_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (m && m->ops->stats)
		m->ops->stats(c, m, st);
}

bool tally_collector_offcpu_stats(const struct tally_collector *c, struct tally_offcpu_stats *st)
{
	struct mech_stats ms;
	mech_stats(c, c ? c->offcpu : NULL, &ms);
	*st = ms.off;
	return c && c->offcpu;
}

const char *tally_collector_offcpu_mech(const struct tally_collector *c, const char **why)
{
	if (why)
		*why = c ? c->off_why : NULL;
	return c && c->offcpu ? c->offcpu->ops->name : NULL;
}

void tally_collector_rounds(const struct tally_collector *c, uint64_t *rounds, uint64_t *looks,
			    uint64_t *asked)
{
	*rounds = c->rounds.rounds;
	*looks = c->rounds.nlooks;
	if (asked)
		*asked = c->rounds.rounds_asked;
}

enum tally_sample_mech tally_collector_sample_mech(const struct tally_collector *c)
{
	return c ? (enum tally_sample_mech)c->samples->ops->kind : TALLY_SAMPLE_RING;
}

const char *tally_collector_sample_mech_why(const struct tally_collector *c)
{
	return c && c->sample_why[0] ? c->sample_why : NULL;
}

bool tally_collector_watch(const struct tally_collector *c, uint64_t *told, uint64_t *bursts,
			   const char **why)
{
	struct mech_stats ms;
	mech_stats(c, c ? c->samples : NULL, &ms);
	*told = ms.told;
	*bursts = ms.bursts;
	*why = ms.watch_why;
	return ms.watch;
}

void tally_collector_watch_program(struct tally_collector *c, uint32_t dev, uint64_t ino,
				   uint32_t gen)
{
	if (c && c->samples->ops->watch_program)
		c->samples->ops->watch_program(c->samples, dev, ino, gen);
}

void tally_collector_watch_forget(struct tally_collector *c)
{
	if (c && c->samples->ops->watch_forget)
		c->samples->ops->watch_forget(c->samples);
}

uint64_t tally_collector_sample_overflow(const struct tally_collector *c)
{
	struct mech_stats ms;
	mech_stats(c, c ? c->samples : NULL, &ms);
	return ms.overflow;
}

uint64_t tally_collector_sample_tables_emptied(const struct tally_collector *c)
{
	struct mech_stats ms;
	mech_stats(c, c ? c->samples : NULL, &ms);
	return ms.tables_emptied;
}
