/* When to look and when to read the rings (rounds.h, docs/sampling.md
 * "Rounds"): pure functions of the time and of what the collector saw. */
#include "rounds.h"

#include <string.h>

void rounds_init(struct rounds *r, bool looks, bool watch)
{
	memset(r, 0, sizeof(*r));
	r->looks = looks;
	r->watch = watch;
	r->look_gap = ROUNDS_GAP;
}

static double last_seen(const struct rounds *r)
{
	return r->last_look > r->last_round ? r->last_look : r->last_round;
}

void rounds_begin(struct rounds *r, double now)
{
	r->busy = now < r->busy_until;
	if (r->busy)
		r->look_gap = ROUNDS_GAP;
}

struct rounds_next rounds_plan(const struct rounds *r, double now, double until, bool pending)
{
	if (until <= now)
		return (struct rounds_next){ ROUNDS_ROUND, now, false };
	struct rounds_next n = { ROUNDS_WAIT, until, true };
	if (!r->looks)
		return n;
	/* waiting records: look at them a gap after the last look or round (their
	 * rings would wake the wait at once); busy: a round then, records or not */
	double look_at = last_seen(r) + r->look_gap;
	if ((pending || r->busy) && look_at < n.deadline)
		n.deadline = look_at;
	n.rings = !pending;
	return n;
}

struct rounds_next rounds_woke(struct rounds *r, double now, bool caller, unsigned told,
			       unsigned bursts, bool pending)
{
	if (!r->looks)
		return (struct rounds_next){ ROUNDS_ROUND, now, false };
	if (told || bursts) {
		/* a program tally must look at while it lives: its records ask for
		 * a round, and the looks are a gap apart again; a burst of known
		 * programs: one round, which empties the rings */
		if (told) {
			r->look_gap = ROUNDS_GAP;
			r->asked = true; /* the round after: rounds a gap apart for a second */
		}
		r->round_asked = true;
		return (struct rounds_next){ ROUNDS_ROUND, last_seen(r) + ROUNDS_GAP, false };
	}
	if (!caller && !pending) {
		/* the wait's own end, nothing waiting: the tables' round (of the
		 * second after a record that asked, or the caller's timeout) */
		r->round_asked = r->busy;
		return (struct rounds_next){ ROUNDS_ROUND, now, false };
	}
	return (struct rounds_next){ ROUNDS_LOOK, now, false };
}

bool rounds_look(struct rounds *r, double now, double *since)
{
	*since = now - last_seen(r);
	r->last_look = now;
	if (now - r->last_round >= ROUNDS_CALM || now < r->busy_until) {
		/* a record that asked: the looks are a gap apart again (not after
		 * a round that only the time made) */
		if (now < r->busy_until || r->asked) {
			r->look_gap = ROUNDS_GAP;
			r->round_asked = true;
		}
		return true;
	}
	return false;
}

bool rounds_looked(struct rounds *r, bool prompt, bool asked, double fill_s, bool caller)
{
	if (asked)
		r->asked = true;
	if (prompt) {
		if (r->asked) {
			r->look_gap = ROUNDS_GAP;
			r->round_asked = true;
		}
		return true;
	}
	r->nlooks++;
	/* nothing asked: with the exec watch, the next look may wait longer, but
	 * not past half the time a ring would take to fill (at a look, a quarter
	 * full makes a round); the caller's fd made this one, not the time */
	if (r->watch && !caller) {
		double g = r->look_gap * 2 < ROUNDS_LOOK_MAX ? r->look_gap * 2 : ROUNDS_LOOK_MAX;
		if (g > fill_s / 2)
			g = fill_s / 2 > ROUNDS_GAP ? fill_s / 2 : ROUNDS_GAP;
		r->look_gap = g;
	}
	return false;
}

bool rounds_start(struct rounds *r, double now)
{
	r->last_round = now;
	r->rounds++;
	r->rounds_asked += r->round_asked;
	r->round_asked = false;
	bool asked = r->asked;
	r->asked = false;
	return asked;
}

bool rounds_read(struct rounds *r, bool asked, bool now)
{
	if (!r->looks)
		return true;
	if (asked)
		r->busy_until = r->last_round + ROUNDS_BUSY;
	bool full = now || r->last_round - r->last_full >= ROUNDS_FULL;
	if (full)
		r->last_full = r->last_round;
	return full;
}

uint64_t rounds_burst_execs(size_t data_size)
{
	/* an exec's side-band records: its fork, comm, exit and a map of each
	 * file of code, 600 bytes for /bin/true (7 records), more with more
	 * libraries; counted as 2 KiB, a burst is the execs that would fill half
	 * a ring (128 for 512 KiB) */
	uint64_t n = data_size / 2 / 2048;
	return n > 8 ? n : 8;
}
