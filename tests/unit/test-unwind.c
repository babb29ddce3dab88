/* Unit tests for lib/unwind's frame-pointer repair: the walk over a stack copy
 * (tally_unwind_fp_repair) with rules made up for each case, the rules this
 * test program's own CFI gives (tally_unwind_fp_rule), and the repair the
 * aggregate makes of a real stack taken in a chain of two functions without
 * frame pointers below one with its frame. */
#define _GNU_SOURCE
#include "unit.h"

#include <asm/perf_regs.h>
#include <dirent.h>
#include <gelf.h>
#include <linux/perf_event.h>
#include <sys/mman.h>

#include "lib/unwind/internal.h"
#include "tally/agg.h"
#include "tally/jitdump.h"
#include "tally/unwind.h"
#include "unwind-frames.h"

/* ---- the walk, with made-up rules ---- */

/* code addresses of the made-up program, each function 0x1000 long */
enum {
	PC_LEAF = 0x1000,
	PC_MID = 0x2000,
	PC_TOP = 0x3000,
	PC_OUT = 0x4000,
	PC_JIT = 0x5000,
	PC_END = 0x6000,
	PC_MAIN = 0x7000,
	PC_CODE_END = 0x8000 };

struct fake {
	uint64_t pc[8];
	struct tally_fp_rule r[8];
	size_t n;
};

static void fake_add(struct fake *f, uint64_t pc, uint8_t cfa, int32_t cfa_off, uint8_t bp,
		     int32_t bp_off)
{
	f->pc[f->n] = pc;
	f->r[f->n] = (struct tally_fp_rule){ cfa, bp, cfa_off, bp_off };
	f->n++;
}

/* code is [0x1000, 0x8000): a function without a rule there has no CFI */
static bool fake_rule(void *ctx, uint64_t pc, bool ra, size_t chain_at, struct tally_fp_rule *out)
{
	(void)chain_at;
	struct fake *f = ctx;
	memset(out, 0, sizeof(*out));
	uint64_t at = ra ? pc - 1 : pc; /* a return address: the call before it */
	if (at < PC_LEAF || at >= PC_CODE_END)
		return false;
	for (size_t i = 0; i < f->n; i++)
		if (at >= f->pc[i] && at < f->pc[i] + 0x1000)
			*out = f->r[i];
	return true;
}

#define SP 0x7ffc0000ULL

/* out's addresses after the ip, and where each came from (-1: the walk) */
static void expect(const struct tally_fp_repair *rp, size_t n, const uint64_t *pcs,
		   const int32_t *from)
{
	assert_int_equal(rp->n, n);
	for (size_t i = 0; i < n; i++) {
		assert_true(rp->pcs[i] == pcs[i]);
		assert_int_equal(rp->from[i], from[i]);
	}
}

/* clock_nanosleep (no frame, 0x28 of locals) called by nanosleep (no frame,
 * 8 bytes) called by wait_long (its frame at bp, on the chain): the chain
 * from bp has wait_long's caller, and the walk puts the two return
 * addresses back before it. */
