/* Private to lib/unwind: what dwarf.c (libdwfl's unwinding of mapped files)
 * and jit.c (the CFI of JIT code: jitdump unwinding records, copies of a
 * known template) share. */
#ifndef TALLY_UNWIND_INTERNAL_H
#define TALLY_UNWIND_INTERNAL_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "tally/agg.h"

/* A frame's registers in DWARF's x86-64 numbering (rax rdx rcx rbx rsi rdi
 * rbp rsp r8..r15, then 16: the return address column, rip); bit i of
 * valid: r[i] is known. */
#define UW_NREGS 17
#define UW_RSP 7
#define UW_RIP 16
struct uw_regs {
	uint64_t r[UW_NREGS];
	uint32_t valid;
};

/* The sample's stack copy, from its SP. */
struct uw_stack {
	uint64_t sp;
	const uint8_t *data;
	size_t len;
};

/* What one step from a frame to its caller came to. */
enum uw_step {
	UW_STEP_OK,
	UW_STEP_END,   /* the CFI says there is no caller (undefined return address) */
	UW_STEP_NOCFI, /* no rule for the address, or one tally does not evaluate */
	UW_STEP_STACK, /* a read above the copy's end: the copy was too small */
	/* a read below the copy, or a caller that is no caller (the stack does not grow up) */
	UW_STEP_BAD,
};

/* Reads 8 bytes at addr from the copy: UW_STEP_OK, UW_STEP_STACK above its
 * end, UW_STEP_BAD below its start. */
enum uw_step uw_stack_read(const struct uw_stack *st, uint64_t addr, uint64_t *val);

/* The JIT state of one process: the CFI its jitdump gave, the templates its
 * binaries export and the copies of them found. Owned by dwarf.c's
 * per-process state (NULL: none yet). */
struct uw_jit;
void uw_jit_free(struct uw_jit *j);

/* Where the rule for a JIT frame comes from: a CFI (the dump's, or the
 * binary's for a copy of its template) at an address, or a template's rows
 * (the CFA's distance from rsp per byte, derived from its code). */
struct uw_jit_where {
	Dwarf_CFI *cfi;
	uint64_t addr;       /* with cfi: where to look the rule up (already pc - 1 for a caller) */
	const uint8_t *rows; /* without: the CFA is rsp + rows[off] */
	size_t off;
};

/* The rule for a frame whose pc lies in process p's JIT code (activation:
 * the sampled frame, whose pc is exact; else a return address): true with
 * *w set; false when pc is in a mapped file, or anonymous code tally has no
 * CFI for (libdwfl's frame-pointer guess is left to try it). May read the
 * process's jitdump as far as it was written, or a few bytes of its memory
 * (process_vm_readv), when pc is new: both are rare and bounded. *j is made
 * on first need. */
bool uw_jit_find(struct uw_jit **j, struct tally_agg *a, struct tally_proc *p, Dwfl *dwfl,
		 uint64_t pc, bool activation, struct uw_jit_where *w);

/* One step from a frame (its registers in) to its caller (out: rsp the CFA,
 * rip the return address, the callee-saved registers the CFI restores or
 * keeps; the others unknown). */
enum uw_step uw_jit_step(const struct uw_jit_where *w, const struct uw_regs *in,
			 const struct uw_stack *st, struct uw_regs *out);

/* The same step with a libdw frame rule (also used for the binaries' own
 * CFI of a template). */
enum uw_step uw_cfi_step(Dwarf_CFI *cfi, uint64_t addr, const struct uw_regs *in,
			 const struct uw_stack *st, struct uw_regs *out);

/* What jit.c does with each load and move its dump reader finds, for
 * tests: the code joins *j's table (within budget bytes, 0: no limit). */
struct tally_jit_code_event;
void uw_jit_feed(struct uw_jit **j, const struct tally_jit_code_event *ev, size_t budget);
/* The rule the dump's unwinding data gives for pc (as uw_jit_find). */
bool uw_jit_lookup_dump(struct uw_jit *j, uint64_t pc, bool activation, struct uw_jit_where *w);

/* Forgets what j found of template copies at addresses whose bytes lie in
 * [start, end): new code was mapped there (exec, mmap, mprotect to
 * executable; the kernel reports no munmap, but code put again where some
 * was freed comes with a mapping). */
void uw_jit_forget(struct uw_jit *j, uint64_t start, uint64_t end);
/* For tests: a template of len bytes, known without looking in the
 * process's binaries (its rows derived from its code; false: it has
 * instructions derive_rows does not follow). *j is made on first need. */
bool uw_jit_add_template(struct uw_jit **j, const unsigned char *code, size_t len);
/* For tests: where process p's JIT state lives (its unwinding state made if
 * it has none yet). */
struct uw_jit **uw_proc_jit(struct tally_proc *p);

/* Whether the frame-pointer repair read the DWARF of image im (its
 * .debug_frame: only when the image's CFI is set up), for tests. */
bool uw_image_dwarf_read(const struct tally_image *im);

/* How many JIT code ranges and templates j knows, for tests and the session. */
size_t uw_jit_nranges(const struct uw_jit *j);

#endif
