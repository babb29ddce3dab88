/* Samples counted in the kernel (docs/sampling.md, "Counting in the
 * kernel"), a mechanism of internal.h over the loaders of sample_bpf.c and
 * watch_bpf.c: the program on every sampling fd counts per (process,
 * event, mode, address) in tables in tally's memory; a round takes what
 * each place grew by as one record among the rings' side-band records, in
 * time order. The rings' records then wait between rounds (the looks of
 * rounds.h), and the exec watch tells of the programs tally must look at
 * while they live. Built only with libbpf; mech_nobpf.c stands in for it
 * without. */
#define _GNU_SOURCE
#include "internal.h"
#include "sample-bpf.h"
#include "watch-bpf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sample count read from the tables, staged with the ring records and
 * delivered in time order among them (at the time of its last sample). */
#define REC_COUNTED (MECH_REC_OWN + 1)
struct counted_rec {
	struct perf_event_header h;
	uint32_t tgid;
	uint16_t event, kernel;
	uint64_t ip, count, weight, time;
};

struct counted {
	struct mech m;
	struct tally_sample_bpf *sbpf;
	uint64_t *seen; /* per slot: the intervals already taken from it */
	/* this round's drain: what the places grew by (owned by sbpf) */
	const struct sb_key *keys;
	const struct sb_val *vals;
	size_t n;
	uint32_t *pids; /* the processes whose places a round takes (sorted) */
	size_t npids, apids;
	uint32_t *exited; /* processes that ended since the last full round */
	size_t nexited, aexited;
	bool *taken; /* per entry of the drain, taken this round */
	size_t ataken;
	/* the exec watch (watch-bpf.h), or NULL (watch_why says why) */
	struct tally_watch_bpf *watch;
	char watch_why[256];
	uint64_t told, bursts; /* execs it told of (those tally took), bursts of execs */
	uint64_t burst_execs;  /* execs that make a burst (rounds_burst_execs) */
};

/* What failed, with the way out: the ring (and the privileges for -EPERM). */
static int sample_bpf_error(int r)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", tally_errmsg());
	return tally_seterr(r, "%s (%suse --sample-mechanism ring)", msg,
			    r == -EPERM ? "run as root or grant CAP_BPF and CAP_PERFMON, or " : "");
}

/* The slot through which the program weighs the samples of a per-CPU timer
 * event with the period tally set (NULL: none, the ring's samples). */
static struct sb_slot *slot_of(const struct tally_collector *c, const struct counted *k,
			       const struct evfd *f)
{
	if (f->task < 0 && f->event >= 0 && c->o.events[f->event]->time_based)
		return tally_sample_bpf_slot(k->sbpf, f->cpu, f->event);
	return NULL;
}

/* The rings were looked at (or read): the exec watch tells of the next
 * burst of execs from now, so that the side-band records of programs it
 * does not tell of cannot fill a ring between two looks however far apart
 * they are. */
static void counted_looked(struct tally_collector *c, struct mech *m)
{
	(void)c;
	struct counted *k = (struct counted *)m;
	if (k->watch)
		tally_watch_bpf_mark(k->watch, k->burst_execs);
}

/* The exec watch, where it loads (not needed: without it the looks stay
 * 200 ms apart). TALLY_EXEC_WATCH=off leaves it out (tests, and
 * comparisons); a value other than on or off is refused. */
static int load_watch(struct tally_collector *c, struct counted *k)
{
	const char *env = getenv("TALLY_EXEC_WATCH");
	if (env && strcmp(env, "on") && strcmp(env, "off"))
		return tally_seterr(
			-EINVAL,
			"TALLY_EXEC_WATCH is '%s': it takes on or off (unset: on where it loads)",
			env);
	if (env && !strcmp(env, "off")) {
		snprintf(k->watch_why, sizeof(k->watch_why), "TALLY_EXEC_WATCH=off");
		return 0;
	}
	if (tally_watch_bpf_open(&k->watch))
		snprintf(k->watch_why, sizeof(k->watch_why), "%s", tally_errmsg());
	k->burst_execs = rounds_burst_execs(c->rings.data_size);
	c->rounds.watch = k->watch != NULL;
	counted_looked(c, &k->m);
	return 0;
}