static void test_unwind__chain_of_two(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x30, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_MID, TALLY_FP_CFA_SP, 0x10, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_TOP, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	fake_add(&f, PC_MAIN, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[32] = { 0 };
	stack[0x28 / 8] = PC_MID + 5;          /* clock_nanosleep's return address */
	stack[(0x30 + 0x8) / 8] = PC_TOP + 7;  /* nanosleep's */
	uint64_t bp = SP + 0x60;
	stack[0x60 / 8] = SP + 0x80;           /* wait_long's frame: main's rbp ... */
	stack[0x68 / 8] = PC_MAIN + 3;         /* ... and its return address */
	uint64_t chain[] = { PC_LEAF + 1, PC_MAIN + 3, PC_MAIN + 9 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, bp, (const uint8_t *)stack, sizeof(stack), chain, 3,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	assert_int_equal(rp.walked, 2);
	expect(&rp, 4, (uint64_t[]){ PC_MID + 5, PC_TOP + 7, PC_MAIN + 3, PC_MAIN + 9 },
	       (int32_t[]){ -1, -1, 1, 2 });

	/* the copy ends before nanosleep's return address: one frame found, the
	 * chain still follows (rbp untouched), the stop said */
	tally_unwind_fp_repair(PC_LEAF + 1, SP, bp, (const uint8_t *)stack, 0x38, chain, 3,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_SHORT);
	expect(&rp, 3, (uint64_t[]){ PC_MID + 5, PC_MAIN + 3, PC_MAIN + 9 },
	       (int32_t[]){ -1, 1, 2 });

	/* registers that are not the chain's sample: the chain as it is */
	tally_unwind_fp_repair(PC_LEAF + 2, SP, bp, (const uint8_t *)stack, sizeof(stack), chain, 3,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.walked, 0);
	assert_int_not_equal(rp.stop, TALLY_FP_JOINED);
	expect(&rp, 2, (uint64_t[]){ PC_MAIN + 3, PC_MAIN + 9 }, (int32_t[]){ 1, 2 });
}

/* A sampled function with its frame: nothing to put back. Without CFI (JIT
 * code): the chain kept, the stop said. */
static void test_unwind__framed_leaf(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_TOP, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	fake_add(&f, PC_MAIN, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[4] = { 0 };
	uint64_t chain[] = { PC_TOP + 1, PC_MAIN + 3 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_TOP + 1, SP, SP + 0x40, (const uint8_t *)stack, sizeof(stack),
			       chain, 2, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	assert_int_equal(rp.walked, 0);
	expect(&rp, 1, (uint64_t[]){ PC_MAIN + 3 }, (int32_t[]){ 1 });
	uint64_t jchain[] = { PC_JIT + 1, PC_MAIN + 3 };
	tally_unwind_fp_repair(PC_JIT + 1, SP, SP + 0x40, (const uint8_t *)stack, sizeof(stack),
			       jchain, 2, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_NOCFI);
	expect(&rp, 1, (uint64_t[]){ PC_MAIN + 3 }, (int32_t[]){ 1 });
}

/* A function without a frame pointer that saved rbp and uses it as a general
 * register: the sampled rbp (where the chain began) is junk. The rbp it saved
 * leads to a framed caller whose return address the chain has after its junk
 * entry: the chain goes on from there. */
static void test_unwind__rbp_reused(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x18, TALLY_FP_BP_AT, -0x10);
	fake_add(&f, PC_TOP, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	fake_add(&f, PC_OUT, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[32] = { 0 };
	uint64_t frame = SP + 0x40; /* PC_TOP's frame: saved rbp, then its return address */
	stack[0x08 / 8] = frame;        /* the leaf saved rbp at CFA - 0x10 */
	stack[0x10 / 8] = PC_TOP + 7;   /* its return address at CFA - 8 */
	stack[0x40 / 8] = SP + 0x80;    /* PC_TOP's caller's rbp */
	stack[0x48 / 8] = PC_OUT + 9;   /* PC_TOP's return address */
	uint64_t chain[] = { PC_LEAF + 1, 0x5555, PC_OUT + 9, PC_OUT + 20 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0x1234 /* junk */, (const uint8_t *)stack, sizeof(stack), chain, 4,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	assert_int_equal(rp.walked, 2);
	expect(&rp, 3, (uint64_t[]){ PC_TOP + 7, PC_OUT + 9, PC_OUT + 20 },
	       (int32_t[]){ -1, -1, 3 });
	/* the chain has no such return address: its junk is not followed, the
	 * walk goes on with the framed callers' CFI to the copy's end */
	chain[2] = PC_OUT + 10;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0x1234, (const uint8_t *)stack, sizeof(stack),
			       chain, 4, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
	assert_true(rp.walked >= 2);
	for (size_t i = 0; i < rp.n; i++)
		assert_int_equal(rp.from[i], -1);
}

/* The walk from the leaf stops before it meets the chain (its return address
 * slot 0, a frame that does not go up, a return address into no code): the
 * kernel's chain is kept whole, the stop said. */
static void test_unwind__lost_keeps_chain(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x10, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_MID, TALLY_FP_CFA_SP, 0x30, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_MAIN, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[32] = { 0 }; /* the leaf's return address slot, [sp + 8]: 0 */
	uint64_t chain[] = { PC_LEAF + 1, PC_MAIN + 3, PC_MAIN + 9, PC_MAIN + 15, PC_MAIN + 21 };
	const uint64_t callers[] = { PC_MAIN + 3, PC_MAIN + 9, PC_MAIN + 15, PC_MAIN + 21 };
	const int32_t from[] = { 1, 2, 3, 4 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, SP + 0x100, (const uint8_t *)stack, sizeof(stack),
			       chain, 5, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
	assert_int_equal(rp.walked, 0);
	expect(&rp, 4, callers, from);

	/* a return address into no code */
	stack[1] = 0x10;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, SP + 0x100, (const uint8_t *)stack, sizeof(stack),
			       chain, 5, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
	expect(&rp, 4, callers, from);

	/* one frame found, then a zero return address: the chain, whose first
	 * entry is code with a rule, rather than the one frame */
	stack[1] = PC_MID + 5;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, SP + 0x100, (const uint8_t *)stack, sizeof(stack),
			       chain, 5, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
	assert_int_equal(rp.walked, 0);
	expect(&rp, 4, callers, from);

	/* a frame that does not go up the stack (its CFA at the leaf's) */
	f.r[1].cfa_off = 0;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, SP + 0x100, (const uint8_t *)stack, sizeof(stack),
			       chain, 5, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
	assert_int_equal(rp.walked, 0);
	expect(&rp, 4, callers, from);
}

/* The chain meets a function that had no frame at its call (libc's
 * vsnprintf, between vfprintf's frame and the user's): the entry after it
 * skips its caller. Its frame in the copy is walked, and the chain rejoins
 * where the walk meets its frame pointer; beyond the copy, the stop says a
 * caller is missing. */
static void test_unwind__chain_leaves_and_rejoins(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_TOP, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);  /* vfprintf, sampled */
	/* vsnprintf: no frame */
	fake_add(&f, PC_MID, TALLY_FP_CFA_SP, 0x20, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_OUT, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);  /* use_printf */
	fake_add(&f, PC_MAIN, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10); /* main */
	uint64_t stack[64] = { 0 };
	uint64_t bp = SP + 0x40;          /* vfprintf's frame */
	stack[0x40 / 8] = SP + 0x80;      /* the rbp it saved: use_printf's frame */
	stack[0x48 / 8] = PC_MID + 4;     /* its return address, into vsnprintf */
	/* vsnprintf's frame: from vfprintf's CFA (SP + 0x50) up 0x20 */
	stack[0x68 / 8] = PC_OUT + 6;     /* vsnprintf's return address into use_printf */
	stack[0x80 / 8] = SP + 0xc0;      /* use_printf's frame */
	stack[0x88 / 8] = PC_MAIN + 2;
	/* the kernel's chain: vfprintf's return address, then from the rbp it
	 * saved (use_printf's frame) use_printf's return address: vsnprintf's
	 * caller use_printf is not in it */
	uint64_t chain[] = { PC_TOP + 1, PC_MID + 4, PC_MAIN + 2, PC_MAIN + 8 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_TOP + 1, SP, bp, (const uint8_t *)stack, sizeof(stack), chain, 4,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	assert_int_equal(rp.walked, 1);
	expect(&rp, 4, (uint64_t[]){ PC_MID + 4, PC_OUT + 6, PC_MAIN + 2, PC_MAIN + 8 },
	       (int32_t[]){ 1, -1, 2, 3 });
	/* a copy without vsnprintf's frame: use_printf is missing, and said to be */
	tally_unwind_fp_repair(PC_TOP + 1, SP, bp, (const uint8_t *)stack, 0x20, chain, 4,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_SHORT);
	expect(&rp, 3, (uint64_t[]){ PC_MID + 4, PC_MAIN + 2, PC_MAIN + 8 },
	       (int32_t[]){ 1, 2, 3 });
	/* the same from the BPF program's walk (no copy): the chain followed */
	rp.n = rp.walked = 0;
	rp.stop = TALLY_FP_JOINED;
	tally_unwind_fp_follow(chain, 4, true, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_SHORT);
	expect(&rp, 3, (uint64_t[]){ PC_MID + 4, PC_MAIN + 2, PC_MAIN + 8 },
	       (int32_t[]){ 1, 2, 3 });
	/* a chain entry in no code: read from an rbp that was no frame pointer,
	 * it and what follows are dropped */
	uint64_t junk[] = { PC_TOP + 1, PC_MID + 4, 0x12, 0x8 };
	tally_unwind_fp_repair(PC_TOP + 1, SP, bp, (const uint8_t *)stack, 0x20, junk, 4, fake_rule,
			       &f, &rp);
	expect(&rp, 1, (uint64_t[]){ PC_MID + 4 }, (int32_t[]){ 1 });
}

/* The outermost frame ends the walk; a run of frames without frame pointers
 * longer than TALLY_FP_MAX stops at the depth limit. */
static void test_unwind__end_and_depth(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x8, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_END, TALLY_FP_CFA_END, 0, 0, 0);
	uint64_t stack[TALLY_FP_MAX + 8] = { PC_END + 4 };
	uint64_t chain[] = { PC_LEAF + 1, 0x9999 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0, (const uint8_t *)stack, sizeof(stack), chain, 2,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	expect(&rp, 1, (uint64_t[]){ PC_END + 4 }, (int32_t[]){ -1 });
	/* each frame returns into PC_LEAF's code again: a recursion with no frame */
	for (size_t i = 0; i < ARRAY_SIZE(stack); i++)
		stack[i] = PC_LEAF + 4;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0, (const uint8_t *)stack, sizeof(stack), chain, 2,
			       fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_DEPTH);
	assert_int_equal(rp.walked, TALLY_FP_MAX);
}

/* A program without frame pointers (sqlite3's shell: its main and its input
 * loop have frames of 5.5 and 2.2 KiB): rbp is a general register, and the
 * walk with the CFI finds frame after frame until the next one's return
 * address is beyond the copy. The copy's size stopped it, and the stop says
 * so; the chain, read from a junk rbp, is not kept. */
static void test_unwind__frameless_to_copy_end(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x10, TALLY_FP_BP_SAME, 0);
	fake_add(&f, PC_MID, TALLY_FP_CFA_SP, 0x20, TALLY_FP_BP_AT, -0x10);
	fake_add(&f, PC_TOP, TALLY_FP_CFA_SP, 0x8b0, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[64] = { 0 };
	stack[0x08 / 8] = PC_MID + 5; /* the leaf's return address */
	stack[0x20 / 8] = 0x4242;     /* PC_MID saved the caller's rbp (a general value) */
	stack[0x28 / 8] = PC_TOP + 7; /* PC_MID's return address; PC_TOP's at 0x8d8 */
	uint64_t chain[] = { PC_LEAF + 1, PC_OUT + 9 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0x1234 /* junk */, (const uint8_t *)stack,
			       sizeof(stack), chain, 2, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_SHORT);
	assert_int_equal(rp.walked, 2);
	expect(&rp, 2, (uint64_t[]){ PC_MID + 5, PC_TOP + 7 }, (int32_t[]){ -1, -1 });
	/* the same frames ending in a zero return address inside the copy: not
	 * the copy's size, the walk was lost */
	f.r[2].cfa_off = 0x40;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, 0x1234, (const uint8_t *)stack, sizeof(stack),
			       chain, 2, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_LOST);
}

/* An epilogue after `pop rbp`: GCC's CFI still says rbp is saved at its old
 * place, now below the stack pointer; rbp holds the caller's value again. */
static void test_unwind__epilogue(void **state)
{
	(void)state;
	struct fake f = { 0 };
	fake_add(&f, PC_LEAF, TALLY_FP_CFA_SP, 0x8, TALLY_FP_BP_AT, -0x30);
	fake_add(&f, PC_TOP, TALLY_FP_CFA_BP, 0x10, TALLY_FP_BP_AT, -0x10);
	uint64_t stack[4] = { PC_TOP + 3 };
	uint64_t chain[] = { PC_LEAF + 1, PC_MAIN + 3 };
	struct tally_fp_repair rp;
	tally_unwind_fp_repair(PC_LEAF + 1, SP, SP + 0x100, (const uint8_t *)stack, sizeof(stack),
			       chain, 2, fake_rule, &f, &rp);
	assert_int_equal(rp.stop, TALLY_FP_JOINED);
	expect(&rp, 2, (uint64_t[]){ PC_TOP + 3, PC_MAIN + 3 }, (int32_t[]){ -1, 1 });
}

/* ---- the rules of this program's own CFI, and the aggregate's repair ---- */

/* leaf_fn, mid_fn (no frame pointer) and top_fn: unwind-frames.h */

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

/* The rules of this program's own code: a function's first instruction has
 * the return address at [sp] (CFA = rsp + 8) whether it keeps a frame or not,
 * and top_fn's return address into it is in code with its frame. */
static void test_unwind__own_cfi(void **state)
{
	(void)state;
	struct self s;
	self_open(&s);
	top_fn();
	struct tally_fp_rule r;
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), (uint64_t)(uintptr_t)&leaf_fn,
				      false, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_SP);
	assert_int_equal(r.cfa_off, 8);
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), ra_mid, true, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_BP);
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), ra_leaf, true, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_SP);
	assert_true(r.cfa_off > 8); /* mid_fn's locals */
	/* no mapping there, and no process */
	assert_false(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), 0x1000, false, &r));
	assert_false(tally_agg_fp_rule(&s.a, 0x7ffffff0, (uint64_t)(uintptr_t)&leaf_fn, false, &r));
	tally_agg_release(&s.a);
}

