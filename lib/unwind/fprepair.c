/* Frame pointers with CFI at the top of the stack (see unwind.h,
 * docs/callgraph.md): the rule at a code address from the image's CFI, kept
 * per image, and the walk over a sample's stack copy that puts back the
 * frames a frame-pointer chain skips until it rejoins the chain. */
#define _GNU_SOURCE
#include "internal.h"
#include "tally/unwind.h"
#include "tally/util.h"

#include <asm/perf_regs.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* DWARF register numbers on x86-64 */
enum { DW_RBP = 6, DW_RSP = 7, DW_RA = 16 };

uint64_t tally_unwind_fp_regs_mask(void)
{
	return (1ULL << PERF_REG_X86_BP) | (1ULL << PERF_REG_X86_SP) | (1ULL << PERF_REG_X86_IP);
}

bool tally_unwind_regs_ipspbp(const uint64_t *regs, size_t nregs, uint64_t mask, uint64_t *ip,
			      uint64_t *sp, uint64_t *bp)
{
	unsigned got = 0;
	size_t k = 0;
	/* the kernel packs the registers of the mask in bit order */
	for (int bit = 0; bit < PERF_REG_X86_64_MAX && regs && k < nregs; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		if (bit == PERF_REG_X86_IP)
			*ip = regs[k], got |= 1;
		else if (bit == PERF_REG_X86_SP)
			*sp = regs[k], got |= 2;
		else if (bit == PERF_REG_X86_BP)
			*bp = regs[k], got |= 4;
		k++;
	}
	return got == 7;
}

/* What the repair keeps per image: the file's ELF (fd -1 once read), its CFI (.eh_frame, and
 * .debug_frame when that has no FDE for an address), its loadable segments
 * (file offset -> link-time address). */
struct image_cfi {
	int fd;
	Elf *elf;
	Dwarf_CFI *eh;
	Dwarf *dw;        /* for .debug_frame: opened with the image, or never */
	Dwarf_CFI *debug; /* NULL: none, or not worth its DWARF's inflating */
	struct seg { uint64_t off, filesz, vaddr; } ph[16];
	size_t nph;
	bool failed;
};

void tally_unwind_image_release(struct tally_image *im)
{
	struct image_cfi *c = im->leaf_cfi;
	if (!c)
		return;
	if (c->eh)
		dwarf_cfi_end(c->eh);
	if (c->dw)
		dwarf_end(c->dw); /* ends its own CFI */
	if (c->elf)
		elf_end(c->elf);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	im->leaf_cfi = NULL;
}

bool uw_image_dwarf_read(const struct tally_image *im)
{
	const struct image_cfi *c = im->leaf_cfi;
	return c && c->dw;
}

/* Opens the image's file through the process (its mount namespace), and only
 * if it is still the file that was mapped (device and inode). */
static void image_cfi_load(struct image_cfi *c, const struct tally_image *im, int pid);

/* The most bytes of compressed DWARF an image's .debug_frame may cost:
 * dwarf_begin_elf inflates every compressed debug section (.debug_info
 * too, often tens of MiB), not only the frames. */
#define DEBUG_INFLATE_MAX (16u << 20)

/* Whether elf has a .debug_frame, and the bytes dwarf_begin_elf would
 * inflate reading it (*inflate: the compressed debug sections' sizes, each
 * counted up to just over the bound, an unknown one as over it). */
static bool debug_frame_cost(Elf *elf, uint64_t *inflate)
{
	size_t shstrndx;
	bool frame = false;
	*inflate = 0;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return false;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		const char *name =
			gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (!name || sh.sh_type == SHT_NOBITS)
			continue;
		if (!strcmp(name, ".debug_frame") || !strcmp(name, ".zdebug_frame"))
			frame = true;
		if (!strncmp(name, ".debug_", 7) && (sh.sh_flags & SHF_COMPRESSED)) {
			GElf_Chdr ch;
			uint64_t n = gelf_getchdr(scn, &ch) ? ch.ch_size : UINT64_MAX;
			*inflate += n < DEBUG_INFLATE_MAX ? n : DEBUG_INFLATE_MAX + 1ULL;
		} else if (!strncmp(name, ".zdebug_", 8)) {
			/* GNU's: "ZLIB", then the size big-endian */
			Elf_Data *d = elf_rawdata(scn, NULL);
			const unsigned char *b = d ? d->d_buf : NULL;
			uint64_t n = UINT64_MAX;
			if (b && d->d_size >= 12 && !memcmp(b, "ZLIB", 4)) {
				n = 0;
				for (int i = 0; i < 8; i++)
					n = n << 8 | b[4 + i];
			}
			*inflate += n < DEBUG_INFLATE_MAX ? n : DEBUG_INFLATE_MAX + 1ULL;
		}
	}
	return frame;
}

