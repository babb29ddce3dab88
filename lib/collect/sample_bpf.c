/* Samples counted in the kernel (sample-bpf.h, docs/sampling.md): loads
 * sample.bpf.c (embedded as a libbpf skeleton), attaches it to the collector's
 * per-CPU sampling events and reads its tables of places once per round, in
 * its own memory (the program's global data is mapped there): what each place
 * counted since the last read. Built only with libbpf (meson option bpf). */
#define _GNU_SOURCE
#include "tally/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <linux/perf_event.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf-common.h"
#include "sample-bpf.h"
#include "sample.skel.h"

/* a table is turned away from when this full, and emptied at the first read
 * after GRACE_NS (no program that saw it as the active one still runs) */
#define TURN_AT (SB_PLACES / 4 * 3)
#define GRACE_NS 10000000ULL

struct seen {
	uint64_t count, weight; /* of a place, as read last */
};

struct tally_sample_bpf {
	struct sample_skel *skel;
	int prog_fd[SB_MAX_EVENTS];
	struct seen *seen;  /* [2][SB_PLACES] */
	int retire;         /* the table to empty, or -1 */
	bool emptying;      /* ... at the commit of this drain (its grace was over when read) */
	uint64_t turned_ns; /* when new places were turned away from it */
	uint64_t emptied;
	struct sb_key *keys; /* what the last drain read */
	struct sb_val *vals;
	uint32_t *slot;      /* per entry: its table * SB_PLACES + place */
	struct seen *read;   /* per entry: the place's count and weight as read */
	size_t n, alloc;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void tally_sample_bpf_free(struct tally_sample_bpf *b)
{
	if (!b)
		return;
	sample_skel__destroy(b->skel);
	free(b->seen);
	free(b->keys);
	free(b->vals);
	free(b->slot);
	free(b->read);
	free(b);
}

int tally_sample_bpf_open(struct tally_sample_bpf **out, const bool *time_based, int nevents)
{
	*out = NULL;
	if (nevents > SB_MAX_EVENTS)
		return tally_seterr(-EINVAL, "the sampling BPF program counts at most %d events",
				    SB_MAX_EVENTS);
	tally_bpf_log_begin();
	struct tally_sample_bpf *b = xcalloc(1, sizeof(*b));
	int ret;
	b->skel = sample_skel__open();
	if (!b->skel) {
		ret = tally_bpf_error(-errno, "open", "sampling");
		goto fail;
	}
	for (int i = 0; i < nevents; i++)
		b->skel->rodata->time_based[i] = time_based[i];
	ret = sample_skel__load(b->skel);
	if (ret) {
		ret = tally_bpf_error(ret, "load", "sampling");
		goto fail;
	}
	b->seen = xcalloc(2 * SB_PLACES, sizeof(*b->seen));
	b->retire = -1;
	struct bpf_program *progs[SB_MAX_EVENTS] = { b->skel->progs.count0, b->skel->progs.count1,
						     b->skel->progs.count2, b->skel->progs.count3 };
	for (int i = 0; i < SB_MAX_EVENTS; i++)
		b->prog_fd[i] = bpf_program__fd(progs[i]);
	*out = b;
	return 0;
fail:
	tally_sample_bpf_free(b);
	return ret;
}

int tally_sample_bpf_attach(struct tally_sample_bpf *b, int perf_fd, int ev)
{
	if (ev < 0 || ev >= SB_MAX_EVENTS)
		return tally_seterr(-EINVAL, "the sampling BPF program counts at most %d events",
				    SB_MAX_EVENTS);
	if (ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, b->prog_fd[ev]) < 0)
		return tally_seterr(-errno,
				    "cannot attach the sampling BPF program to a perf event: %s",
				    strerror(errno));
	return 0;
}

struct sb_slot *tally_sample_bpf_slot(struct tally_sample_bpf *b, int cpu, int ev)
{
	if (cpu < 0 || cpu >= SB_MAX_CPUS || ev < 0 || ev >= SB_MAX_EVENTS)
		return NULL;
	return &b->skel->bss->slots[cpu * SB_MAX_EVENTS + ev];
}