/* The number of descriptors this process has open. */
static size_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	size_t n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Building an image's CFI leaves no descriptor open (a whole-system
 * recording walks stacks in hundreds of images), and the rules still read
 * from it after. */
static void test_unwind__cfi_holds_no_fd(void **state)
{
	(void)state;
	struct self s;
	self_open(&s);
	top_fn();
	size_t before = count_fds();
	struct tally_fp_rule r;
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), (uint64_t)(uintptr_t)&leaf_fn,
				      false, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_SP);
	assert_int_equal(count_fds(), before);
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), ra_mid, true, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_BP);
	assert_int_equal(count_fds(), before);
	tally_agg_release(&s.a);
}

/* The image of this process that maps code address pc. */
static const struct tally_image *image_at(struct self *s, uint64_t pc)
{
	const struct tally_map *m = tally_proc_find_map(s->p, pc);
	assert_non_null(m);
	assert_true(m->image != TALLY_MAP_ANON && m->image < s->a.nimages);
	return &s->a.images[m->image];
}

/* An image with a .debug_frame (this program: nounwind_fn's CFI is there
 * only) has it read when its CFI is set up, at the first rule asked of it,
 * not in the middle of a later walk: a rule at an address .eh_frame lacks
 * then reads nothing, and finds it. */
static void test_unwind__debug_frame_read_with_image(void **state)
{
	(void)state;
	struct self s;
	self_open(&s);
	nounwind_fn();
	struct tally_fp_rule r;
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), (uint64_t)(uintptr_t)&leaf_fn,
				      false, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_SP);
	const struct tally_image *im = image_at(&s, (uint64_t)(uintptr_t)&leaf_fn);
	assert_true(uw_image_dwarf_read(im));
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), (uint64_t)(uintptr_t)&nounwind_fn,
				      false, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_SP);
	assert_int_equal(r.cfa_off, 8);
	tally_agg_release(&s.a);
}