/* The image's .debug_frame, read when its CFI is set up rather than at the
 * first address .eh_frame lacks (in the middle of a recording's walks):
 * only where there is one, and its DWARF's inflating is bounded. */
static void image_debug_open(struct image_cfi *c)
{
	uint64_t inflate;
	if (!c->elf || !debug_frame_cost(c->elf, &inflate) || inflate > DEBUG_INFLATE_MAX)
		return;
	c->dw = dwarf_begin_elf(c->elf, DWARF_C_READ, NULL);
	c->debug = c->dw ? dwarf_getcfi(c->dw) : NULL;
}

/* The file is open only while its headers are read: libelf then reads what
 * it needs from its map (or has read the file), and a whole-system recording
 * does not hold a descriptor per image it has walked a stack in. */
static void image_cfi_open(struct image_cfi *c, const struct tally_image *im, int pid)
{
	image_cfi_load(c, im, pid);
	if (c->elf && elf_cntl(c->elf, ELF_C_FDREAD) != 0) {
		if (c->eh)
			dwarf_cfi_end(c->eh);
		elf_end(c->elf);
		c->elf = NULL;
		c->eh = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	image_debug_open(c);
}

static void image_cfi_load(struct image_cfi *c, const struct tally_image *im, int pid)
{
	char path[4200];
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, im->path);
	/* as every file another user may have put there: never a FIFO or a device */
	c->fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL);
	if (c->fd < 0)
		c->fd = tally_open_regular(AT_FDCWD, im->path, TALLY_OPEN_FOLLOW, 0, NULL);
	struct stat st;
	if (c->fd < 0 || fstat(c->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != im->ino ||
	    major(st.st_dev) != im->maj || minor(st.st_dev) != im->min)
		return;
	elf_version(EV_CURRENT);
	c->elf = elf_begin(c->fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (!c->elf || elf_kind(c->elf) != ELF_K_ELF || elf_getphdrnum(c->elf, &nph) != 0)
		return;
	for (size_t i = 0; i < nph && c->nph < ARRAY_SIZE(c->ph); i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(c->elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			c->ph[c->nph++] = (struct seg){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
	}
	c->eh = dwarf_getcfi_elf(c->elf);
}

/* The frame at a link-time address: .eh_frame's, else .debug_frame's (no
 * reading of the file here: on the recording's path). */
static Dwarf_Frame *image_frame(struct image_cfi *c, uint64_t addr)
{
	Dwarf_Frame *fr = NULL;
	if (c->eh && dwarf_cfi_addrframe(c->eh, addr, &fr) == 0)
		return fr;
	fr = NULL;
	if (c->debug && dwarf_cfi_addrframe(c->debug, addr, &fr) == 0)
		return fr;
	return NULL;
}

/* "register + offset" as libdw gives a CFA rule: one DW_OP_bregx. */
static bool breg(const Dwarf_Op *ops, size_t nops, unsigned *reg, int64_t *off)
{
	if (nops != 1 || ops[0].atom != DW_OP_bregx)
		return false;
	*reg = (unsigned)ops[0].number;
	*off = (int64_t)ops[0].number2;
	return true;
}

/* A register saved at CFA + off, as libdw gives an offset(N) rule:
 * DW_OP_call_frame_cfa, then the offset added (or nothing for 0). */
static bool at_cfa(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	if (!nops || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (nops == 1) {
		*off = 0;
		return true;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	if (nops == 3 && (ops[1].atom == DW_OP_consts || ops[1].atom == DW_OP_constu) &&
	    ops[2].atom == DW_OP_plus) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

static void frame_rule(Dwarf_Frame *fr, struct tally_fp_rule *out)
{
	Dwarf_Op *ops, mem[3];
	size_t nops;
	unsigned reg;
	int64_t cfa_off, off;
	memset(out, 0, sizeof(*out));
	if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || !breg(ops, nops, &reg, &cfa_off) ||
	    (reg != DW_RSP && reg != DW_RBP) || cfa_off < 8 || cfa_off >= (1 << 20))
		return;
	/* the return address where the x86-64 ABI puts it, CFA - 8; undefined in
	 * the outermost frame (_start, a thread's start) */
	if (dwarf_frame_register(fr, DW_RA, mem, &ops, &nops) != 0)
		return;
	if (!nops && ops) {
		out->cfa = TALLY_FP_CFA_END;
		return;
	}
	if (!at_cfa(ops, nops, &off) || off != -8)
		return;
	if (dwarf_frame_register(fr, DW_RBP, mem, &ops, &nops) != 0)
		return;
	if (!nops && !ops) {
		out->bp = TALLY_FP_BP_SAME;
	} else if (!nops) {
		out->bp = TALLY_FP_BP_LOST; /* undefined */
	} else if (at_cfa(ops, nops, &off) && off > -(1 << 20) && off < 0) {
		out->bp = TALLY_FP_BP_AT;
		out->bp_off = (int32_t)off;
	} else {
		out->bp = TALLY_FP_BP_LOST;
	}
	out->cfa = reg == DW_RSP ? TALLY_FP_CFA_SP : TALLY_FP_CFA_BP;
	out->cfa_off = (int32_t)cfa_off;
}

void tally_unwind_fp_rule(struct tally_agg *a, struct tally_proc *p, uint32_t image,
			  uint64_t offset, bool ra, struct tally_fp_rule *out)
{
	memset(out, 0, sizeof(*out));
	if (image >= a->nimages || a->images[image].kind != TALLY_IMG_FILE || (ra && !offset))
		return;
	struct tally_image *im = &a->images[image];
	struct image_cfi *c = im->leaf_cfi;
	if (!c) {
		c = xcalloc(1, sizeof(*c));
		c->fd = -1;
		im->leaf_cfi = c;
		image_cfi_open(c, im, p ? p->pid : im->pid);
		c->failed = !c->elf || !c->nph;
	}
	if (c->failed)
		return;
	/* a return address: the rule of the call before it (a call that does not
	 * return can be a function's last instruction) */
	if (ra)
		offset--;
	uint64_t addr = 0;
	bool found = false;
	for (size_t i = 0; i < c->nph && !found; i++)
		if (offset >= c->ph[i].off && offset < c->ph[i].off + c->ph[i].filesz) {
			addr = offset - c->ph[i].off + c->ph[i].vaddr;
			found = true;
		}
	if (!found)
		return;
	Dwarf_Frame *fr = image_frame(c, addr);
	if (!fr)
		return; /* no FDE here: JIT-like stubs, or code without unwind tables */
	frame_rule(fr, out);
	free(fr);
}

/* One repair's inputs and its result. */
struct walk {
	const uint8_t *stack;
	size_t len;
	uint64_t sp0; /* the copy's address */
	const uint64_t *chain;
	size_t nchain;
	tally_fp_rule_fn rule;
	void *ctx;
	struct tally_fp_repair *out;
};

/* The word at address addr of the copy. */
static bool read_word(const struct walk *w, uint64_t addr, uint64_t *v)
{
	if (!w->stack || addr < w->sp0 || addr - w->sp0 > w->len || w->len - (addr - w->sp0) < 8)
		return false;
	memcpy(v, w->stack + (addr - w->sp0), 8);
	return true;
}

static bool put(struct tally_fp_repair *o, uint64_t pc, int32_t from)
{
	if (o->n == TALLY_FP_OUT)
		return false;
	o->pcs[o->n] = pc;
	o->from[o->n++] = from;
	return true;
}

/* The first reason the repair could not account for every frame stays. */
static void fail(struct tally_fp_repair *o, enum tally_fp_stop why)
{
	if (o->stop == TALLY_FP_JOINED)
		o->stop = why;
}

/* The one index j >= 1 with chain[j] == ra, or 0. */
static size_t chain_find(const struct walk *w, uint64_t ra)
{
	size_t at = 0, hits = 0;
	for (size_t j = 1; j < w->nchain; j++)
		if (w->chain[j] == ra) {
			at = j;
			hits++;
		}
	return hits == 1 ? at : 0;
}

static void walk_from(struct walk *w, uint64_t pc, bool ra, uint64_t cfa_base, uint64_t bp,
		      size_t kc, uint64_t fpc, bool fpc_known);

/* The chain from its entry k on (put already), fp the frame the kernel read
 * it from (when known: in the copy). An entry is right when the function it
 * returns into had its frame at the call: its rbp then was the frame the
 * kernel read the next entry from. A function without one there is walked
 * with its CFI when the copy holds its frame; else its caller is missing. */
static void follow(struct walk *w, size_t k, uint64_t fp, bool fp_known)
{
	struct tally_fp_repair *o = w->out;
	for (;;) {
		struct tally_fp_rule r;
		if (!w->rule(w->ctx, w->chain[k], true, k, &r)) {
			/* no code there: the kernel read it from an rbp that was no
			 * frame pointer, and what follows is no better */
			o->n--;
			fail(o, TALLY_FP_LOST);
			return;
		}
		if (r.cfa == TALLY_FP_CFA_NONE) {
			/* no CFI to check it by (JIT code with frame pointers, code
			 * without unwind tables): the chain as the kernel read it */
			for (size_t j = k + 1; j < w->nchain && put(o, w->chain[j], (int32_t)j);
			     j++)
				;
			return;
		}
		if (r.cfa == TALLY_FP_CFA_END)
			return; /* the outermost frame */
		uint64_t next = 0;
		if (r.cfa == TALLY_FP_CFA_BP && k + 1 >= w->nchain)
			return; /* the kernel found no frame at its rbp: the chain's end */
		if (r.cfa == TALLY_FP_CFA_BP) {
			fp_known = fp_known && read_word(w, fp, &next);
			fp = next;
			k++;
			if (!put(o, w->chain[k], (int32_t)k))
				return;
			continue;
		}
		/* no frame of its own at the call: its caller is not in the chain */
		if (fp_known && read_word(w, fp, &next)) {
			/* its frame is in the copy: walked from the CFA of the frame at fp */
			walk_from(w, w->chain[k], true, fp + 16, next, k + 1, next, true);
			return;
		}
		if (k + 1 >= w->nchain)
			return; /* the chain ends there too: as far as it can be told, its end */
		fail(o, TALLY_FP_SHORT);
		if (r.bp != TALLY_FP_BP_SAME)
			return; /* rbp may be anything it put there: the rest is not trusted */
		/* rbp untouched: the next entry is its caller's caller */
		fp_known = false;
		k++;
		if (!put(o, w->chain[k], (int32_t)k))
			return;
	}
}

/* Walks frames with their CFI from pc (ra: a return address), the frame's
 * stack pointer cfa_base and rbp bp, until a frame is the chain's entry kc
 * (fpc the frame the kernel read it from, while known), then follows the
 * chain. */
static void walk_from(struct walk *w, uint64_t pc, bool ra, uint64_t cfa_base, uint64_t bp,
		      size_t kc, uint64_t fpc, bool fpc_known)
{
	struct tally_fp_repair *o = w->out;
	bool bp_known = true;
	for (;;) {
		struct tally_fp_rule r;
		if (!w->rule(w->ctx, pc, ra, SIZE_MAX, &r)) {
			/* a return address into no code: not a frame after all (the
			 * sampled ip and a chain's entry are code: checked before) */
			if (ra) {
				o->n--;
				o->walked--;
			}
			fail(o, TALLY_FP_LOST);
			return;
		}
		if (r.cfa == TALLY_FP_CFA_NONE) {
			fail(o, TALLY_FP_NOCFI);
			break;
		}
		if (r.cfa == TALLY_FP_CFA_END)
			return;
		if (r.cfa == TALLY_FP_CFA_BP) {
			if (!bp_known) {
				fail(o, TALLY_FP_LOST);
				return;
			}
			/* frames of the chain below this one: passed */
			while (fpc_known && fpc < bp && kc + 1 < w->nchain) {
				uint64_t n = 0;
				fpc_known = read_word(w, fpc, &n);
				fpc = n;
				kc++;
			}
			if (fpc_known && fpc == bp && kc < w->nchain) {
				/* the frame the chain read entry kc from */
				if (put(o, w->chain[kc], (int32_t)kc))
					follow(w, kc, fpc, true);
				return;
			}
		}
		if (o->walked == TALLY_FP_MAX) {
			fail(o, TALLY_FP_DEPTH);
			break;
		}
		uint64_t cfa =
			(r.cfa == TALLY_FP_CFA_SP ? cfa_base : bp) + (uint64_t)(int64_t)r.cfa_off;
		uint64_t ret, nbp = bp, at = cfa + (uint64_t)(int64_t)r.bp_off;
		/* a saved rbp below the stack pointer: an epilogue popped it already
		 * (GCC's CFI does not say so at each pop) and rbp is the caller's */
		bool saved = r.bp == TALLY_FP_BP_AT && at >= cfa_base;
		if (!read_word(w, cfa - 8, &ret) || (saved && !read_word(w, at, &nbp))) {
			/* the copy ended: its size is what stopped the walk when the
			 * frame came from rsp (a stack address, beyond the copy) or
			 * rbp was still the chain's; a CFA from an rbp reused for
			 * something else may point anywhere */
			bool beyond =
				cfa - 8 >= w->sp0 + w->len || (saved && at >= w->sp0 + w->len);
			bool copy = beyond && (r.cfa == TALLY_FP_CFA_SP ||
					       (bp_known && fpc_known && bp == fpc));
			fail(o, copy ? TALLY_FP_SHORT : TALLY_FP_LOST);
			break;
		}
		if (!ret || cfa <= cfa_base) {
			/* no return address, or a frame that does not go up the stack:
			 * not a frame (the outermost ones say so in their CFI) */
			fail(o, TALLY_FP_LOST);
			return;
		}
		if (!put(o, ret, -1))
			return;
		o->walked++;
		uint64_t frame = bp;
		if (r.bp == TALLY_FP_BP_LOST)
			bp_known = false;
		bp = nbp;
		if (r.cfa == TALLY_FP_CFA_BP) {
			/* a framed function the chain does not start from (rbp was
			 * used for something else below it): its return address,
			 * where the chain has it once, is where the chain goes on */
			size_t j = chain_find(w, ret);
			if (j && j >= kc) {
				follow(w, j, frame, true);
				return;
			}
		}
		pc = ret;
		ra = true;
		cfa_base = cfa;
	}
	/* stopped: while rbp is still the chain's, the chain goes on from there
	 * (the frames between, if any, are missing) */
	if (bp_known && fpc_known && bp == fpc && kc < w->nchain &&
	    put(o, w->chain[kc], (int32_t)kc))
		follow(w, kc, fpc, true);
}

void tally_unwind_fp_repair(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
			    size_t stack_len, const uint64_t *chain, size_t nchain,
			    tally_fp_rule_fn rule, void *ctx, struct tally_fp_repair *out)
{
	struct walk w = { stack, stack ? stack_len : 0, sp, chain, nchain, rule, ctx, out };
	out->n = out->walked = 0;
	out->stop = TALLY_FP_JOINED;
	if (!nchain)
		return;
	struct tally_fp_rule r;
	if (chain[0] != ip || !sp || !rule(ctx, ip, false, 0, &r)) {
		/* not this chain's registers, or the sample in no code the
		 * process is known to map: the chain as it is */
		out->stop = TALLY_FP_LOST;
		for (size_t j = 1; j < nchain && put(out, chain[j], (int32_t)j); j++)
			;
		return;
	}
	/* a frame pointer below the stack pointer is none: the chain from it is
	 * not the stack's */
	walk_from(&w, ip, false, sp, bp, 1, bp, bp >= sp);
	if (out->stop != TALLY_FP_LOST || nchain < 2)
		return;
	for (size_t i = 0; i < out->n; i++)
		if (out->from[i] >= 0)
			return; /* the chain joined */
	/* lost before meeting the chain (a zero return address, a frame that
	 * does not go up, a return address into no code): the chain as it is,
	 * unless the walk found frames and the chain's first entry is no code
	 * with a rule (rbp may have been no frame pointer: its chain junk) */
	if (out->n && (!rule(ctx, chain[1], true, 1, &r) || r.cfa == TALLY_FP_CFA_NONE))
		return;
	out->n = out->walked = 0;
	for (size_t j = 1; j < nchain && put(out, chain[j], (int32_t)j); j++)
		;
}

void tally_unwind_fp_follow(const uint64_t *chain, size_t nchain, bool bp_same,
			    tally_fp_rule_fn rule, void *ctx, struct tally_fp_repair *out)
{
	struct walk w = { NULL, 0, 0, chain, nchain, rule, ctx, out };
	if (nchain < 2 || (out->stop != TALLY_FP_JOINED && !bp_same))
		return;
	if (put(out, chain[1], 1))
		follow(&w, 1, 0, false);
}
