/* A poll of the collector (tally_collector_poll): wait for the round
 * rounds.c says (looking at the waiting records on the way, when samples
 * are counted in the kernel), drain each mechanism, read and merge the
 * rings with what the mechanisms staged, and deliver every record in time
 * order to the caller. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <math.h>
#include <poll.h>
#include <string.h>

/* The mechanisms a round goes through, samples first. */
#define MECHS(c) { (c)->samples, (c)->offcpu }

/* The milliseconds from now to t, rounded up (0: t has passed). */
static int ms_until(double now, double t)
{
	double ms = (t - now) * 1000;
	if (ms <= 0)
		return 0;
	return ms >= INT_MAX ? INT_MAX : (int)ceil(ms);
}

/* The wait's fds: the rings, then the caller's fd (if any), then the
 * sample mechanism's own (if any). */
static size_t wait_fds(struct tally_collector *c, int *wake_at, int *mech_at)
{
	GROW(c->pfd, c->apfd, c->rings.n + 2);
	size_t n = 0;
	for (size_t i = 0; i < c->rings.n; i++)
		c->pfd[n++] = (struct pollfd){ .fd = c->rings.v[i].fd, .events = POLLIN };
	*wake_at = *mech_at = -1;
	if (c->o.wake_fd >= 0) {
		*wake_at = (int)n;
		c->pfd[n++] = (struct pollfd){ .fd = c->o.wake_fd, .events = POLLIN };
	}
	int mfd = c->samples->ops->wake_fd ? c->samples->ops->wake_fd(c->samples) : -1;
	if (mfd >= 0) {
		*mech_at = (int)n;
		c->pfd[n++] = (struct pollfd){ .fd = mfd, .events = POLLIN };
	}
	return n;
}

enum { WOKE_RING = 1, WOKE_CALLER = 2, WOKE_MECH = 4 };

/* Waits until deadline (on the rings too when rings): what woke it, 0 for
 * the deadline (or a signal). */
static unsigned wait_until(struct tally_collector *c, size_t n, int wake_at, int mech_at,
			   double deadline, bool rings)
{
	struct pollfd *pfd = c->pfd, *w = pfd + c->rings.n;
	nfds_t nw = (nfds_t)(n - c->rings.n);
	int r = rings ? poll(pfd, n, ms_until(tally_now_mono(), deadline))
		      : poll(w, nw, ms_until(tally_now_mono(), deadline));
	bool in = false;
	for (size_t i = rings ? 0 : c->rings.n; i < n && r > 0; i++)
		in = in || (pfd[i].revents & POLLIN);
	if (r > 0 && !in) {
		/* a ring whose tasks all exited reports POLLHUP at once: wait out
		 * the time on the other fds instead of spinning */
		r = poll(w, nw, ms_until(tally_now_mono(), deadline));
		rings = false;
	}
	unsigned got = 0;
	for (size_t i = 0; rings && r > 0 && i < c->rings.n; i++)
		if (pfd[i].revents & POLLIN)
			got |= WOKE_RING;
	if (r > 0 && wake_at >= 0 && (pfd[wake_at].revents & POLLIN))
		got |= WOKE_CALLER;
	if (r > 0 && mech_at >= 0 && (pfd[mech_at].revents & POLLIN))
		got |= WOKE_MECH;
	return got;
}

/* Whether a side-band record asks for a round soon: the caller's prompt says
 * so (every one, without a prompt). */
static bool asks_round(void *ctx, const struct perf_event_header *h)
{
	const struct tally_collector *c = ctx;
	return !c->o.prompt || c->o.prompt(c->o.prompt_ctx, h);
}

static void mechs_looked(struct tally_collector *c)
{
	struct mech *ms[] = MECHS(c);
	for (size_t i = 0; i < ARRAY_SIZE(ms); i++)
		if (ms[i] && ms[i]->ops->looked)
			ms[i]->ops->looked(c, ms[i]);
}

/* Waits for the next round (rounds.h): false when a look left the records
 * in the rings for a later one. The caller's timeout bounds the wait; its
 * fd ends it (a look, not a round, when records wait in the rings: what it
 * asks for that needs the counts reads them itself, with a timeout of 0). */
static bool wait_round(struct tally_collector *c, int timeout_ms)
{
	if (timeout_ms <= 0)
		return true; /* the caller wants a round now */
	struct rounds *rs = &c->rounds;
	double now = tally_now_mono();
	double until = now + timeout_ms / 1000.0;
	int wake_at, mech_at;
	size_t n = wait_fds(c, &wake_at, &mech_at);
	rounds_begin(rs, now);
	bool pending = rs->looks && rings_pending(&c->rings);
	unsigned got;
	for (;;) {
		struct rounds_next next = rounds_plan(rs, now, until, pending);
		if (next.act == ROUNDS_ROUND)
			return true;
		got = wait_until(c, n, wake_at, mech_at, next.deadline, next.rings);
		now = tally_now_mono();
		if (got != WOKE_RING || !rs->looks)
			break;
		pending = true; /* a ring's first record: its look comes a gap after the last */
	}
	unsigned told = 0, bursts = 0;
	if (got & WOKE_MECH)
		told = c->samples->ops->woke(c->samples, &bursts);
	bool pending_now = rs->looks && rings_pending(&c->rings);
	bool caller = got & WOKE_CALLER;
	struct rounds_next next = rounds_woke(rs, now, caller, told, bursts, pending_now);
	if (next.act == ROUNDS_ROUND) {
		/* told by the exec watch: the round comes a gap after the last
		 * round or look (the caller's fd may end that wait) */
		if (next.deadline > now)
			poll(wake_at >= 0 ? &c->pfd[wake_at] : NULL, wake_at >= 0 ? 1 : 0,
			     ms_until(now, next.deadline));
		return true;
	}
	double since;
	bool round = rounds_look(rs, now, &since);
	mechs_looked(c);
	if (round)
		return true;
	bool asked = false;
	double fill_s;
	bool prompt = rings_look(&c->rings, since, asks_round, c, &asked, &fill_s);
	return rounds_looked(rs, prompt, asked, fill_s, caller);
}

