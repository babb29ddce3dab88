/* Sample periods (period.h): mean periods per CPU, redraws, the history of
 * the periods set on each fd, a sample's weight, and the statistics. */
#define _GNU_SOURCE
#include "tally/collect.h"
#include "tally/util.h"
#include "period.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: enough for drawing periods, cheap and without global state */
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void periods_init(struct periods *p, const struct tally_collect_opts *o)
{
	memset(p, 0, sizeof(*p));
	p->nevents = o->nevents;
	p->ncpus = o->ncpus;
	p->redraw_s = 0.2;
	p->rng = (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(tally_now_wall() * 1e9);
	if (!p->rng)
		p->rng = 1;
	p->mean = xcalloc((size_t)o->nevents, sizeof(uint64_t));
	p->mean_cpu = xcalloc((size_t)o->nevents * (size_t)o->ncpus, sizeof(uint64_t));
	p->freq_cpu = xcalloc((size_t)o->ncpus, sizeof(uint64_t));
	p->ps = xcalloc((size_t)o->nevents, sizeof(*p->ps));
	p->last = xcalloc((size_t)o->nevents * (size_t)o->ncpus, sizeof(*p->last));
	for (int ev = 0; ev < o->nevents; ev++) {
		p->ps[ev].min = UINT64_MAX;
		if (o->events[ev]->offcpu)
			continue; /* one sample per switch: no period */
		if (o->period)
			p->mean[ev] = o->period;
		else if (o->events[ev]->time_based)
			p->mean[ev] = 1000000000ULL / o->freq;
	}
	for (int cpu = 0; cpu < o->ncpus; cpu++) {
		p->freq_cpu[cpu] = o->freq;
		for (int ev = 0; ev < o->nevents; ev++)
			*periods_cpu(p, cpu, ev) = p->mean[ev];
	}
}

void periods_release(struct periods *p)
{
	free(p->mean);
	free(p->mean_cpu);
	free(p->freq_cpu);
	free(p->ps);
	free(p->last);
	memset(p, 0, sizeof(*p));
}

uint64_t periods_draw(struct periods *p, uint64_t mean)
{
	uint64_t span = mean / 4;
	if (span < 2)
		return mean;
	return mean - mean / 8 + rng_next(&p->rng) % (span + 1);
}

bool periods_redraw_due(const struct periods *p, double now)
{
	return now - p->last_redraw >= p->redraw_s;
}

void period_hist_open(struct period_hist *h, uint64_t period)
{
	memset(h, 0, sizeof(*h));
	if (period) {
		h->chg[0] = (struct period_change){ 0, period, UINT64_MAX, true };
		h->n = 1;
	}
}

void period_hist_set(struct period_hist *h, uint64_t since, uint64_t p, uint64_t count,
		     bool carried)
{
	/* the time after the change: a sample before it had the old period, and
	 * the new one cannot fire sooner than one period after the change */
	if (h->n == PERIOD_HISTORY) {
		memmove(&h->chg[0], &h->chg[1], (PERIOD_HISTORY - 1) * sizeof(h->chg[0]));
		h->n--;
	}
	h->chg[h->n++] = (struct period_change){ since, p, count, carried };
}

/* The weight of a sample at time t: the period in effect then (0: none
 * tally set), and for the first sample after a change of a per-CPU timer
 * event, the part of the period the change cut short. */
static uint64_t period_at(struct period_hist *h, uint64_t t)
{
	for (unsigned i = h->n; i-- > 0;) {
		struct period_change *ch = &h->chg[i];
		if (ch->since > t && i)
			continue;
		uint64_t w = ch->period;
		if (!ch->carried) {
			/* every sample before the change was delivered: the time between
			 * the last of them and the change was counted, never sampled.  A
			 * task that ran on this CPU only now and then (a busy machine)
			 * may see several changes between two samples: each cut the
			 * period then running, so up to three periods of each change
			 * not carried yet are this one's to carry (a period and a late
			 * timer's overrun, seen up to 2.6 ms of a 1.1 ms period) */
			uint64_t bound = 0;
			for (unsigned j = i + 1; j-- > 0 && !h->chg[j].carried;) {
				h->chg[j].carried = true;
				bound += 3 * (j ? h->chg[j - 1].period : h->chg[j].period);
			}
			if (ch->count != UINT64_MAX) {
				if (ch->count > h->weighed && ch->count - h->weighed < bound)
					w += ch->count - h->weighed;
				else
					/* not carried (more than the changes could cut: a
					 * sample lost): the count up to the change is taken
					 * as weighed, or every later change would look too
					 * long too, and its cut be lost as well (1.2% of a
					 * busy machine's CPU time went so) */
					h->weighed = ch->count;
			}
		}
		return w;
	}
	return 0;
}

/* n samples of summed weight w, each w/n on average: the period statistics
 * (reached: taken by an event whose period tally sets) */
static void stats_add(struct period_stats *s, uint64_t w, uint64_t n, bool reached)
{
	uint64_t each = w / n;
	if (each < s->min)
		s->min = each;
	if (each > s->max)
		s->max = each;
	s->n += n;
	if (reached)
		s->reached += n;
	s->sum += (double)w;
}

/* One interval between back-to-back samples of a thread, into the reservoir
 * the percentiles are taken from. */
static void keep_interval(struct periods *p, struct period_stats *s, uint64_t d)
{
	s->seen_ivals++;
	if (s->nivals < ARRAY_SIZE(s->ivals)) {
		s->ivals[s->nivals++] = d;
	} else {
		uint64_t j = rng_next(&p->rng) % s->seen_ivals;
		if (j < ARRAY_SIZE(s->ivals))
			s->ivals[j] = d;
	}
}

uint64_t periods_weigh(struct periods *p, struct period_hist *h, const struct tally_rec *r,
		       bool reached, bool time_based)
{
	struct period_stats *s = &p->ps[r->event];
	/* what the sample stands for: a timer event (cpu-clock, task-clock) keeps
	 * reporting the period it was opened with whatever tally set since, so
	 * its weight is the period tally set last before the sample; a copy
	 * inherited by a later task reports its own, fixed at its creation, as
	 * every counting event reports the period it really used (-F adapts it) */
	uint64_t weight = r->period;
	if (reached && time_based && h->n) {
		uint64_t w = period_at(h, r->time);
		if (w)
			weight = w;
		h->weighed += weight;
	}
	stats_add(s, weight, 1, reached);
	uint64_t mean = r->cpu < (uint32_t)p->ncpus ? *periods_cpu(p, (int)r->cpu, r->event) : 0;
	if (mean && time_based) {
		struct last_sample *l =
			&p->last[(size_t)r->cpu * (size_t)p->nevents + (size_t)r->event];
		uint64_t d = r->time - l->time;
		/* only back-to-back samples of a running thread: no sleeps, no migrations */
		if (l->time && l->tid == r->tid && r->time > l->time && d < mean * 3 / 2)
			keep_interval(p, s, d);
		l->time = r->time;
		l->tid = r->tid;
	}
	return weight;
}

void periods_counted(struct periods *p, int ev, uint64_t w, uint64_t n)
{
	/* one sample's own weight is not kept: min and max of the places' means */
	stats_add(&p->ps[ev], w, n, true);
}

void periods_interval(struct periods *p, int ev, uint64_t d)
{
	keep_interval(p, &p->ps[ev], d);
}

void periods_restart(struct periods *p, int cpu, int ev)
{
	p->last[(size_t)cpu * (size_t)p->nevents + (size_t)ev].time = 0;
}

void periods_summary(const struct periods *p, int ev, uint64_t *min, uint64_t *max, double *mean)
{
	const struct period_stats *s = &p->ps[ev];
	*min = s->n ? s->min : 0;
	*max = s->n ? s->max : 0;
	*mean = s->n ? s->sum / (double)s->n : 0;
}

size_t periods_percentiles(struct periods *p, int ev, uint64_t *p10, uint64_t *p50, uint64_t *p90)
{
	struct period_stats *s = &p->ps[ev];
	if (!s->nivals)
		return 0;
	tally_qsort(s->ivals, s->nivals, sizeof(uint64_t), tally_cmp_u64);
	*p10 = s->ivals[s->nivals / 10];
	*p50 = s->ivals[s->nivals / 2];
	*p90 = s->ivals[s->nivals * 9 / 10];
	return s->nivals;
}

void periods_reached(const struct periods *p, int ev, uint64_t *reached, uint64_t *total)
{
	*reached = p->ps[ev].reached;
	*total = p->ps[ev].n;
}
