/* Record-time DWARF unwinding of user stacks (PERF_SAMPLE_STACK_USER and
 * PERF_SAMPLE_REGS_USER) with elfutils libdwfl, from .eh_frame / .debug_frame.
 * One Dwfl per address space, its modules reported once, so the CFI of each
 * module is parsed once per process instead of once per sample. Raw stack copies
 * never leave this function. */
#ifndef TALLY_UNWIND_H
#define TALLY_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally/agg.h"
#include "tally/fprepair.h"

/* The registers asked of the kernel: every x86-64 general register the CFI may use. */
uint64_t tally_unwind_regs_mask(void);

/* Unwinds one sample of process p. regs are as the kernel gives them for the
 * mask above (nregs values), stack is the copy starting at the sampled SP.
 * Fills pcs (leaf first: the sampled IP, then return addresses) and returns how
 * many; *why is set to a static reason when the unwind stopped short, else NULL. */
size_t tally_unwind_sample(struct tally_agg *a, struct tally_proc *p, const uint64_t *regs,
			   size_t nregs, const uint8_t *stack, size_t stack_len, uint64_t *pcs,
			   size_t max, const char **why);

/* The rule at a file offset of a file image: at that instruction (ra false: a
 * sampled ip) or for the call before it (ra true: a return address; the rule
 * of offset - 1). From the image's .eh_frame (else its .debug_frame), opened
 * through process p (which maps it now; NULL: the image's own pid) once per
 * image and kept in the image until tally_unwind_image_release. *out is
 * TALLY_FP_CFA_NONE where there is no usable rule. */
void tally_unwind_fp_rule(struct tally_agg *a, struct tally_proc *p, uint32_t image,
			  uint64_t offset, bool ra, struct tally_fp_rule *out);
/* Frees what tally_unwind_fp_rule keeps in an image (nothing kept: a no-op). */
void tally_unwind_image_release(struct tally_image *im);

/* Frees the per-process unwinding state (called when the process goes, or execs). */
void tally_unwind_proc_release(struct tally_proc *p);
/* Tells the unwinder that process p mapped code at [start, end): what it
 * kept of the code there before (JIT code it matched to a template) is
 * forgotten. */
void tally_unwind_proc_mapped(struct tally_proc *p, uint64_t start, uint64_t end);

#endif
