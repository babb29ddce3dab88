/* When the collector reads its rings (a round) and when it only looks at
 * what waits there (docs/sampling.md, "Rounds"): the state the wait keeps
 * from poll to poll (poll.c). */
#ifndef TALLY_COLLECT_ROUNDS_H
#define TALLY_COLLECT_ROUNDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/collect.h"

/* a round asked for comes at least this long after the last round or look (s), and so does a look */
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
	bool asked;        /* a look found a record that asks for a round (the next round knows) */
	bool round_asked;  /* the round the wait lets through is one a record, the watch or the second after asked for */
	uint64_t rounds, nlooks, rounds_asked;
};

#endif
