/* A poll of the collector (tally_collector_poll): wait for the round
 * (looking at the waiting records on the way, when samples are counted in
 * the kernel), drain each mechanism, read and merge the rings with what the
 * mechanisms staged, and deliver every record in time order to the caller. */
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

/* The milliseconds from now until gap seconds after the last round or look (0: now). */
static int gap_ms(const struct rounds *rs, double gap)
{
	double last = rs->last_look > rs->last_round ? rs->last_look : rs->last_round;
	double left = gap - (tally_now_mono() - last);
	return left > 0 ? (int)(left * 1000) + 1 : 0;
}

/* Counted samples: waits for the next round (docs/sampling.md, "Rounds") and
 * says whether it is now. The rings wake the wait at the first side-band
 * record; the records are looked at 200 ms after the last round or look, and
 * a round comes then if one of them asks for it (a file not seen before, a
 * JIT's memory: the caller's prompt), a ring is a quarter full, a round's time
 * (4 s) has passed since the last round, or one did less than a second ago.
 * Otherwise they wait in the rings, and the next look is 200 ms later (the
 * rings, not read, would wake the wait at once: only the caller's fd and the
 * exec watch's are waited on then). With the exec watch, which tells of each
 * program new to tally at its exec (a round then, 200 ms after the last at the
 * soonest), a look that finds nothing asking doubles the time to the next, up
 * to a second. Ready at once when the caller asks (timeout 0), or when its
 * timeout ends a wait with nothing in the rings; its fd makes a look. */
static bool counted_wait(struct tally_collector *c, size_t n, int wake_at, int mech_at, int timeout_ms)
{
	struct rounds *rs = &c->rounds;
	if (timeout_ms <= 0)
		return true;
	bool pending = rings_pending(&c->rings);
	bool busy = tally_now_mono() < rs->busy_until;
	if (busy)
		rs->look_gap = ROUNDS_GAP;
	if ((pending || busy) && gap_ms(rs, rs->look_gap) < timeout_ms)
		timeout_ms = gap_ms(rs, rs->look_gap);
	/* the fds besides the rings */
	struct pollfd *pfd = c->pfd, *w = pfd + c->rings.n;
	int nw = (int)(n - c->rings.n);
	bool caller = false, told = false;
	int r = 0;
	if (pending) {
		r = poll(w, (nfds_t)nw, timeout_ms);
	} else {
		r = poll(pfd, n, timeout_ms);
		bool ring_in = false;
		for (size_t i = 0; i < c->rings.n && r > 0; i++)
			ring_in = ring_in || (pfd[i].revents & POLLIN);
		bool other = false;
		for (int i = 0; i < nw && r > 0; i++)
			other = other || (w[i].revents & POLLIN);
		if (ring_in && !other) {
			int g = gap_ms(rs, rs->look_gap);
			if (g > timeout_ms)
				g = timeout_ms;
			r = g > 0 ? poll(w, (nfds_t)nw, g) : 0;
		} else if (r > 0 && !other) {
			r = poll(w, (nfds_t)nw, timeout_ms); /* a ring whose tasks all exited (POLLHUP): not a spin */
		}
	}
	caller = r > 0 && wake_at >= 0 && (pfd[wake_at].revents & POLLIN);
	told = r > 0 && mech_at >= 0 && (pfd[mech_at].revents & POLLIN);
	unsigned n_told = 0, bursts = 0;
	if (told)
		n_told = c->samples->ops->woke(c->samples, &bursts);
	if (n_told || bursts) {
		/* a program tally must look at while it lives: its records ask for
		 * a round, and the looks are 200 ms apart again; a burst of known
		 * programs: one round, which empties the rings */
		if (n_told) {
			rs->look_gap = ROUNDS_GAP;
			rs->asked = true; /* the round after: rounds 200 ms apart for a second */
		}
		rs->round_asked = true;
		int g = gap_ms(rs, ROUNDS_GAP);
		if (g > 0)
			poll(wake_at >= 0 ? &pfd[wake_at] : NULL, wake_at >= 0 ? 1 : 0, g); /* the caller may still end the wait */
		return true;
	}
	if (!caller && !rings_pending(&c->rings)) {
		/* the wait's own end, nothing waiting: the tables' round (of the
		 * second after a record that asked, or a round's time since the last) */
		rs->round_asked = busy;
		return true;
	}
	/* the caller's fd: what it asks for that needs the counts reads them
	 * itself (a timeout of 0), the rest does not need a round */
	double now = tally_now_mono();
	double since = now - (rs->last_look > rs->last_round ? rs->last_look : rs->last_round);
	double fill_s = HUGE_VAL;
	rs->last_look = now;
	mechs_looked(c);
	if (now - rs->last_round >= ROUNDS_CALM || now < rs->busy_until ||
	    rings_look(&c->rings, since, asks_round, c, &rs->asked, &fill_s)) {
		/* a record that asked: the looks are 200 ms apart again (not after
		 * a round that only the time or a ring's fill made) */
		if (now < rs->busy_until || rs->asked) {
			rs->look_gap = ROUNDS_GAP;
			rs->round_asked = true;
		}
		return true;
	}
	rs->nlooks++;
	/* nothing asked: with the exec watch, the next look may wait longer, but
	 * not past half the time a ring would take to fill (at a look, a quarter
	 * full makes a round) */
	if (rs->watch && !caller) {
		double g = rs->look_gap * 2 < ROUNDS_LOOK_MAX ? rs->look_gap * 2 : ROUNDS_LOOK_MAX;
		if (g > fill_s / 2)
			g = fill_s / 2 > ROUNDS_GAP ? fill_s / 2 : ROUNDS_GAP;
		rs->look_gap = g;
	}
	return false;
}

