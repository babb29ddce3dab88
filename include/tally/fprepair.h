/* Frame pointers with CFI at the top of the stack: the types and the pure
 * walk (lib/unwind/fprepair.c) that the aggregate (over a sample's stack
 * copy) and the collector (over a BPF program's) share; the rule at a code
 * address comes from the image's CFI (tally_unwind_fp_rule, unwind.h). */
#ifndef TALLY_FPREPAIR_H
#define TALLY_FPREPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- frame pointers with CFI at the top of the stack (fprepair.c) ----
 *
 * A frame-pointer chain (the kernel's walk from rbp) leaves out every function
 * between the sampled one and the first that has its frame on the chain: a leaf
 * at -O2, a function in its prologue or epilogue, and chains of libc functions
 * built without frame pointers (nanosleep -> clock_nanosleep). The repair
 * unwinds those frames with the binaries' CFI over a small copy of the top of
 * the user stack, as many as there are, until it rejoins the chain, then the
 * chain goes on (docs/callgraph.md). */

/* The registers asked of the kernel with frame-pointer call graphs: ip, sp, bp
 * (the repair needs no other; a sample then carries 24 bytes of them). */
uint64_t tally_unwind_fp_regs_mask(void);
/* ip, sp and bp of a sample's registers packed in the kernel's order for mask
 * (tally_unwind_regs_mask or tally_unwind_fp_regs_mask). False when they are
 * not all there. */
bool tally_unwind_regs_ipspbp(const uint64_t *regs, size_t nregs, uint64_t mask, uint64_t *ip,
			      uint64_t *sp, uint64_t *bp);

/* How to find a frame's caller at one code address, from its CFI. */
enum tally_fp_cfa {
	/* no CFI there (JIT code, no .eh_frame), or a rule the repair does not follow */
	TALLY_FP_CFA_NONE,
	TALLY_FP_CFA_SP,   /* CFA = rsp + cfa_off: no frame on the chain */
	TALLY_FP_CFA_BP,   /* CFA = rbp + cfa_off: the function's frame is on the chain */
	TALLY_FP_CFA_END,  /* the outermost frame: its return address is undefined */
};
enum tally_fp_bp {
	TALLY_FP_BP_SAME, /* the caller's rbp is this frame's */
	TALLY_FP_BP_AT,   /* saved at CFA + bp_off */
	TALLY_FP_BP_LOST, /* not recoverable by this rule */
};
struct tally_fp_rule {
	uint8_t cfa; /* enum tally_fp_cfa */
	uint8_t bp;  /* enum tally_fp_bp */
	int32_t cfa_off, bp_off;
};

/* Why a repair stopped; TALLY_FP_JOINED is success (the order is the session's
 * fp-repair-stops, docs/format.md). */
enum tally_fp_stop {
	TALLY_FP_JOINED,  /* every frame accounted for: the chain rejoined and held */
	TALLY_FP_NOCFI,   /* a frame at an address without a rule to follow (no CFI) */
	TALLY_FP_SHORT,   /* a frame's return address or saved rbp beyond the stack
			   * copy: a caller may be missing there */
	TALLY_FP_LOST,    /* the frames found meet no frame of the chain (rbp was
			   * used as a general register), or the registers are not
			   * the chain's: the stack ends where the walk did; a walk
			   * lost before it found a frame keeps the chain instead */
	TALLY_FP_DEPTH,   /* more than TALLY_FP_MAX frames found by the walk */
	TALLY_FP_NSTOPS
};
/* The most frames the walk finds in one stack, and the most in a result. */
#define TALLY_FP_MAX 64
#define TALLY_FP_OUT 512

/* A code address's rule: pc a sampled ip (ra false) or a return address (ra
 * true); chain_at: its index in the chain when it is the chain's, else
 * SIZE_MAX (a hint: the caller may keep rules per chain entry). False: pc is
 * no code of the process (a chain read from an rbp that was no frame
 * pointer); true with TALLY_FP_CFA_NONE: code without a rule to follow. */
typedef bool (*tally_fp_rule_fn)(void *ctx, uint64_t pc, bool ra, size_t chain_at,
				 struct tally_fp_rule *out);

/* What goes after the sampled ip: return addresses, innermost first, each
 * found by the walk (from -1) or the chain's entry from[i]. */
struct tally_fp_repair {
	uint64_t pcs[TALLY_FP_OUT];
	int32_t from[TALLY_FP_OUT];
	size_t n;
	size_t walked; /* those found by the walk: the frames put back */
	enum tally_fp_stop stop;
};

/* Unwinds one user stack: ip, sp, bp the sample's registers, stack..stack_len
 * the copy from sp, chain..nchain the frame-pointer chain's user part
 * (chain[0] the sampled ip, then the return addresses the kernel read from
 * rbp on). Walks with rule() from ip over the copy until a frame is on the
 * chain (its CFA from rbp, rbp the one the chain read that frame at), then
 * follows the chain while its functions had their frames at the call, and
 * walks again from a function that had none (when the copy holds its frame),
 * and so on to the chain's end. A pure function of its arguments. */
void tally_unwind_fp_repair(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
			    size_t stack_len, const uint64_t *chain, size_t nchain,
			    tally_fp_rule_fn rule, void *ctx, struct tally_fp_repair *out);
/* The same without registers or a copy, for frames the BPF off-CPU program
 * walked in the kernel (lib/collect/offcpu.bpf.c): out already holds them
 * (walked, and stop: TALLY_FP_JOINED when the walk met the chain's first
 * frame, else why it stopped), and the chain is followed from its entry 1
 * where rbp was the chain's (joined, or bp_same), or not at all. */
void tally_unwind_fp_follow(const uint64_t *chain, size_t nchain, bool bp_same,
			    tally_fp_rule_fn rule, void *ctx, struct tally_fp_repair *out);

#endif
