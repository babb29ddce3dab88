/* The perf ring buffers (ring.h): mapping, reading a round's records into
 * one staging buffer, looking at those that wait, and the time-ordered
 * merge of the rings' runs. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "ring.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void rings_init(struct rings *rs, size_t pagesz, size_t data_size, size_t trailer)
{
	memset(rs, 0, sizeof(*rs));
	rs->pagesz = pagesz;
	rs->data_size = data_size;
	rs->trailer = trailer;
}

void rings_release(struct rings *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		munmap(rs->v[i].base, rs->v[i].size);
	free(rs->v);
	free(rs->stage);
	free(rs->refs);
	free(rs->tmp);
	free(rs->runs);
	free(rs->peek_buf);
	memset(rs, 0, sizeof(*rs));
}

void rings_add(struct rings *rs, int fd, int cpu, void *base)
{
	GROW(rs->v, rs->alloc, rs->n + 1);
	rs->v[rs->n++] = (struct ring){
		.fd = fd, .base = base, .size = rs->pagesz + rs->data_size, .cpu = cpu
	};
}

int rings_map(struct rings *rs, int fd, int cpu)
{
	size_t len = rs->pagesz + rs->data_size;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		if (e == EPERM || e == ENOMEM)
			return tally_seterr(
				-e,
				"cannot map a %zu KiB ring buffer: %s (raise kernel.perf_event_mlock_kb or 'ulimit -l')",
				len / 1024, strerror(e));
		return tally_seterr(-e, "cannot map a ring buffer: %s", strerror(e));
	}
	rings_add(rs, fd, cpu, m);
	return 0;
}

bool rings_pending(const struct rings *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct perf_event_mmap_page *meta = rs->v[i].base;
		if (__atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) != meta->data_tail)
			return true;
	}
	return false;
}

/* Copies len bytes of ring r from position pos to dst (across the end of
 * the ring's data, back to its start). */
static void ring_copy(const struct rings *rs, const struct ring *r, uint64_t pos, size_t len,
		      char *dst)
{
	const char *data = (const char *)r->base + rs->pagesz;
	size_t start = (size_t)(pos % rs->data_size);
	size_t first = len < rs->data_size - start ? len : rs->data_size - start;
	memcpy(dst, data + start, first);
	if (len > first)
		memcpy(dst + first, data, len - first);
}