/* Whether the ELF file at path has a compressed section and a
 * .debug_frame. */
static void elf_sections(const char *path, bool *compressed, bool *frame)
{
	*compressed = *frame = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	assert_non_null(e);
	assert_int_equal(elf_getshdrstrndx(e, &shstrndx), 0);
	for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		assert_non_null(gelf_getshdr(scn, &sh));
		const char *name = elf_strptr(e, shstrndx, sh.sh_name);
		*compressed |= (sh.sh_flags & SHF_COMPRESSED) != 0;
		*frame |= name && !strcmp(name, ".debug_frame");
	}
	elf_end(e);
	close(fd);
}

/* An image without a .debug_frame whose DWARF is compressed (a copy of this
 * program by objcopy --compress-debug-sections, its .debug_frame removed):
 * a rule at an address no .eh_frame FDE covers never reads its DWARF, which
 * would inflate every compressed section on the recording's path. */
static void test_unwind__no_debug_frame_no_inflate(void **state)
{
	(void)state;
	char *dir = unit_tmpdir(), *copy = unit_path(dir, "copy"), *cmd = NULL;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_true(
		asprintf(
			&cmd,
			"objcopy --compress-debug-sections=zlib-gabi --remove-section=.debug_frame "
			"'%s' '%s' 2>/dev/null",
			exe, copy) > 0);
	int rc = system(cmd);
	bool compressed = false, frame = false;
	if (rc == 0)
		elf_sections(copy, &compressed, &frame);
	void *base = MAP_FAILED;
	size_t len = 0;
	if (compressed && !frame) {
		struct stat st;
		int fd = open(copy, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0 && fstat(fd, &st) == 0);
		len = (size_t)st.st_size;
		base = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		close(fd);
	}
	if (base == MAP_FAILED) {
		fprintf(stderr, "skipped: %s\n",
			rc != 0 ? "objcopy (binutils) could not compress a copy of this program"
			: !compressed || frame
				? "objcopy's copy has no compressed section"
				: "cannot map the copy executable (a noexec TMPDIR?)");
		unlink(copy);
		rmdir(dir);
		free(cmd);
		free(copy);
		free(dir);
		skip();
	}
	struct self s;
	self_open(&s);
	struct tally_fp_rule r;
	/* the ELF header: in the first loadable segment, in no FDE */
	assert_true(tally_agg_fp_rule(&s.a, (uint32_t)getpid(), (uint64_t)(uintptr_t)base + 0x10,
				      false, &r));
	assert_int_equal(r.cfa, TALLY_FP_CFA_NONE);
	assert_false(uw_image_dwarf_read(image_at(&s, (uint64_t)(uintptr_t)base)));
	tally_agg_release(&s.a);
	munmap(base, len);
	unlink(copy);
	rmdir(dir);
	free(cmd);
	free(copy);
	free(dir);
}

