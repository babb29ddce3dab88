/* Samples through the ring buffers (the default), a mechanism of
 * internal.h: every sample is a record of the rings, parsed here (its call
 * chain, user registers and stack copy) and weighed with the period in
 * effect at its time (period.c). Samples counted in the kernel that found
 * no room in the tables come this way too (mech_counted.c). */
#define _GNU_SOURCE
#include "tally/unwind.h"
#include "internal.h"

#include <linux/perf_event.h>
#include <stdlib.h>

uint64_t collect_regs_mask(const struct tally_collector *c)
{
	return c->o.stack_user ? tally_unwind_regs_mask() : tally_unwind_fp_regs_mask();
}

void mech_user_regs_stack(const uint64_t *p, const uint64_t *end, uint64_t mask,
			  struct tally_rec *r)
{
	/* PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER: the ABI and the
	 * registers, then the copy and the size the kernel actually filled
	 * (dyn_size) */
	if (p >= end)
		return;
	uint64_t abi = *p++;
	if (abi) {
		uint64_t n = (uint64_t)__builtin_popcountll(mask);
		if (n <= (uint64_t)(end - p)) {
			r->regs = p;
			r->nregs = n;
			r->regs_mask = mask;
			p += n;
		} else {
			p = end;
		}
	}
	if (p < end) {
		uint64_t size = *p++;
		if (size && size / 8 + 1 <= (uint64_t)(end - p)) {
			uint64_t dyn = p[size / 8];
			r->stack = (const uint8_t *)p;
			r->stack_len = dyn < size ? dyn : size;
		}
	}
}

void mech_ring_sample(struct tally_collector *c, struct mech *m, struct round *rd, struct evfd *f,
		      struct tally_rec *r, const uint64_t *p, const uint64_t *end)
{
	(void)m;
	if (c->o.callchain && p < end) {
		uint64_t nr = *p++;
		if (nr > (uint64_t)(end - p))
			nr = (uint64_t)(end - p);
		r->nr = nr;
		r->chain = p;
		p += nr;
	}
	if (c->o.stack_user || c->o.leaf_stack)
		mech_user_regs_stack(p, end, collect_regs_mask(c), r);
	/* an inherited event reports its parent's id: a sample of another task came
	 * through a copy made at that task's creation, whose period tally cannot redraw */
	bool reached = f->task < 0 || (uint32_t)f->task == r->tid;
	r->weight = periods_weigh(&c->per, &f->hist, r, reached, c->o.events[r->event]->time_based);
	rd->fn(rd->ctx, r);
}

static const struct mech_ops ring_ops = {
	.name = "ring",
	.kind = TALLY_SAMPLE_RING,
	.sample = mech_ring_sample,
};

struct mech *mech_ring_new(void)
{
	struct mech *m = xcalloc(1, sizeof(*m));
	m->ops = &ring_ops;
	return m;
}
