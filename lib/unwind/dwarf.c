/* DWARF unwinding at record time with libdwfl (see unwind.h); JIT code's
 * frames with jit.c's CFI, libdwfl taking over again at their callers. */
#define _GNU_SOURCE
#include "tally/unwind.h"
#include "tally/util.h"
#include "internal.h"

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

struct proc_uw;

/* The sample being unwound: the callbacks read it through the Dwfl's argument. */
struct sample_ctx {
	uint64_t regs[PERF_REG_X86_64_MAX];
	uint64_t sp;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t *pcs;
	size_t n, max;
	bool stack_miss;
	uint64_t miss_addr; /* the first address read beyond the copy */
	/* where libdwfl starts: the sample's registers, or (restarted) the caller
	 * of JIT frames, whose pc is its return address - 1 (the call: its CFI
	 * row), that address already in pcs */
	struct uw_regs init;
	bool restarted, first;
	/* JIT code with CFI met: libdwfl was left at that frame */
	struct tally_agg *a;
	struct tally_proc *p;
	struct proc_uw *u;
	bool jit_stop, jit_act;
	struct uw_regs jit_regs;
	struct uw_jit_where jit_w;
};

struct proc_uw {
	Dwfl *dwfl;
	struct sample_ctx *cur;
	bool attached;
	uint32_t *reported; /* images already reported as modules */
	size_t nreported, areported;
	size_t nmaps_seen;  /* re-check the maps when the process maps more */
	struct uw_jit *jit; /* its JIT code's CFI (jit.c), or NULL */
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
	if (addr < c->sp || addr + sizeof(Dwarf_Word) > c->sp + c->stack_len ||
	    addr + sizeof(Dwarf_Word) < addr) {
		if (!c->stack_miss)
			c->miss_addr = addr;
		c->stack_miss = true;
		return false;
	}
	memcpy(result, c->stack + (addr - c->sp), sizeof(*result));
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct proc_uw *u = arg;
	const struct uw_regs *r = &u->cur->init;
	if (r->valid == (1u << UW_NREGS) - 1)
		return dwfl_thread_state_registers(thread, 0, UW_NREGS, r->r);
	/* a JIT frame's caller: what its CFI restored (the others stay undefined) */
	for (unsigned i = 0; i < UW_NREGS; i++)
		if ((r->valid & (1u << i)) &&
		    !dwfl_thread_state_registers(thread, (int)i, 1, &r->r[i]))
			return false;
	return true;
}

/* The sample's registers (perf's order) in DWARF's numbering on x86-64: rax
 * rdx rcx rbx rsi rdi rbp rsp r8..r15 rip. */
static void regs_to_dwarf(const uint64_t *r, struct uw_regs *d)
{
	static const int perf[UW_NREGS] = {
		PERF_REG_X86_AX,  PERF_REG_X86_DX,  PERF_REG_X86_CX,  PERF_REG_X86_BX,
		PERF_REG_X86_SI,  PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,
		PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10, PERF_REG_X86_R11,
		PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15,
		PERF_REG_X86_IP,
	};
	for (int i = 0; i < UW_NREGS; i++)
		d->r[i] = r[perf[i]];
	d->valid = (1u << UW_NREGS) - 1;
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
	uw_jit_free(u->jit); /* before the Dwfl: a template's CFI is a module's */
	if (u->dwfl)
		dwfl_end(u->dwfl);
	free(u->reported);
	free(u);
	p->uw = NULL;
}

/* The process's unwinding state, made on first need (its Dwfl NULL when
 * libdwfl could not make one). */
static struct proc_uw *proc_uw(struct tally_proc *p)
{
	struct proc_uw *u = p->uw;
	if (!u) {
		u = xcalloc(1, sizeof(*u));
		u->dwfl = dwfl_begin(&dwfl_cbs);
		p->uw = u;
	}
	return u;
}

struct uw_jit **uw_proc_jit(struct tally_proc *p)
{
	return &proc_uw(p)->jit;
}