/* registers as the kernel packs them for mask */
static size_t pack_regs(uint64_t *out, uint64_t mask, uint64_t ip, uint64_t sp, uint64_t bp)
{
	uint64_t full[PERF_REG_X86_64_MAX] = { 0 };
	full[PERF_REG_X86_IP] = ip;
	full[PERF_REG_X86_SP] = sp;
	full[PERF_REG_X86_BP] = bp;
	size_t n = 0;
	for (int b = 0; b < PERF_REG_X86_64_MAX; b++)
		if (mask & (1ULL << b))
			out[n++] = full[b];
	return n;
}

/* The frame of address pc in the aggregate's terms. */
static uint32_t frame_of(struct self *s, uint64_t pc)
{
	const struct tally_map *m = tally_proc_find_map(s->p, pc);
	assert_non_null(m);
	return tally_agg_frame(&s->a, m->image, pc - m->start + m->pgoff);
}

/* A real stack taken in leaf_fn, called by mid_fn, called by top_fn: the
 * kernel's chain (made here from the copy as it would walk it from rbp) has
 * leaf_fn then top_fn's caller; the aggregate puts mid_fn and top_fn back,
 * in order, then the chain goes on. */
static void test_unwind__agg_repairs_real_stack(void **state)
{
	(void)state;
#ifdef __SANITIZE_ADDRESS__
	/* its frames are the compiler's: under ASan the caller's frame and the
	 * saved rbp chain above top_fn are not the ones this test reads */
	fprintf(stderr,
		"skipped: a real stack's frames as ASan lays them out are not the test's\n");
	skip();
#endif
	struct self s;
	self_open(&s);
	top_fn();
	/* the chain as the kernel walks it: ip, then [bp + 8], [[bp] + 8], ...
	 * (as far as the copy goes) */
	uint64_t chain[16] = { PERF_CONTEXT_USER, cap_ip };
	size_t nr = 2;
	for (uint64_t fp = cap_bp;
	     nr < ARRAY_SIZE(chain) && fp >= cap_sp && fp + 16 <= cap_sp + sizeof(cap_stack);) {
		uint64_t next, ra;
		memcpy(&next, cap_stack + (fp - cap_sp), 8);
		memcpy(&ra, cap_stack + (fp + 8 - cap_sp), 8);
		chain[nr++] = ra;
		if (next <= fp)
			break;
		fp = next;
	}
	assert_true(nr >= 3);
	assert_true(chain[2] != ra_leaf && chain[2] != ra_mid); /* the chain skips both */
	uint64_t regs[8];
	struct tally_rec r;
	memset(&r, 0, sizeof(r));
	r.type = PERF_RECORD_SAMPLE;
	r.misc = PERF_RECORD_MISC_USER;
	r.event = 0;
	r.pid = r.tid = (uint32_t)getpid();
	r.ip = cap_ip;
	r.nr = nr;
	r.chain = chain;
	r.regs_mask = tally_unwind_fp_regs_mask();
	r.nregs = pack_regs(regs, r.regs_mask, cap_ip, cap_sp, cap_bp);
	r.regs = regs;
	r.stack = cap_stack;
	r.stack_len = sizeof(cap_stack);
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_leaf_checked, 1);
	assert_int_equal(s.a.fp_leaf_repaired, 1);
	/* (this test program has no frame pointers: above top_fn the walk goes
	 * on with the CFI as far as the copy holds frames) */
	uint64_t frames = s.a.fp_repair_frames;
	assert_true(frames >= 2);
	assert_int_equal(s.a.nstacks, 1);
	const struct tally_stack *st = &s.a.stacks[0];
	assert_true(st->len >= 4);
	const uint32_t *fr = &s.a.stack_frames[st->first];
	assert_int_equal(fr[0], frame_of(&s, cap_ip));
	assert_int_equal(fr[1], frame_of(&s, ra_leaf));
	assert_int_equal(fr[2], frame_of(&s, ra_mid));
	assert_int_equal(fr[3], frame_of(&s, chain[2]));

	/* the full register set of a DWARF recording's mask reads the same */
	uint64_t full[PERF_REG_X86_64_MAX];
	r.regs_mask = 0;
	r.nregs = pack_regs(full, tally_unwind_regs_mask(), cap_ip, cap_sp, cap_bp);
	r.regs = full;
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_repair_frames, 2 * frames);
	assert_int_equal(s.a.nstacks, 1);

	/* a copy too short for mid_fn's return address: the stop said */
	uint64_t short_before = s.a.fp_repair_stops[TALLY_FP_SHORT],
		 unchecked = s.a.fp_leaf_unchecked;
	r.stack_len = 16;
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_leaf_unchecked, unchecked + 1);
	assert_int_equal(s.a.fp_repair_stops[TALLY_FP_SHORT], short_before + 1);
	/* no copy at all: the chain kept as it is, the stop said */
	r.stack = NULL;
	r.stack_len = 0;
	tally_agg_record(&s.a, &r);
	assert_int_equal(s.a.fp_repair_stops[TALLY_FP_SHORT], short_before + 2);
	assert_int_equal(s.a.fp_leaf_checked, 4);
	tally_agg_release(&s.a);
}