/* The loaded program on every sampling fd. */
static int counted_attach(struct tally_collector *c, struct mech *m)
{
	struct counted *k = (struct counted *)m;
	for (size_t i = 0; i < c->nfds; i++) {
		struct evfd *f = &c->fds[i];
		if (f->event < 0 || f->kind != FD_SAMPLE)
			continue;
		/* a failure here ends the recording: a program left on some fds
		 * would keep their samples from the ring */
		int r = tally_sample_bpf_attach(k->sbpf, f->fd, f->event);
		if (r)
			return sample_bpf_error(r);
		struct sb_slot *slot = slot_of(c, k, f);
		if (slot && f->hist.n)
			slot->period = f->hist.chg[f->hist.n - 1].period;
		if (f->hist.n)
			f->hist.chg[f->hist.n - 1].carried = true;
		f->mech_weighs = slot != NULL;
	}
	k->seen = xcalloc((size_t)c->o.ncpus * SB_MAX_EVENTS, sizeof(uint64_t));
	/* a new period costs an IPI per fd: once a round */
	c->per.redraw_s = TALLY_COUNTED_ROUND_MS / 1000.0;
	return load_watch(c, k);
}

/* The program weighs the samples of f: the new period, and the part of the
 * old one the change cut, the time since the last sample there (a per-CPU
 * clock counts all of it), without a read of the count (each one an
 * interrupt of that CPU). */
static void counted_period(struct tally_collector *c, struct mech *m, const struct evfd *f,
			   uint64_t p)
{
	struct sb_slot *slot = slot_of(c, (struct counted *)m, f);
	if (!slot)
		return;
	uint64_t prev = __atomic_load_n(&slot->period, __ATOMIC_RELAXED);
	uint64_t last = __atomic_load_n(&slot->last_time, __ATOMIC_RELAXED);
	uint64_t now = collect_mono_ns();
	__atomic_store_n(&slot->period, p, __ATOMIC_RELAXED);
	if (prev && last && now > last && now - last < 2 * prev)
		__atomic_fetch_add(&slot->carry, now - last, __ATOMIC_RELAXED);
}

/* Read before the rings: every record the counts may need (a fork, an
 * exec, an mmap) is then in what the rings hold. */
static int counted_drain(struct tally_collector *c, struct mech *m, struct round *rd)
{
	(void)c, (void)rd;
	struct counted *k = (struct counted *)m;
	k->keys = NULL;
	k->vals = NULL;
	k->n = 0;
	return tally_sample_bpf_drain(k->sbpf, &k->keys, &k->vals, &k->n);
}

struct pid_key {
	const uint32_t *v;
	uint32_t pid;
};

static bool pid_below(const void *ctx, size_t i)
{
	const struct pid_key *k = ctx;
	return k->v[i] < k->pid;
}

/* The entries of the drain this round takes (NULL: all, a full round), from
 * the side-band records staged in c->rings. A round of every 200 ms while
 * side-band records come takes only the places of the processes those
 * records are of: their order among the records matters (an exec or an
 * mmap after a sample, an exit); the other places count on in the tables
 * and are taken by a full round (rounds.h). A process that ended this round
 * is taken whole by the rounds up to the next full one after it: its last
 * samples may still be in the tables, and it is forgotten a few rounds
 * after its exit (so a full round keeps its own round's exits for the next). */