/* Through the ring: waits up to timeout_ms for data or the caller's fd. */
static void ring_wait(struct tally_collector *c, size_t n, int timeout_ms)
{
	if (timeout_ms <= 0)
		return;
	struct pollfd *pfd = c->pfd;
	int r = poll(pfd, n, timeout_ms);
	/* a ring whose tasks all exited reports POLLHUP at once: wait out the interval
	 * instead of spinning, unless the caller's fd woke us */
	bool hup_only = r > 0;
	for (size_t i = 0; i < n && r > 0; i++)
		if (pfd[i].revents & POLLIN)
			hup_only = false;
	if (hup_only) {
		struct pollfd w = { .fd = c->o.wake_fd, .events = POLLIN };
		poll(&w, c->o.wake_fd >= 0 ? 1 : 0, timeout_ms);
	}
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
		const uint64_t *t = (const uint64_t *)((const char *)h + h->size - c->rings.trailer);
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
	struct rounds *rs = &c->rounds;
	int wake_at, mech_at;
	size_t n = wait_fds(c, &wake_at, &mech_at);
	if (rs->looks) {
		if (!counted_wait(c, n, wake_at, mech_at, timeout_ms))
			return 0; /* records wait in the rings for the round */
	} else {
		ring_wait(c, n, timeout_ms);
	}
	struct round rd = { .fn = fn, .ctx = ctx, .now = timeout_ms <= 0 };
	rs->last_round = tally_now_mono();
	mechs_looked(c);
	rs->rounds++;
	rs->rounds_asked += rs->round_asked;
	rs->round_asked = false;
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
	 * look saw: the rounds are 200 ms apart for a second (a new program's
	 * first samples, a JIT's, are taken while it lives) */
	bool asked = rs->asked;
	rs->asked = false;
	if (rings_read(&c->rings, rs->looks && !asked ? asks_round : NULL, c))
		asked = true;
	rd.alone = !c->rings.nrefs;
	if (rs->looks && asked)
		rs->busy_until = rs->last_round + ROUNDS_BUSY;
	/* a round of every 200 ms takes only some places (mech_counted.c); a
	 * round asked for now (a flush, a peek, the end) or one 4 s or more
	 * after the last full one takes them all */
	rd.full = rd.now || rs->last_round - rs->last_full >= ROUNDS_FULL;
	if (rs->looks && rd.full)
		rs->last_full = rs->last_round;
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