/* ---- JIT code ---- */

/* A load whose unwinding data fits the JIT budget but whose code does not is
 * refused whole: its unwinding data counts no more, and a load without any
 * that fits is taken. */
static void test_unwind__jit_refused_code_frees_its_blob(void **state)
{
	(void)state;
	/* .eh_frame, then .eh_frame_hdr: never read here */
	static const unsigned char unwind[48] = { 1 };
	struct tally_jit_code_event with = { .addr = 0x10000, .size = 0x100, .unwind = unwind,
					     .unwind_len = sizeof(unwind), .eh_frame_hdr_len = 16 };
	struct tally_jit_code_event plain = { .addr = 0x20000, .size = 0x100 };
	/* the least budget the load with unwinding data fits in */
	size_t least = 0;
	for (size_t b = 1; b < 4096 && !least; b++) {
		struct uw_jit *j = NULL;
		uw_jit_feed(&j, &with, b);
		if (uw_jit_nranges(j) == 1)
			least = b;
		uw_jit_free(j);
	}
	assert_true(least > 1);
	struct uw_jit *j = NULL;
	uw_jit_feed(&j, &with, least - 1);
	assert_int_equal(uw_jit_nranges(j), 0);
	uw_jit_feed(&j, &plain, least - 1);
	assert_int_equal(uw_jit_nranges(j), 1);
	uw_jit_free(j);
}