static void take(struct tally_sample_bpf *b, const struct sb_place *p, const struct seen *was,
		 struct seen now, uint32_t slot)
{
	if (b->n == b->alloc) {
		b->alloc = b->alloc ? 2 * b->alloc : 1024;
		b->keys = xrealloc(b->keys, b->alloc * sizeof(*b->keys));
		b->vals = xrealloc(b->vals, b->alloc * sizeof(*b->vals));
		b->slot = xrealloc(b->slot, b->alloc * sizeof(*b->slot));
		b->read = xrealloc(b->read, b->alloc * sizeof(*b->read));
	}
	b->keys[b->n] = p->key;
	b->vals[b->n] = (struct sb_val){ now.count - was->count, now.weight - was->weight,
					 __atomic_load_n(&p->last, __ATOMIC_RELAXED) };
	b->slot[b->n] = slot;
	b->read[b->n] = now;
	b->n++;
}

static uint32_t claimed(const struct tally_sample_bpf *b, int t)
{
	uint32_t n = __atomic_load_n(&b->skel->bss->claimed[t], __ATOMIC_ACQUIRE);
	return n < SB_PLACES ? n : SB_PLACES;
}

/* every place of table t whose count grew since what was last taken of it,
 * by how much */
static void scan(struct tally_sample_bpf *b, int t)
{
	uint32_t n = claimed(b, t);
	struct sb_place *pl = b->skel->bss->places[t];
	struct seen *seen = b->seen + (size_t)t * SB_PLACES;
	for (uint32_t i = 0; i < n; i++) {
		struct sb_place *p = &pl[i];
		if (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
			continue; /* being claimed (or lost the race for its key): next time */
		/* the program adds the weight first: this count's weight is in what follows */
		uint64_t c = __atomic_load_n(&p->count, __ATOMIC_ACQUIRE);
		if (c == seen[i].count)
			continue;
		uint64_t w = __atomic_load_n(&p->weight, __ATOMIC_RELAXED);
		take(b, p, &seen[i], (struct seen){ c, w }, (uint32_t)t * SB_PLACES + i);
	}
}

/* table t, no longer given new places and read a last time: empty it (the
 * index's entries into it are then stale, and the program knows them so) */
static void empty(struct tally_sample_bpf *b, int t)
{
	uint32_t n = claimed(b, t);
	memset(b->skel->bss->places[t], 0, (size_t)n * sizeof(struct sb_place));
	memset(b->seen + (size_t)t * SB_PLACES, 0, (size_t)n * sizeof(*b->seen));
	__atomic_store_n(&b->skel->bss->claimed[t], 0, __ATOMIC_RELEASE);
	b->emptied++;
}

uint64_t tally_sample_bpf_emptied(const struct tally_sample_bpf *b)
{
	return b->emptied;
}

int tally_sample_bpf_drain(struct tally_sample_bpf *b, const struct sb_key **keys,
			   const struct sb_val **vals, size_t *n)
{
	b->n = 0;
	scan(b, 0);
	scan(b, 1);
	b->emptying = b->retire >= 0 && now_ns() - b->turned_ns >= GRACE_NS;
	*keys = b->keys;
	*vals = b->vals;
	*n = b->n;
	return 0;
}

void tally_sample_bpf_commit(struct tally_sample_bpf *b, bool *taken)
{
	/* a table about to be emptied is taken whole: what is left in it is lost */
	bool emptying = b->emptying;
	b->emptying = false;
	for (size_t k = 0; k < b->n; k++) {
		if (taken && !taken[k] && !(emptying && (int)(b->slot[k] / SB_PLACES) == b->retire))
			continue;
		if (taken)
			taken[k] = true;
		b->seen[b->slot[k]] = b->read[k];
	}
	b->n = 0;
	if (emptying) {
		empty(b, b->retire);
		b->retire = -1;
	} else if (b->retire < 0) {
		int t = (int)(__atomic_load_n(&b->skel->bss->active, __ATOMIC_RELAXED) & 1);
		if (claimed(b, t) >= TURN_AT && !claimed(b, !t)) {
			__atomic_store_n(&b->skel->bss->active, (uint32_t)!t, __ATOMIC_RELEASE);
			b->retire = t;
			b->turned_ns = now_ns();
		}
	}
}
