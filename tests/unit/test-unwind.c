/* Unit tests for lib/unwind: the frame-pointer leaf check (tally_unwind_leaf)
 * on this test program's own code and CFI, and the repair it drives in the
 * aggregate (a frame put back after a leaf that set up no frame). */
#define _GNU_SOURCE
#include "unit.h"

#include <asm/perf_regs.h>
#include <linux/perf_event.h>

#include "tally/agg.h"
#include "tally/unwind.h"

/* A function whose entry has CFA = rsp + 8: the return address at [sp]. */
__attribute__((noinline, used)) uint64_t leaf_fn(uint64_t x);
__attribute__((noinline, used)) uint64_t leaf_fn(uint64_t x)
{
	return x * 2654435761u + 1;
}
__attribute__((noinline, used)) uint64_t caller_fn(uint64_t x);
__attribute__((noinline, used)) uint64_t caller_fn(uint64_t x)
{
	return leaf_fn(x) + leaf_fn(x + 1);
}

/* registers as the kernel packs them for tally_unwind_regs_mask() */
static size_t pack_regs(uint64_t *out, uint64_t ip, uint64_t sp, uint64_t bp)
{
	uint64_t full[PERF_REG_X86_64_MAX] = { 0 };
	full[PERF_REG_X86_IP] = ip;
	full[PERF_REG_X86_SP] = sp;
	full[PERF_REG_X86_BP] = bp;
	uint64_t mask = tally_unwind_regs_mask();
	size_t n = 0;
	for (int b = 0; b < PERF_REG_X86_64_MAX; b++)
		if (mask & (1ULL << b))
			out[n++] = full[b];
	return n;
}

struct self {
	struct tally_agg a;
	struct tally_proc *p;
};

static void self_open(struct self *s)
{
	tally_agg_init(&s->a, 1, false, false);
	assert_int_equal(tally_agg_load_procfs(&s->a, getpid()), 0);
	s->p = tally_agg_proc(&s->a, getpid(), false);
	assert_non_null(s->p);
}

static void test_unwind__leaf_entry_ra(void **state)
{
	(void)state;
	struct self s;
	self_open(&s);
	uint64_t regs[PERF_REG_X86_64_MAX], stack[16] = { 0 };
	uint64_t ip = (uint64_t)(uintptr_t)&leaf_fn;
	uint64_t want = (uint64_t)(uintptr_t)&caller_fn + 9; /* any address: it is read from [sp] */
	stack[0] = want;
	size_t n = pack_regs(regs, ip, 0x7ffc0000, 0x7ffd0000);
	uint64_t ra = 0;
	assert_int_equal(tally_unwind_leaf(&s.a, s.p, regs, n, (const uint8_t *)stack, sizeof(stack), ip, &ra), TALLY_LEAF_RA);
	assert_true(ra == want);
	/* the chain's first address is another one: not this sample's registers */
	assert_int_equal(tally_unwind_leaf(&s.a, s.p, regs, n, (const uint8_t *)stack, sizeof(stack), ip + 1, &ra),
			 TALLY_LEAF_UNKNOWN);
	/* the return address beyond the copy */
	assert_int_equal(tally_unwind_leaf(&s.a, s.p, regs, n, (const uint8_t *)stack, 4, ip, &ra), TALLY_LEAF_UNKNOWN);
	/* no module there */
	n = pack_regs(regs, 0x1000, 0x7ffc0000, 0);
	assert_int_equal(tally_unwind_leaf(&s.a, s.p, regs, n, (const uint8_t *)stack, sizeof(stack), 0x1000, &ra),
			 TALLY_LEAF_UNKNOWN);
	/* too few registers */
	assert_int_equal(tally_unwind_leaf(&s.a, s.p, regs, 3, (const uint8_t *)stack, sizeof(stack), 0x1000, &ra),
			 TALLY_LEAF_UNKNOWN);
	tally_agg_release(&s.a);
}

/* A frame-pointer sample in leaf_fn whose chain skips its caller: the
 * aggregate puts caller_fn's return address back as the second frame. */
static void test_unwind__agg_repairs_chain(void **state)
{
	(void)state;
	struct self s;
	self_open(&s);
	uint64_t ip = (uint64_t)(uintptr_t)&leaf_fn;
	uint64_t in_caller = (uint64_t)(uintptr_t)&caller_fn + 5;
	uint64_t outer = (uint64_t)(uintptr_t)&test_unwind__leaf_entry_ra + 7;
	uint64_t regs[PERF_REG_X86_64_MAX], stack[16] = { in_caller };
	size_t n = pack_regs(regs, ip, 0x7ffc0000, 0x7ffd0000);
	uint64_t chain[3] = { PERF_CONTEXT_USER, ip, outer };
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.type = PERF_RECORD_SAMPLE;
	r.misc = PERF_RECORD_MISC_USER;
	r.event = 0;
	r.pid = r.tid = (uint32_t)getpid();
	r.ip = ip;
	r.nr = 3;
	r.chain = chain;
	r.regs = regs;
	r.nregs = n;
	r.stack = (const uint8_t *)stack;
	r.stack_len = sizeof(stack);
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_leaf_checked, 1);
	assert_int_equal(s.a.fp_leaf_repaired, 1);
	assert_int_equal(s.a.nstacks, 1);
	assert_int_equal(s.a.stacks[0].len, 3);
	/* frames: leaf, the repaired caller, then the chain's own next address */
	const struct tally_map *m = tally_proc_find_map(s.p, in_caller);
	assert_non_null(m);
	const struct tally_frame *f1 = &s.a.frames[s.a.stack_frames[s.a.stacks[0].first + 1]];
	assert_int_equal(f1->image, m->image);
	assert_true(f1->offset == in_caller - m->start + m->pgoff);

	/* the chain already has the caller: nothing inserted */
	chain[2] = in_caller;
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_leaf_checked, 2);
	assert_int_equal(s.a.fp_leaf_repaired, 1);
	/* the copy too short to tell: counted as unchecked, the chain kept */
	r.stack_len = 0;
	chain[2] = outer;
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_leaf_unchecked, 1);
	assert_int_equal(s.a.fp_leaf_repaired, 1);
	tally_agg_release(&s.a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unwind__leaf_entry_ra),
		cmocka_unit_test(test_unwind__agg_repairs_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