/* A PERF_RECORD_MMAP2 of anonymous executable memory of this process, as
 * the kernel reports an mmap or an mprotect to executable. */
struct anon_mmap_rec {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	char filename[8];
};

static void agg_mapped(struct tally_agg *a, void *addr, size_t len)
{
	struct anon_mmap_rec m = { .h = { PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER, sizeof(m) },
				   .pid = (uint32_t)getpid(),
				   .tid = (uint32_t)getpid(),
				   .addr = (uint64_t)(uintptr_t)addr,
				   .len = len,
				   .prot = PROT_READ | PROT_EXEC,
				   .flags = MAP_PRIVATE | MAP_ANONYMOUS,
				   .filename = "//anon" };
	struct tally_rec r = { .raw = &m.h,
			       .type = PERF_RECORD_MMAP2,
			       .misc = PERF_RECORD_MISC_USER,
			       .event = -1,
			       .pid = (uint32_t)getpid(),
			       .tid = (uint32_t)getpid() };
	tally_agg_record(a, &r);
}

/* A page of anonymous code at want (NULL: anywhere), holding code at
 * offset 64 (NULL: int3 all through). */
static uint8_t *code_page(void *want, const uint8_t *code, size_t len)
{
	uint8_t *pg = mmap(want, 4096, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED : 0), -1, 0);
	assert_true(pg != MAP_FAILED);
	memset(pg, 0xcc, 4096);
	if (code)
		memcpy(pg + 64, code, len);
	assert_int_equal(mprotect(pg, 4096, PROT_READ | PROT_EXEC), 0);
	return pg;
}

