/* DWARF unwinding at record time with libdwfl (see unwind.h). */
#define _GNU_SOURCE
#include "tally/unwind.h"
#include "tally/util.h"

#include <asm/perf_regs.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t tally_unwind_regs_mask(void)
{
	uint64_t m = (1ULL << PERF_REG_X86_64_MAX) - 1;
	/* the segment registers other than CS and SS are refused on x86-64 */
	m &= ~((1ULL << PERF_REG_X86_DS) | (1ULL << PERF_REG_X86_ES) | (1ULL << PERF_REG_X86_FS) |
	       (1ULL << PERF_REG_X86_GS));
	return m;
}

/* The sample being unwound: the callbacks read it through the Dwfl's argument. */
struct sample_ctx {
	uint64_t regs[PERF_REG_X86_64_MAX];
	uint64_t sp;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t *pcs;
	size_t n, max;
	bool stack_miss;
};

struct proc_uw {
	Dwfl *dwfl;
	struct sample_ctx *cur;
	bool attached;
	uint32_t *reported; /* images already reported as modules */
	size_t nreported, areported;
	size_t nmaps_seen;  /* re-check the maps when the process maps more */
};

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)arg;
	/* one thread only: the sample's; dwfl_getthread_frames asks for it by tid */
	if (*thread_argp)
		return 0;
	*thread_argp = (void *)1;
	return 1;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	(void)dwfl;
	struct proc_uw *u = arg;
	struct sample_ctx *c = u->cur;
	if (addr < c->sp || addr + sizeof(Dwarf_Word) > c->sp + c->stack_len || addr + sizeof(Dwarf_Word) < addr) {
		c->stack_miss = true;
		return false;
	}
	memcpy(result, c->stack + (addr - c->sp), sizeof(*result));
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct proc_uw *u = arg;
	const uint64_t *r = u->cur->regs;
	/* DWARF numbering on x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
	Dwarf_Word d[17] = {
		r[PERF_REG_X86_AX], r[PERF_REG_X86_DX], r[PERF_REG_X86_CX], r[PERF_REG_X86_BX],
		r[PERF_REG_X86_SI], r[PERF_REG_X86_DI], r[PERF_REG_X86_BP], r[PERF_REG_X86_SP],
		r[PERF_REG_X86_R8], r[PERF_REG_X86_R9], r[PERF_REG_X86_R10], r[PERF_REG_X86_R11],
		r[PERF_REG_X86_R12], r[PERF_REG_X86_R13], r[PERF_REG_X86_R14], r[PERF_REG_X86_R15],
		r[PERF_REG_X86_IP],
	};
	return dwfl_thread_state_registers(thread, 0, 17, d);
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

static char *debuginfo_path;
static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

void tally_unwind_proc_release(struct tally_proc *p)
{
	struct proc_uw *u = p->uw;
	if (!u)
		return;
	if (u->dwfl)
		dwfl_end(u->dwfl);
	free(u->reported);
	free(u);
	p->uw = NULL;
}

/* The load bias of the image open at fd and mapped by m: start minus the
 * link-time address of pgoff. */
