/* The perf ring buffers of a collector (ring.c): one per CPU, shared by
 * every event of that CPU. A round copies what each holds into one staging
 * buffer, indexes the records by time and merges the rings' runs into one
 * time order; between rounds, a look walks the records waiting there
 * without taking them (docs/sampling.md, "Rounds"). Needs no collector: the
 * unit tests drive it with rings of their own making. */
#ifndef TALLY_COLLECT_RING_H
#define TALLY_COLLECT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct perf_event_header;

struct ring {
	int fd;     /* the fd whose buffer this is */
	void *base; /* metadata page, then data */
	size_t size;
	int cpu;
	uint64_t peeked; /* records before this position were looked at, not read */
};

/* a staged record: its time, and where it is in the staging buffer */
struct recref {
	uint64_t time;
	size_t off;
};

struct rings {
	struct ring *v;
	size_t n, alloc;
	size_t pagesz, data_size; /* data_size: the bytes of data of each ring (pages) */
	size_t trailer;           /* bytes of sample_id at the end of non-sample records */
	/* a round's records, copied out of the rings (and staged by mechanisms) */
	char *stage;
	size_t stage_len, stage_alloc;
	struct recref *refs, *tmp;
	size_t nrefs, arefs, atmp;
	size_t *runs; /* start of each run of refs: each run is in time order */
	size_t nruns, aruns;
	char *peek_buf; /* a record that wraps around the end of its ring, copied whole */
};

/* Whether a side-band record asks for a round soon (the collector's prompt). */
typedef bool (*rings_ask_fn)(void *ctx, const struct perf_event_header *h);

/* Rings of data_size bytes of data (a power of two pages of pagesz) whose
 * non-sample records end in a sample_id trailer of trailer bytes. */
void rings_init(struct rings *rs, size_t pagesz, size_t data_size, size_t trailer);
/* Unmaps every ring and frees the buffers. */
void rings_release(struct rings *rs);
/* Maps the ring buffer of fd (on cpu): 0, or -errno with tally_seterr and the fix. */
int rings_map(struct rings *rs, int fd, int cpu);
/* Adds a ring mapped at base (pagesz + data_size bytes, unmapped at release). */
void rings_add(struct rings *rs, int fd, int cpu, void *base);
/* Whether some ring holds records not yet read. */
bool rings_pending(const struct rings *rs);

/* A round: copies everything new in each ring into the staging buffer,
 * frees the ring space, and indexes the records (refs) with one run per
 * ring. ask (may be NULL): whether the records no look saw include one that
 * asks for a round; the return says so. */
bool rings_read(struct rings *rs, rings_ask_fn ask, void *ctx);
/* Records a mechanism stages among the rings' (n records of size bytes
 * each, at most): room first, then each with its time. */
void rings_reserve(struct rings *rs, size_t n, size_t size);
void rings_put(struct rings *rs, const void *rec, size_t size, uint64_t time);
/* The records put since refs index first are one more run (sort: in time
 * order first; a run that need not be merged is left as put). */
void rings_end_run(struct rings *rs, size_t first, bool sort);
/* Merges the runs into one time order (records of different CPUs
 * interleave: a fork on one must come before the child's first sample on
 * another). */
void rings_merge(struct rings *rs);
/* The i-th staged record. */
static inline const struct perf_event_header *rings_rec(const struct rings *rs, size_t i)
{
	return (const void *)(rs->stage + rs->refs[i].off);
}

/* A look between rounds: whether the records waiting in the rings ask for
 * a round now (*asked: one of them does, through ask) or a ring is a
 * quarter full. Each record is looked at once; the round asks only those
 * no look saw. since: seconds since the last look or round; *fill_s: how
 * soon a ring would be full at the pace it filled since (HUGE_VAL: none
 * filled). */
bool rings_look(struct rings *rs, double since, rings_ask_fn ask, void *ctx, bool *asked,
		double *fill_s);

#endif