/* A JIT return address found in a copy of a template is kept (the process's
 * memory is read once per address): when the process maps new code there
 * (the old unmapped, new code put at the same address), the answer is
 * looked for again, both ways. */
static void test_unwind__jit_copy_forgotten_on_mmap(void **state)
{
	(void)state;
	/* CPython's trampoline: sub $8,%rsp; call *%rcx; add $8,%rsp; ret */
	static const uint8_t tramp[] = { 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1,
					 0x48, 0x83, 0xc4, 0x08, 0xc3 };
	uint8_t *pg = code_page(NULL, tramp, sizeof(tramp));
	uint64_t ra = (uint64_t)(uintptr_t)(pg + 64 + 6); /* after the call */
	struct self s;
	self_open(&s);
	struct uw_jit **j = uw_proc_jit(s.p);
	assert_true(uw_jit_add_template(j, tramp, sizeof(tramp)));
	struct uw_jit_where w;
	assert_true(uw_jit_find(j, &s.a, s.p, NULL, ra, false, &w));
	assert_non_null(w.rows);
	assert_int_equal(w.off, 5);

	/* other code in its place: no copy there any more */
	assert_int_equal(munmap(pg, 4096), 0);
	assert_ptr_equal(code_page(pg, NULL, 0), pg);
	agg_mapped(&s.a, pg, 4096);
	assert_false(uw_jit_find(j, &s.a, s.p, NULL, ra, false, &w));

	/* and a copy again where there was none */
	assert_int_equal(munmap(pg, 4096), 0);
	assert_ptr_equal(code_page(pg, tramp, sizeof(tramp)), pg);
	agg_mapped(&s.a, pg, 4096);
	assert_true(uw_jit_find(j, &s.a, s.p, NULL, ra, false, &w));
	assert_int_equal(w.off, 5);

	/* code mapped elsewhere leaves the answer for ra kept (no read of the
	 * process's memory: it was changed here unannounced, and still counts
	 * as the copy it was) */
	assert_int_equal(mprotect(pg, 4096, PROT_READ | PROT_WRITE), 0);
	memset(pg + 64, 0xcc, sizeof(tramp));
	agg_mapped(&s.a, pg + 8192, 4096);
	assert_true(uw_jit_find(j, &s.a, s.p, NULL, ra, false, &w));
	tally_agg_release(&s.a);
	munmap(pg, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unwind__chain_of_two),
		cmocka_unit_test(test_unwind__framed_leaf),
		cmocka_unit_test(test_unwind__rbp_reused),
		cmocka_unit_test(test_unwind__lost_keeps_chain),
		cmocka_unit_test(test_unwind__chain_leaves_and_rejoins),
		cmocka_unit_test(test_unwind__end_and_depth),
		cmocka_unit_test(test_unwind__epilogue),
		cmocka_unit_test(test_unwind__frameless_to_copy_end),
		cmocka_unit_test(test_unwind__own_cfi),
		cmocka_unit_test(test_unwind__cfi_holds_no_fd),
		cmocka_unit_test(test_unwind__debug_frame_read_with_image),
		cmocka_unit_test(test_unwind__no_debug_frame_no_inflate),
		cmocka_unit_test(test_unwind__agg_repairs_real_stack),
		cmocka_unit_test(test_unwind__jit_refused_code_frees_its_blob),
		cmocka_unit_test(test_unwind__jit_copy_forgotten_on_mmap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