static bool *taken_now(struct tally_collector *c, struct counted *k, bool full)
{
	if (full)
		k->nexited = 0;
	k->npids = 0;
	for (size_t i = 0; i < c->rings.nrefs; i++) {
		const struct perf_event_header *h = rings_rec(&c->rings, i);
		if (h->type != PERF_RECORD_FORK && h->type != PERF_RECORD_EXIT &&
		    h->type != PERF_RECORD_COMM && h->type != PERF_RECORD_MMAP &&
		    h->type != PERF_RECORD_MMAP2)
			continue;
		if (h->size < sizeof(*h) + sizeof(uint32_t))
			continue;
		uint32_t pid = ((const uint32_t *)(h + 1))[0];
		/* a process's records come together (an exec's mmaps, its threads'
		 * exits): each pid once in a row, not once per record */
		if (h->type == PERF_RECORD_EXIT &&
		    (!k->nexited || k->exited[k->nexited - 1] != pid)) {
			GROW(k->exited, k->aexited, k->nexited + 1);
			k->exited[k->nexited++] = pid;
		}
		if (!full && (!k->npids || k->pids[k->npids - 1] != pid)) {
			GROW(k->pids, k->apids, k->npids + 1);
			k->pids[k->npids++] = pid;
		}
	}
	if (full)
		return NULL;
	GROW(k->pids, k->apids, k->npids + k->nexited + 1);
	if (k->nexited)
		memcpy(k->pids + k->npids, k->exited, k->nexited * sizeof(uint32_t));
	k->npids += k->nexited;
	tally_qsort(k->pids, k->npids, sizeof(uint32_t), tally_cmp_u32);
	GROW(k->taken, k->ataken, k->n + 1);
	for (size_t i = 0; i < k->n; i++) {
		struct pid_key key = { k->pids, k->keys[i].tgid };
		size_t at = tally_partition(k->npids, pid_below, &key);
		k->taken[i] = at < k->npids && k->pids[at] == k->keys[i].tgid;
	}
	return k->taken;
}

/* The counts taken this round, as one more run of records in time order
 * (sorted only when there are records of the rings to order them among):
 * each at the time of its last sample, so that an exec or an exit after it
 * is applied after it, and a fork or an mmap before its first sample
 * before it. */
static void counted_stage(struct tally_collector *c, struct mech *m, struct round *rd)
{
	struct counted *k = (struct counted *)m;
	bool *taken = taken_now(c, k, rd->full);
	tally_sample_bpf_commit(k->sbpf, taken);
	if (!k->n)
		return;
	size_t first = c->rings.nrefs;
	rings_reserve(&c->rings, k->n, sizeof(struct counted_rec));
	for (size_t i = 0; i < k->n; i++) {
		const struct sb_key *key = &k->keys[i];
		const struct sb_val *v = &k->vals[i];
		if (!v->count || key->event >= c->o.nevents || (taken && !taken[i]))
			continue;
		struct counted_rec cr = {
			.h = { .type = REC_COUNTED, .misc = 0, .size = sizeof(cr) },
			.tgid = key->tgid, .event = key->event, .kernel = key->kernel,
			.ip = key->ip, .count = v->count, .weight = v->weight, .time = v->last,
		};
		rings_put(&c->rings, &cr, sizeof(cr), cr.time);
	}
	rings_end_run(&c->rings, first, !rd->alone);
}

/* A count from the tables as a record of count samples of summed weight. */
static void counted_own(struct tally_collector *c, struct mech *m, struct round *rd,
			const struct perf_event_header *h)
{
	(void)m;
	const struct counted_rec *cr = (const struct counted_rec *)h;
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.raw = &cr->h;
	r.type = PERF_RECORD_SAMPLE;
	r.misc = cr->kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	r.event = cr->event;
	r.pid = r.tid = cr->tgid;
	r.time = cr->time;
	r.ip = cr->ip;
	r.count = cr->count;
	r.weight = cr->weight;
	r.period = cr->weight / cr->count;
	if (r.time > c->max_time)
		c->max_time = r.time;
	periods_counted(&c->per, r.event, cr->weight, cr->count);
	rd->fn(rd->ctx, &r);
}

/* What the timer did, from the program's slots: the intervals between
 * back-to-back samples of one thread it measured since the last round. */
static void counted_finish(struct tally_collector *c, struct mech *m, struct round *rd)
{
	(void)rd;
	struct counted *k = (struct counted *)m;
	for (int cpu = 0; cpu < c->o.ncpus; cpu++) {
		for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++) {
			struct sb_slot *slot = tally_sample_bpf_slot(k->sbpf, cpu, ev);
			uint64_t *seen = &k->seen[(size_t)cpu * SB_MAX_EVENTS + (size_t)ev];
			uint64_t n = __atomic_load_n(&slot->nivals, __ATOMIC_ACQUIRE);
			if (n <= *seen)
				continue;
			uint64_t from = n - *seen > SB_IVALS ? n - SB_IVALS : *seen;
			for (uint64_t i = from; i < n; i++)
				periods_interval(&c->per, ev,
						 __atomic_load_n(&slot->ivals[i & (SB_IVALS - 1)],
								 __ATOMIC_RELAXED));
			*seen = n;
		}
	}
}