static bool map_bias(int fd, const struct tally_map *m, uint64_t *bias)
{
	bool ok = false;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (m->pgoff >= (ph.p_offset & ~0xfffULL) && m->pgoff < ph.p_offset + ph.p_filesz) {
				*bias = m->start - (ph.p_vaddr - ph.p_offset + m->pgoff);
				ok = true;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	return ok;
}

/* Reports the process's file mappings not yet known to its Dwfl. */
static void report_maps(struct tally_agg *a, struct tally_proc *p, struct proc_uw *u)
{
	if (u->nmaps_seen == p->nmaps && u->attached)
		return;
	bool begun = false;
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct tally_map *m = &p->maps[i];
		if (m->image == TALLY_MAP_ANON)
			continue;
		const struct tally_image *im = &a->images[m->image];
		if (im->kind != TALLY_IMG_FILE)
			continue;
		bool done = false;
		for (size_t k = 0; k < u->nreported && !done; k++)
			done = u->reported[k] == m->image;
		if (done)
			continue;
		GROW(u->reported, u->areported, u->nreported + 1);
		u->reported[u->nreported++] = m->image; /* once, even if it fails */
		char path[4200];
		snprintf(path, sizeof(path), "/proc/%d/root%s", p->pid, im->path);
		if (access(path, R_OK) != 0)
			snprintf(path, sizeof(path), "%s", im->path);
		/* opened once, as every file another user may have put there: a FIFO or
		 * a device swapped in for the image never blocks the unwinder (a root
		 * daemon's), and libdwfl reads the file checked, not the path again */
		int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL);
		if (fd < 0)
			continue;
		uint64_t bias;
		if (!map_bias(fd, m, &bias)) {
			close(fd);
			continue;
		}
		if (!begun) {
			dwfl_report_begin_add(u->dwfl);
			begun = true;
		}
		/* libdwfl owns the descriptor from here (closed with the module) */
		if (!dwfl_report_elf(u->dwfl, tally_basename(im->path), path, fd, bias, false))
			close(fd);
	}
	if (begun)
		dwfl_report_end(u->dwfl, NULL, NULL);
	u->nmaps_seen = p->nmaps;
	if (!u->attached && dwfl_attach_state(u->dwfl, NULL, p->pid, &thread_cbs, u))
		u->attached = true;
}

static int cb_frame(Dwfl_Frame *state, void *arg)
{
	struct sample_ctx *c = arg;
	Dwarf_Addr pc;
	bool act;
	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
	if (c->n >= c->max)
		return DWARF_CB_ABORT;
	/* keep return addresses as they are: reports look up pc - 1 for callers */
	c->pcs[c->n++] = pc;
	return DWARF_CB_OK;
}

size_t tally_unwind_sample(struct tally_agg *a, struct tally_proc *p, const uint64_t *regs, size_t nregs,
			   const uint8_t *stack, size_t stack_len, uint64_t *pcs, size_t max, const char **why)
{
	*why = NULL;
	if (!p || nregs < 20) {
		*why = "no registers";
		return 0;
	}
	struct proc_uw *u = p->uw;
	if (!u) {
		u = xcalloc(1, sizeof(*u));
		u->dwfl = dwfl_begin(&dwfl_cbs);
		p->uw = u;
	}
	if (!u->dwfl) {
		*why = "libdwfl unavailable";
		return 0;
	}
	struct sample_ctx c;
	memset(&c, 0, sizeof(c));
	/* the kernel packs the registers of the mask in bit order */
	uint64_t mask = tally_unwind_regs_mask();
	size_t k = 0;
	for (int bit = 0; bit < PERF_REG_X86_64_MAX && k < nregs; bit++)
		if (mask & (1ULL << bit))
			c.regs[bit] = regs[k++];
	c.sp = c.regs[PERF_REG_X86_SP];
	c.stack = stack;
	c.stack_len = stack_len;
	c.pcs = pcs;
	c.max = max;
	u->cur = &c;
	report_maps(a, p, u);
	if (!u->attached) {
		*why = "no module to unwind with";
		pcs[0] = c.regs[PERF_REG_X86_IP];
		return 1;
	}
	int r = dwfl_getthread_frames(u->dwfl, p->pid, cb_frame, &c);
	u->cur = NULL;
	if (!c.n) {
		pcs[0] = c.regs[PERF_REG_X86_IP];
		c.n = 1;
	}
	/* libdwfl ends an unwind normally when it cannot read a return address from
	 * the copy: that is a short stack too */
	if (r != 0 || c.stack_miss) {
		if (c.n >= max)
			*why = "depth limit";
		else if (c.stack_miss)
			*why = "stack copy too small";
		else
			*why = "no CFI";
	}
	return c.n;
}