/* Copies everything new in a ring into the staging buffer and frees the ring space. */
static void read_ring(struct rings *rs, struct ring *r)
{
	struct perf_event_mmap_page *meta = r->base;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	if (head == tail)
		return;
	size_t len = (size_t)(head - tail);
	GROW(rs->stage, rs->stage_alloc, rs->stage_len + len);
	ring_copy(rs, r, tail, len, rs->stage + rs->stage_len);
	rs->stage_len += len;
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

/* Whether a record of the staged bytes [from, to) asks for a round. */
static bool stage_asks(const struct rings *rs, size_t from, size_t to, rings_ask_fn ask, void *ctx)
{
	while (from + sizeof(struct perf_event_header) <= to) {
		const struct perf_event_header *h = (const void *)(rs->stage + from);
		if (h->size < sizeof(*h) || from + h->size > to)
			return false; /* the round stops there too */
		if (h->type != PERF_RECORD_SAMPLE && ask(ctx, h))
			return true;
		from += h->size;
	}
	return false;
}

bool rings_read(struct rings *rs, rings_ask_fn ask, void *ctx)
{
	bool asked = false;
	rs->stage_len = 0;
	rs->nruns = 0;
	for (size_t i = 0; i < rs->n; i++) {
		size_t before = rs->stage_len;
		struct ring *r = &rs->v[i];
		uint64_t tail = ((const struct perf_event_mmap_page *)r->base)->data_tail;
		read_ring(rs, r);
		if (ask && !asked) {
			size_t seen = r->peeked > tail ? (size_t)(r->peeked - tail) : 0;
			if (before + seen < rs->stage_len)
				asked = stage_asks(rs, before + seen, rs->stage_len, ask, ctx);
		}
		if (rs->stage_len > before) {
			GROW(rs->runs, rs->aruns, rs->nruns + 1);
			rs->runs[rs->nruns++] = before; /* a byte offset for now */
		}
	}
	rs->nrefs = 0;
	size_t run = 0;
	for (size_t off = 0; off + sizeof(struct perf_event_header) <= rs->stage_len;) {
		if (run < rs->nruns && rs->runs[run] == off)
			rs->runs[run++] = rs->nrefs; /* now an index into refs */
		const struct perf_event_header *h = (const void *)(rs->stage + off);
		if (h->size < sizeof(*h) || off + h->size > rs->stage_len)
			/* cannot happen with a sane kernel; never read past what we copied */
			break;
		uint64_t t = 0;
		if (h->type == PERF_RECORD_SAMPLE && h->size >= sizeof(*h) + 32)
			t = ((const uint64_t *)(h + 1))[3];
		else if (h->size >= sizeof(*h) + rs->trailer)
			t = *(const uint64_t *)((const char *)h + h->size - rs->trailer + 8);
		GROW(rs->refs, rs->arefs, rs->nrefs + 1);
		rs->refs[rs->nrefs++] = (struct recref){ t, off };
		off += h->size;
	}
	return asked;
}

void rings_reserve(struct rings *rs, size_t n, size_t size)
{
	GROW(rs->stage, rs->stage_alloc, rs->stage_len + n * size);
	GROW(rs->refs, rs->arefs, rs->nrefs + n);
}

void rings_put(struct rings *rs, const void *rec, size_t size, uint64_t time)
{
	GROW(rs->stage, rs->stage_alloc, rs->stage_len + size);
	GROW(rs->refs, rs->arefs, rs->nrefs + 1);
	memcpy(rs->stage + rs->stage_len, rec, size);
	rs->refs[rs->nrefs++] = (struct recref){ time, rs->stage_len };
	rs->stage_len += size;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct recref *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

void rings_end_run(struct rings *rs, size_t first, bool sort)
{
	if (!sort)
		return;
	tally_qsort(rs->refs + first, rs->nrefs - first, sizeof(*rs->refs), cmp_ref);
	if (rs->nrefs > first) {
		GROW(rs->runs, rs->aruns, rs->nruns + 1);
		rs->runs[rs->nruns++] = first;
	}
}

/* Merges the runs of refs (each already in time order) pairwise: O(n log rings). */
static void merge_runs(struct rings *rs)
{
	size_t k = rs->nruns;
	if (k < 2 || rs->nrefs < 2)
		return;
	GROW(rs->tmp, rs->atmp, rs->nrefs);
	GROW(rs->runs, rs->aruns, k + 1);
	rs->runs[k] = rs->nrefs;
	while (k > 1) {
		size_t nk = 0;
		for (size_t r = 0; r < k; r += 2) {
			size_t a = rs->runs[r], mid = rs->runs[r + 1 <= k ? r + 1 : k],
			       end = r + 2 <= k ? rs->runs[r + 2] : mid;
			size_t i = a, j = mid, o = a;
			while (i < mid && j < end)
				rs->tmp[o++] = cmp_ref(&rs->refs[j], &rs->refs[i]) < 0
						       ? rs->refs[j++]
						       : rs->refs[i++];
			while (i < mid)
				rs->tmp[o++] = rs->refs[i++];
			while (j < end)
				rs->tmp[o++] = rs->refs[j++];
			rs->runs[nk++] = a;
		}
		rs->runs[nk] = rs->nrefs;
		struct recref *t = rs->refs;
		rs->refs = rs->tmp;
		rs->tmp = t;
		size_t ta = rs->arefs;
		rs->arefs = rs->atmp;
		rs->atmp = ta;
		k = nk;
	}
}

void rings_merge(struct rings *rs)
{
	merge_runs(rs);
	/* within one ring, side-band records can carry a time slightly before the sample
	 * written ahead of them: nearly sorted, so insertion finishes the job cheaply */
	for (size_t i = 1; i < rs->nrefs; i++) {
		struct recref x = rs->refs[i];
		size_t j = i;
		while (j > 0 && cmp_ref(&rs->refs[j - 1], &x) > 0) {
			rs->refs[j] = rs->refs[j - 1];
			j--;
		}
		rs->refs[j] = x;
	}
}

/* The record at position pos of ring r (len bytes of it, at most size):
 * where it lies whole in the ring, or copied into rs->peek_buf when it wraps. */
static const void *ring_at(struct rings *rs, const struct ring *r, uint64_t pos, size_t len)
{
	size_t start = (size_t)(pos % rs->data_size);
	if (start + len <= rs->data_size)
		return (const char *)r->base + rs->pagesz + start;
	if (!rs->peek_buf)
		rs->peek_buf = xmalloc(UINT16_MAX + 1);
	ring_copy(rs, r, pos, len, rs->peek_buf);
	return rs->peek_buf;
}

bool rings_look(struct rings *rs, double since, rings_ask_fn ask, void *ctx, bool *asked,
		double *fill_s)
{
	*fill_s = HUGE_VAL;
	for (size_t i = 0; i < rs->n; i++) {
		struct ring *r = &rs->v[i];
		const struct perf_event_mmap_page *meta = r->base;
		uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE),
			 tail = meta->data_tail;
		if (head - tail >= rs->data_size / 4)
			return true;
		uint64_t pos = r->peeked > tail ? r->peeked : tail;
		if (head > pos && since > 0) {
			double t = (double)(rs->data_size - (head - tail)) * since /
				   (double)(head - pos);
			if (t < *fill_s)
				*fill_s = t;
		}
		while (head - pos >= sizeof(struct perf_event_header)) {
			struct perf_event_header h;
			memcpy(&h, ring_at(rs, r, pos, sizeof(h)), sizeof(h));
			if (h.size < sizeof(h) || h.size > head - pos)
				return true; /* cannot be: the round reads it as it can */
			/* no copy for a sample */
			if (h.type != PERF_RECORD_SAMPLE && ask(ctx, ring_at(rs, r, pos, h.size))) {
				*asked = true;
				return true;
			}
			pos += h.size;
		}
		r->peeked = pos;
	}
	return false;
}
