/* The hash index: 64-bit hashes to indices of the caller's own array. */
#define _GNU_SOURCE
#include "tally/util.h"
#include "lib/util/internal.h"

#include <stdlib.h>
#include <string.h>

uint32_t tally_hidx_get(const struct tally_hidx *h, uint64_t hash, const void *key,
			tally_hidx_eq eq, const void *ctx)
{
	if (!h->mask)
		return TALLY_HIDX_NONE;
	for (size_t i = hash & h->mask;; i = (i + 1) & h->mask) {
		const struct tally_hslot *s = &h->slots[i];
		if (!s->idx1)
			return TALLY_HIDX_NONE;
		if (s->hash == hash && eq(ctx, s->idx1 - 1, key))
			return s->idx1 - 1;
	}
}

static void hidx_insert(struct tally_hslot *slots, size_t mask, uint64_t hash, uint32_t idx1)
{
	size_t i = hash & mask;
	while (slots[i].idx1)
		i = (i + 1) & mask;
	slots[i].hash = hash;
	slots[i].idx1 = idx1;
}

void tally_hidx_put(struct tally_hidx *h, uint64_t hash, uint32_t idx)
{
	/* keep the load below 1/2: probes stay short on the record hot path */
	if ((h->count + 1) * 2 > h->mask + 1 || !h->mask) {
		size_t cap = h->mask ? (h->mask + 1) * 2 : 64;
		struct tally_hslot *ns = xcalloc(cap, sizeof(*ns));
		for (size_t i = 0; h->mask && i <= h->mask; i++)
			if (h->slots[i].idx1)
				hidx_insert(ns, cap - 1, h->slots[i].hash, h->slots[i].idx1);
		free(h->slots);
		h->slots = ns;
		h->mask = cap - 1;
	}
	hidx_insert(h->slots, h->mask, hash, idx + 1);
	h->count++;
}

void tally_hidx_release(struct tally_hidx *h)
{
	free(h->slots);
	h->slots = NULL;
	h->mask = h->count = 0;
}

uint64_t tally_hash_bytes(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *c = p;
	uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, c, 8);
		h = tally_hash_u64(h ^ w);
		c += 8;
		n -= 8;
	}
	uint64_t w = 0;
	memcpy(&w, c, n);
	return tally_hash_u64(h ^ w ^ ((uint64_t)n << 56));
}