/* One record of the rings (or one a mechanism staged), to its mechanism and
 * the caller. */
static void deliver(struct tally_collector *c, struct round *rd, const struct perf_event_header *h)
{
	if (h->type >= MECH_REC_OWN) {
		c->samples->ops->own(c, c->samples, rd, h);
		return;
	}
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.raw = h;
	r.type = h->type;
	r.misc = h->misc;
	r.event = -1;
	const uint64_t *p = (const uint64_t *)(h + 1);
	const uint64_t *end = (const uint64_t *)((const char *)h + h->size);
	if (h->type == PERF_RECORD_SAMPLE) {
		if (end - p < 6)
			return;
		struct evfd *f = evfds_find(c, p[0]);
		if (!f || f->event < 0)
			return;
		r.event = f->event;
		r.ip = p[1];
		r.pid = (uint32_t)p[2];
		r.tid = (uint32_t)(p[2] >> 32);
		r.time = p[3];
		r.cpu = (uint32_t)p[4];
		r.period = p[5];
		if (r.time > c->max_time)
			c->max_time = r.time;
		struct mech *m = f->kind == FD_SAMPLE ? c->samples : c->offcpu;
		m->ops->sample(c, m, rd, f, &r, p + 6, end);
		return;
	}
	if ((size_t)h->size >= sizeof(*h) + c->rings.trailer) {
		const uint64_t *t = (const void *)((const char *)h + h->size - c->rings.trailer);
		r.pid = (uint32_t)t[0];
		r.tid = (uint32_t)(t[0] >> 32);
		r.time = t[1];
		r.cpu = (uint32_t)t[2];
		if (r.time > c->max_time)
			c->max_time = r.time;
		struct mech *ms[] = MECHS(c);
		for (size_t i = 0; i < ARRAY_SIZE(ms); i++)
			if (ms[i] && ms[i]->ops->sideband)
				ms[i]->ops->sideband(c, ms[i], rd, &r);
	}
	rd->fn(rd->ctx, &r);
}

int tally_collector_poll(struct tally_collector *c, int timeout_ms, tally_rec_fn fn, void *ctx)
{
	if (!wait_round(c, timeout_ms))
		return 0; /* records wait in the rings for the round */
	struct round rd = { .fn = fn, .ctx = ctx, .now = timeout_ms <= 0 };
	bool asked = rounds_start(&c->rounds, tally_now_mono());
	mechs_looked(c);
	/* a new period costs an IPI per event fd (the daemon's largest cost after the
	 * samples themselves): 5 times a second (once a round with samples
	 * counted in the kernel, whose rounds are 4 s apart when nothing asks
	 * sooner) is plenty to break any lock-step between the program and the
	 * sampling */
	if (c->o.randomize && periods_redraw_due(&c->per, tally_now_mono())) {
		evfds_redraw(c);
		c->per.last_redraw = tally_now_mono();
	}
	struct mech *ms[] = MECHS(c);
	/* what the mechanisms counted, read before the rings: every record their
	 * counts need (a fork, an exec, an mmap) is then in what the rings hold */
	for (size_t i = 0; i < ARRAY_SIZE(ms); i++) {
		int e = ms[i] && ms[i]->ops->drain ? ms[i]->ops->drain(c, ms[i], &rd) : 0;
		if (e && !rd.err)
			rd.err = e;
	}
	/* a record that asked for a round soon, found by a look or among those no
	 * look saw: the rounds are a gap apart for a second (a new program's
	 * first samples, a JIT's, are taken while it lives) */
	if (rings_read(&c->rings, c->rounds.looks && !asked ? asks_round : NULL, c))
		asked = true;
	rd.alone = !c->rings.nrefs;
	rd.full = rounds_read(&c->rounds, asked, rd.now);
	for (size_t i = 0; i < ARRAY_SIZE(ms); i++)
		if (ms[i] && ms[i]->ops->stage)
			ms[i]->ops->stage(c, ms[i], &rd);
	/* the counts need an order only among records of the rings */
	if (!rd.alone)
		rings_merge(&c->rings);
	for (size_t i = 0; i < c->rings.nrefs; i++)
		deliver(c, &rd, rings_rec(&c->rings, i));
	for (size_t i = ARRAY_SIZE(ms); i-- > 0;)
		if (ms[i] && ms[i]->ops->finish)
			ms[i]->ops->finish(c, ms[i], &rd);
	return rd.err ? rd.err : (int)c->rings.nrefs;
}