void tally_unwind_proc_mapped(struct tally_proc *p, uint64_t start, uint64_t end)
{
	struct proc_uw *u = p->uw;
	if (u)
		uw_jit_forget(u->jit, start, end);
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
			if (m->pgoff >= (ph.p_offset & ~0xfffULL) &&
			    m->pgoff < ph.p_offset + ph.p_filesz) {
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
	if (c->first && c->restarted) {
		/* a JIT frame's caller, recorded by its return address: not JIT code with CFI */
		c->first = false;
		return DWARF_CB_OK;
	}
	c->first = false;
	if (c->n >= c->max)
		return DWARF_CB_ABORT;
	/* keep return addresses as they are: reports look up pc - 1 for callers */
	c->pcs[c->n++] = pc;
	/* JIT code that tally has CFI for, which libdwfl cannot see (no module
	 * there): leave libdwfl with this frame's registers */
	if (uw_jit_find(&c->u->jit, c->a, c->p, c->u->dwfl, pc, act, &c->jit_w)) {
		memset(&c->jit_regs, 0, sizeof(c->jit_regs));
		for (unsigned i = 0; i < UW_NREGS; i++) {
			Dwarf_Word v;
			if (dwfl_frame_reg(state, i, &v) == 0) {
				c->jit_regs.r[i] = v;
				c->jit_regs.valid |= 1u << i;
			}
		}
		c->jit_regs.r[UW_RIP] = pc;
		c->jit_regs.valid |= 1u << UW_RIP;
		c->jit_stop = true;
		c->jit_act = act;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

/* Whether the libdwfl module at a frame's pc has CFI for it. */
static bool has_cfi(Dwfl *dwfl, uint64_t look)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, look);
	if (!mod)
		return false;
	Dwarf_Addr bias;
	Dwarf_CFI *cfi[2] = { dwfl_module_eh_cfi(mod, &bias), NULL };
	Dwarf_Addr bias2 = bias;
	cfi[1] = dwfl_module_dwarf_cfi(mod, &bias2);
	for (int i = 0; i < 2; i++) {
		Dwarf_Frame *fr = NULL;
		if (cfi[i] && dwarf_cfi_addrframe(cfi[i], look - (i ? bias2 : bias), &fr) == 0) {
			free(fr);
			return true;
		}
	}
	return false;
}

/* Why libdwfl stopped short: a read beyond the stack copy is the copy's
 * fault only where the frame had CFI and the address lies above the copy;
 * libdwfl's frame-pointer guess in code without CFI (JIT code: rbp is no
 * frame pointer there) reads anywhere. */
static const char *short_why(struct proc_uw *u, const struct sample_ctx *c)
{
	if (c->n >= c->max)
		return "depth limit";
	uint64_t pc = c->pcs[c->n - 1];
	bool act = c->n == 1 && !c->restarted;
	if (!has_cfi(u->dwfl, act ? pc : pc - 1))
		return "no CFI";
	if (c->stack_miss && c->miss_addr >= c->sp + c->stack_len)
		return "stack copy too small";
	return "unreadable frame";
}

size_t tally_unwind_sample(struct tally_agg *a, struct tally_proc *p, const uint64_t *regs,
			   size_t nregs, const uint8_t *stack, size_t stack_len, uint64_t *pcs,
			   size_t max, const char **why)
{
	*why = NULL;
	if (!p || nregs < 20) {
		*why = "no registers";
		return 0;
	}
	struct proc_uw *u = proc_uw(p);
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
	regs_to_dwarf(c.regs, &c.init);
	c.a = a;
	c.p = p;
	c.u = u;
	struct uw_stack st = { c.sp, stack, stack_len };
	int r = 0;
	enum uw_step js = UW_STEP_OK;
	for (;;) {
		c.first = true;
		c.jit_stop = false;
		r = dwfl_getthread_frames(u->dwfl, p->pid, cb_frame, &c);
		if (!c.jit_stop)
			break;
		/* JIT frames, by their CFI, as long as the callers are JIT code tally
		 * has CFI for; then libdwfl again from the first caller that is not */
		struct uw_regs cur = c.jit_regs, out;
		struct uw_jit_where w = c.jit_w;
		for (;;) {
			js = uw_jit_step(&w, &cur, &st, &out);
			if (js != UW_STEP_OK)
				break;
			if (c.n >= max) {
				js = UW_STEP_NOCFI;
				break;
			}
			c.pcs[c.n++] = out.r[UW_RIP];
			cur = out;
			if (!uw_jit_find(&u->jit, a, p, u->dwfl, out.r[UW_RIP], false, &w))
				break;
		}
		if (js != UW_STEP_OK)
			break;
		c.init = cur;
		c.init.r[UW_RIP] = cur.r[UW_RIP] - 1;
		c.restarted = true;
		c.stack_miss = false;
	}
	u->cur = NULL;
	if (!c.n) {
		pcs[0] = c.regs[PERF_REG_X86_IP];
		c.n = 1;
	}
	if (c.jit_stop) {
		/* stopped in JIT code, by its CFI */
		if (c.n >= max)
			*why = "depth limit";
		else if (js == UW_STEP_STACK)
			*why = "stack copy too small";
		else if (js == UW_STEP_NOCFI)
			*why = "no CFI";
		else if (js == UW_STEP_BAD)
			*why = "unreadable frame";
	} else if (r != 0 || c.stack_miss) {
		/* libdwfl ends an unwind normally when it cannot read a return
		 * address from the copy: that is a short stack too */
		*why = short_why(u, &c);
	}
	return c.n;
}
