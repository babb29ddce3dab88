/* Sample periods (period.c, docs/sampling.md "Randomized period" and
 * "Weights"): the mean period of each event on each CPU, the redraws around
 * it, the history of the periods set on each event fd (a sample's weight is
 * the period in effect at its time), and the statistics the session reports
 * (periods seen, the timer's real intervals, the samples a redraw reached).
 * Knows nothing of the fds themselves: the collector sets what it draws. */
#ifndef TALLY_COLLECT_PERIOD_H
#define TALLY_COLLECT_PERIOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tally_collect_opts;
struct tally_rec;

/* A period tally set on an event, and from when (CLOCK_MONOTONIC ns, the
 * clock of the samples' times: 0 for the one it was opened with). */
struct period_change {
	uint64_t since, period;
	/* a per-CPU timer event: its count (ns) when the change was made, or
	 * UINT64_MAX; the kernel starts the new period afresh, so the time since
	 * the last sample before the change goes to the first sample after it */
	uint64_t count;
	bool carried;
};
#define PERIOD_HISTORY 4

/* The periods tally set on one event fd, newest last: a sample's weight is
 * the one in effect at its time (samples taken before a change may still be
 * in the ring when it is made); none: a period the kernel adapts (-F). */
struct period_hist {
	struct period_change chg[PERIOD_HISTORY];
	unsigned n;
	uint64_t weighed; /* the weights of its samples so far (per-CPU timer events) */
};

struct period_stats {
	uint64_t min, max, n;
	uint64_t reached; /* samples of an event tally redraws (not one a later task inherited) */
	double sum;
	/* intervals between consecutive samples of one thread on one CPU: what the
	 * timer really did (the sample's period field keeps the opening value) */
	uint64_t ivals[4096];
	size_t nivals;
	uint64_t seen_ivals;
};

struct last_sample {
	uint64_t time;
	uint32_t tid;
};

struct periods {
	int nevents, ncpus;
	uint64_t *mean;     /* per event, 0 when in freq mode */
	uint64_t *mean_cpu; /* per (cpu, event): the period now asked of that CPU (0: freq mode) */
	uint64_t *freq_cpu; /* per cpu: the frequency of freq-mode events there */
	struct period_stats *ps;  /* per event */
	struct last_sample *last; /* per (cpu, event) */
	uint64_t rng;
	double last_redraw;
	double redraw_s; /* seconds between two redraws */
};

/* The mean periods of o's events (a fixed period, or the frequency's for
 * time-based events; 0: the kernel adapts it), on every CPU. */
void periods_init(struct periods *p, const struct tally_collect_opts *o);
void periods_release(struct periods *p);
/* The period now asked of (cpu, ev), 0 in freq mode. */
static inline uint64_t *periods_cpu(const struct periods *p, int cpu, int ev)
{
	return &p->mean_cpu[(size_t)cpu * (size_t)p->nevents + (size_t)ev];
}
/* A period around mean: uniform in [mean - mean/8, mean + mean/8], the mean
 * unchanged, the phase decorrelated. */
uint64_t periods_draw(struct periods *p, uint64_t mean);
/* Whether the periods are due a redraw at now (s; last_redraw: the last one). */
bool periods_redraw_due(const struct periods *p, double now);

/* The period an fd was opened with (0: the kernel adapts it). */
void period_hist_open(struct period_hist *h, uint64_t period);
/* The fd's period is p from since on (count: as struct period_change;
 * carried: nothing to carry, the mechanism weighs the samples itself). */
void period_hist_set(struct period_hist *h, uint64_t since, uint64_t p, uint64_t count,
		     bool carried);

/* A sample r of the ring (its event, cpu, tid, time and period) of an fd
 * with history h: its weight (the period in effect at its time for a time
 * event whose period tally set: reached; else the period it reports), into
 * the statistics with the interval since the thread's last sample there. */
uint64_t periods_weigh(struct periods *p, struct period_hist *h, const struct tally_rec *r,
		       bool reached, bool time_based);
/* n samples of event ev of summed weight w, counted in the kernel. */
void periods_counted(struct periods *p, int ev, uint64_t w, uint64_t n);
/* One interval between back-to-back samples of a thread, measured in the kernel. */
void periods_interval(struct periods *p, int ev, uint64_t d);
/* The interval statistics of (cpu, ev) restart (a new rate). */
void periods_restart(struct periods *p, int cpu, int ev);

/* tally_collector_periods, _intervals and _random_samples of one event. */
void periods_summary(const struct periods *p, int ev, uint64_t *min, uint64_t *max, double *mean);
size_t periods_percentiles(struct periods *p, int ev, uint64_t *p10, uint64_t *p50, uint64_t *p90);
void periods_reached(const struct periods *p, int ev, uint64_t *reached, uint64_t *total);

#endif