static int counted_wake_fd(const struct mech *m)
{
	const struct counted *k = (const struct counted *)m;
	return k->watch ? tally_watch_bpf_fd(k->watch) : -1;
}

/* What the exec watch told since it was last asked: programs tally must
 * look at while they live (new to it, or whose processes make JIT code),
 * and bursts of known ones. */
static unsigned counted_woke(struct mech *m, unsigned *bursts)
{
	struct counted *k = (struct counted *)m;
	*bursts = 0;
	unsigned n = k->watch ? tally_watch_bpf_take(k->watch, bursts) : 0;
	k->told += n;
	k->bursts += *bursts;
	return n;
}

static void counted_watch_program(struct mech *m, uint32_t dev, uint64_t ino, uint32_t gen)
{
	struct counted *k = (struct counted *)m;
	if (k->watch) {
		struct wb_file f = { .ino = ino, .dev = dev, .gen = gen };
		/* a full table: such a program's starts are looked at later */
		tally_watch_bpf_close(k->watch, &f);
	}
}

static void counted_watch_forget(struct mech *m)
{
	struct counted *k = (struct counted *)m;
	if (k->watch)
		tally_watch_bpf_forget(k->watch);
}

static void counted_stats(const struct tally_collector *c, const struct mech *m,
			  struct mech_stats *st)
{
	const struct counted *k = (const struct counted *)m;
	for (int cpu = 0; cpu < c->o.ncpus; cpu++)
		for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++)
			st->overflow += __atomic_load_n(
				&tally_sample_bpf_slot(k->sbpf, cpu, ev)->ring, __ATOMIC_RELAXED);
	st->tables_emptied = tally_sample_bpf_emptied(k->sbpf);
	st->watch = k->watch != NULL;
	st->watch_why = !k->watch && k->watch_why[0] ? k->watch_why : NULL;
	st->told = k->told;
	st->bursts = k->bursts;
}

static void counted_free(struct mech *m)
{
	struct counted *k = (struct counted *)m;
	tally_sample_bpf_free(k->sbpf);
	tally_watch_bpf_free(k->watch);
	free(k->seen);
	free(k->pids);
	free(k->exited);
	free(k->taken);
	free(k);
}

static const struct mech_ops counted_ops = {
	.name = "bpf",
	.kind = TALLY_SAMPLE_BPF,
	.counts = true,
	.attach = counted_attach,
	.drain = counted_drain,
	.stage = counted_stage,
	.own = counted_own,
	.sample = mech_ring_sample, /* a new place when the table is full: through the ring */
	.finish = counted_finish,
	.wake_fd = counted_wake_fd,
	.woke = counted_woke,
	.looked = counted_looked,
	.period = counted_period,
	.watch_program = counted_watch_program,
	.watch_forget = counted_watch_forget,
	.stats = counted_stats,
	.free = counted_free,
};

int mech_counted_open(struct tally_collector *c, bool asked, struct mech **out)
{
	*out = NULL;
	bool tb[SB_MAX_EVENTS] = { false };
	for (int ev = 0; ev < c->o.nevents && ev < SB_MAX_EVENTS; ev++)
		tb[ev] = c->o.events[ev]->time_based && !c->o.events[ev]->offcpu;
	struct tally_sample_bpf *sbpf;
	int r = tally_sample_bpf_open(&sbpf, tb,
				      c->o.nevents < SB_MAX_EVENTS ? c->o.nevents : SB_MAX_EVENTS);
	if (r) {
		if (asked)
			return sample_bpf_error(r);
		snprintf(c->sample_why, sizeof(c->sample_why), "the BPF program did not load: %s",
			 tally_errmsg());
		return 0;
	}
	struct counted *k = xcalloc(1, sizeof(*k));
	k->m.ops = &counted_ops;
	k->sbpf = sbpf;
	*out = &k->m;
	return 0;
}
