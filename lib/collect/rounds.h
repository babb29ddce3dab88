/* When the collector reads its rings (a round) and when it only looks at
 * what waits there (docs/sampling.md, "Rounds"): a policy without a clock
 * or a descriptor of its own. Each function takes the time (CLOCK_MONOTONIC
 * seconds) and what the collector saw, changes nothing but the struct
 * rounds it is given, and says what comes next: poll.c waits, looks and
 * reads as it says, and tests/unit/test-rounds.c drives it with a clock of
 * its own.
 *
 * Through the ring (looks false) every wake of the wait is a round. With
 * samples counted in the kernel (looks true) the rings carry side-band
 * records only: the first one after a round wakes the wait, and the records
 * are then looked at, not read, ROUNDS_GAP after the last round or look. A
 * round comes at a look when one of them asks for one (a file new to
 * tally, a JIT's memory), a ring is a quarter full, ROUNDS_CALM has passed
 * since the last round, or a record asked less than ROUNDS_BUSY ago (then
 * rounds come every ROUNDS_GAP, records or not). Otherwise the records wait
 * and the next look is ROUNDS_GAP later; with the exec watch (which tells
 * of each program new to tally at its exec: a round ROUNDS_GAP after the
 * last at the soonest) a look that finds nothing asking doubles that, up to
 * ROUNDS_LOOK_MAX, but not past half the time a ring would take to fill.
 * With nothing in the rings, the caller's timeout makes the round
 * (TALLY_COUNTED_ROUND_MS). */
#ifndef TALLY_COLLECT_ROUNDS_H
#define TALLY_COLLECT_ROUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/collect.h"

/* a round asked for comes at least this long after the last round or look (s),
 * and so does a look */
#define ROUNDS_GAP 0.2
/* with the exec watch, looks that find nothing asking are spaced out, up to
 * this: a program new to tally is told of at its exec, and what is left to
 * the looks is a library new to tally mapped by a program it knows */
#define ROUNDS_LOOK_MAX 1.0
/* a round at least this long after the last while records wait (short
 * processes of programs already seen: their records wait in the rings, a
 * quarter of which holds a thousand or so) */
#define ROUNDS_CALM (TALLY_COUNTED_ROUND_MS / 1000.0)
/* after a round a record asked for: rounds every ROUNDS_GAP for this long
 * (a new program's first samples, a JIT's, are taken while it lives) */
#define ROUNDS_BUSY 1.0
/* a round takes every place counted in the kernel at least this often;
 * between, only those of the processes its records are of */
#define ROUNDS_FULL (TALLY_COUNTED_ROUND_MS / 1000.0)

struct rounds {
	bool looks; /* records wait in the rings between rounds (samples counted in the kernel) */
	bool watch; /* the exec watch tells of new programs: looks that find nothing back off */
	double last_round, last_look;
	double busy_until; /* rounds every ROUNDS_GAP until then */
	double look_gap;   /* from the last round or look to the next look */
	double last_full;  /* the last round that took every place */
	bool busy;         /* the wait began before busy_until */
	bool asked;        /* a look found a record that asks for a round (the next round knows) */
	/* the round the wait lets through is one a record, the watch or the
	 * second after asked for */
	bool round_asked;
	uint64_t rounds, nlooks, rounds_asked;
};

void rounds_init(struct rounds *r, bool looks, bool watch);

/* What the wait does next. */
enum rounds_act {
	ROUNDS_WAIT,  /* wait until deadline, on the rings too when rings */
	ROUNDS_LOOK,  /* look at the records waiting: rounds_look */
	ROUNDS_ROUND, /* a round, once deadline has passed (the caller's fd may end that wait) */
};
struct rounds_next {
	enum rounds_act act;
	double deadline;
	bool rings;
};

/* A poll begins at now (with records asked for, rounds come every
 * ROUNDS_GAP until ROUNDS_BUSY after). */
void rounds_begin(struct rounds *r, double now);
/* Before a wait: until, the caller's deadline (<= now: it wants a round
 * now); pending, records wait in the rings (a wake of theirs would come at
 * once). The deadline of the wait, and whether the rings are among what it
 * waits on; ROUNDS_ROUND when the caller wants one now. */
struct rounds_next rounds_plan(const struct rounds *r, double now, double until, bool pending);
/* The wait ended at now: caller, the caller's fd woke it; told, bursts,
 * what the exec watch told (starts of programs tally must look at, bursts
 * of starts); pending, records wait in the rings. (A ring's first record
 * alone is not an end: plan again with pending.) */
struct rounds_next rounds_woke(struct rounds *r, double now, bool caller, unsigned told,
			       unsigned bursts, bool pending);
/* A look at now: true when the round comes without looking at the records
 * (ROUNDS_CALM since the last, or busy); else *since, the seconds since the
 * last look or round, for rings_look. */
bool rounds_look(struct rounds *r, double now, double *since);
/* What the look found: prompt, a record asks or a ring is a quarter full
 * (asked: a record asks); fill_s, how soon a ring would be full; caller,
 * the caller's fd made the look. Whether the round comes now (else the
 * records wait, a look counted). */
bool rounds_looked(struct rounds *r, bool prompt, bool asked, double fill_s, bool caller);

/* A round begins at now (the rings are read next): returns whether a look
 * found a record asking for it. */
bool rounds_start(struct rounds *r, double now);
/* Its records read: asked, a record asked for it (a look's, or one no look
 * saw); now, the caller wanted it now. Whether it takes every place. */
bool rounds_read(struct rounds *r, bool asked, bool now);

/* The execs that make a burst (the exec watch tells of one): as many as
 * would fill half a ring of data_size bytes with their side-band records,
 * were they all on one CPU. */
uint64_t rounds_burst_execs(size_t data_size);

#endif
