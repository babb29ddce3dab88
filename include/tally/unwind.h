/* Record-time DWARF unwinding of user stacks (PERF_SAMPLE_STACK_USER and
 * PERF_SAMPLE_REGS_USER) with elfutils libdwfl, from .eh_frame / .debug_frame.
 * One Dwfl per address space, its modules reported once, so the CFI of each
 * module is parsed once per process instead of once per sample. Raw stack copies
 * never leave this function. */
#ifndef TALLY_UNWIND_H
#define TALLY_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "tally/agg.h"

/* The registers asked of the kernel: every x86-64 general register the CFI may use. */
uint64_t tally_unwind_regs_mask(void);

/* Unwinds one sample of process p. regs are as the kernel gives them for the
 * mask above (nregs values), stack is the copy starting at the sampled SP.
 * Fills pcs (leaf first: the sampled IP, then return addresses) and returns how
 * many; *why is set to a static reason when the unwind stopped short, else NULL. */
size_t tally_unwind_sample(struct tally_agg *a, struct tally_proc *p, const uint64_t *regs, size_t nregs,
			   const uint8_t *stack, size_t stack_len, uint64_t *pcs, size_t max, const char **why);

/* For a frame-pointer call chain: where the sampled user function's caller is.
 * TALLY_LEAF_FRAMED: its CFA is computed from the frame pointer, so the chain
 * already holds its caller; TALLY_LEAF_RA: it set up no frame (yet, or any
 * more), and *ra is its return address, read from the stack copy;
 * TALLY_LEAF_UNKNOWN: no CFI for the address, or the return address lies
 * beyond the copy, or the registers' IP is not chain_ip (the chain's first user
 * address). regs and stack as for tally_unwind_sample. */
enum tally_leaf { TALLY_LEAF_UNKNOWN, TALLY_LEAF_FRAMED, TALLY_LEAF_RA };
enum tally_leaf tally_unwind_leaf(struct tally_agg *a, struct tally_proc *p, const uint64_t *regs, size_t nregs,
				  const uint8_t *stack, size_t stack_len, uint64_t chain_ip, uint64_t *ra);

/* The two halves of tally_unwind_leaf, so a caller can keep the rule per code
 * address (it depends on the code only): the CFI rule at a file offset of a
 * file image (TALLY_LEAF_RA: the return address at sp + *ra_off), from the
 * image's own .eh_frame (else .debug_frame), opened through process p (which
 * maps it now) once per image and kept in the image until
 * tally_unwind_image_release; and reading the return address of a sample by
 * that rule. tally_unwind_leaf_read returns false when the registers are
 * missing, their IP is not chain_ip, or the address lies beyond the copy. */
enum tally_leaf tally_unwind_leaf_rule(struct tally_agg *a, struct tally_proc *p, uint32_t image, uint64_t offset,
				       uint64_t *ra_off);
/* Frees what tally_unwind_leaf_rule keeps in an image (NULL state: nothing). */
void tally_unwind_image_release(struct tally_image *im);
bool tally_unwind_leaf_read(const uint64_t *regs, size_t nregs, const uint8_t *stack, size_t stack_len,
			    uint64_t chain_ip, uint64_t ra_off, uint64_t *ra);

/* Frees the per-process unwinding state (called when the process goes, or execs). */
void tally_unwind_proc_release(struct tally_proc *p);

#endif
