/* The CFI of JIT code at record time (internal.h): what a process's jitdump
 * says of its code (JIT_CODE_UNWINDING_INFO: an .eh_frame and its
 * .eh_frame_hdr for the next JIT_CODE_LOAD, as Python 3.13's -X perf_jit and
 * V8's --perf-prof-unwinding-info write them), and copies of a template one
 * of its binaries exports (CPython 3.12+'s perf trampoline,
 * _Py_trampoline_func_start.._Py_trampoline_func_end, copied once per Python
 * function into anonymous memory by -X perf and -X perf_jit), unwound with
 * the template's own CFI, or, as CPython's binaries carry none for it, with
 * rules derived from its few instructions. docs/callgraph.md tells the story. */
#define _GNU_SOURCE
#include "internal.h"

#include "tally/jitdump.h"
#include "tally/util.h"

#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- reading the stack copy and evaluating CFI rules ---- */

enum uw_step uw_stack_read(const struct uw_stack *st, uint64_t addr, uint64_t *val)
{
	if (addr < st->sp)
		return UW_STEP_BAD;
	if (addr - st->sp > st->len || st->len - (addr - st->sp) < 8)
		return UW_STEP_STACK;
	memcpy(val, st->data + (addr - st->sp), 8);
	return UW_STEP_OK;
}

/* The few DWARF operations CFI uses on x86-64 (libdw hands back a rule as
 * such an expression). *is_value: the result is a value (DW_OP_stack_value,
 * or a register), else the address where the value is. */
static enum uw_step eval_ops(const Dwarf_Op *ops, size_t nops, const struct uw_regs *in,
			     bool have_cfa, uint64_t cfa, const struct uw_stack *st, uint64_t *res,
			     bool *is_value)
{
	uint64_t s[8];
	size_t n = 0;
	*is_value = false;
	for (size_t i = 0; i < nops; i++) {
		unsigned op = ops[i].atom;
		uint64_t reg = 0, v = 0;
		bool push = true;
		if (op >= DW_OP_breg0 && op <= DW_OP_breg31) {
			reg = op - DW_OP_breg0;
			if (reg >= UW_NREGS || !(in->valid & (1u << reg)))
				return UW_STEP_NOCFI;
			v = in->r[reg] + ops[i].number;
		} else if (op == DW_OP_bregx) {
			if (ops[i].number >= UW_NREGS || !(in->valid & (1u << ops[i].number)))
				return UW_STEP_NOCFI;
			v = in->r[ops[i].number] + ops[i].number2;
		} else if ((op >= DW_OP_reg0 && op <= DW_OP_reg31) || op == DW_OP_regx) {
			/* the value is that register's (a location, the last operation) */
			reg = op == DW_OP_regx ? ops[i].number : op - DW_OP_reg0;
			if (i + 1 != nops || reg >= UW_NREGS || !(in->valid & (1u << reg)))
				return UW_STEP_NOCFI;
			*res = in->r[reg];
			*is_value = true;
			return UW_STEP_OK;
		} else if (op >= DW_OP_lit0 && op <= DW_OP_lit31) {
			v = op - DW_OP_lit0;
		} else if (op == DW_OP_call_frame_cfa) {
			if (!have_cfa)
				return UW_STEP_NOCFI;
			v = cfa;
		} else if (op == DW_OP_const1u || op == DW_OP_const1s || op == DW_OP_const2u ||
			   op == DW_OP_const2s || op == DW_OP_const4u || op == DW_OP_const4s ||
			   op == DW_OP_const8u || op == DW_OP_const8s || op == DW_OP_constu ||
			   op == DW_OP_consts) {
			v = ops[i].number;
		} else {
			push = false;
			if (op == DW_OP_nop)
				continue;
			if (op == DW_OP_stack_value) {
				if (i + 1 != nops)
					return UW_STEP_NOCFI;
				*is_value = true;
				continue;
			}
			if (!n)
				return UW_STEP_NOCFI;
			if (op == DW_OP_plus_uconst) {
				s[n - 1] += ops[i].number;
			} else if (op == DW_OP_deref) {
				enum uw_step r = uw_stack_read(st, s[n - 1], &s[n - 1]);
				if (r != UW_STEP_OK)
					return r;
			} else if (op == DW_OP_dup) {
				if (n == ARRAY_SIZE(s))
					return UW_STEP_NOCFI;
				s[n] = s[n - 1];
				n++;
			} else if (op == DW_OP_plus || op == DW_OP_minus || op == DW_OP_and ||
				   op == DW_OP_mul) {
				if (n < 2)
					return UW_STEP_NOCFI;
				uint64_t b = s[--n];
				s[n - 1] = op == DW_OP_plus    ? s[n - 1] + b
					   : op == DW_OP_minus ? s[n - 1] - b
					   : op == DW_OP_and   ? s[n - 1] & b
							       : s[n - 1] * b;
			} else {
				/* nothing CFI of JIT code or a template needs */
				return UW_STEP_NOCFI;
			}
		}
		if (push) {
			if (n == ARRAY_SIZE(s))
				return UW_STEP_NOCFI;
			s[n++] = v;
		}
	}
	if (!n)
		return UW_STEP_NOCFI;
	*res = s[n - 1];
	return UW_STEP_OK;
}

/* The caller's registers once the CFA is known: the return address, rsp,
 * and what the rule keeps or restores of the others. */
static enum uw_step finish_step(const struct uw_regs *in, uint64_t cfa, struct uw_regs *out)
{
	if (!(out->valid & (1u << UW_RIP)))
		return UW_STEP_END;
	if (!(out->valid & (1u << UW_RSP))) {
		out->r[UW_RSP] = cfa; /* the x86-64 ABI: the caller's rsp is the CFA */
		out->valid |= 1u << UW_RSP;
	}
	/* a caller's frame lies above its callee's: anything else is a loop */
	if (!(in->valid & (1u << UW_RSP)) || out->r[UW_RSP] <= in->r[UW_RSP])
		return UW_STEP_BAD;
	return out->r[UW_RIP] ? UW_STEP_OK : UW_STEP_END;
}

enum uw_step uw_cfi_step(Dwarf_CFI *cfi, uint64_t addr, const struct uw_regs *in,
			 const struct uw_stack *st, struct uw_regs *out)
{
	Dwarf_Frame *fr = NULL;
	if (!cfi || dwarf_cfi_addrframe(cfi, addr, &fr) != 0)
		return UW_STEP_NOCFI;
	enum uw_step r = UW_STEP_NOCFI;
	Dwarf_Op *ops;
	size_t nops;
	uint64_t cfa;
	bool val;
	memset(out, 0, sizeof(*out));
	if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || !nops)
		goto out;
	if ((r = eval_ops(ops, nops, in, false, 0, st, &cfa, &val)) != UW_STEP_OK)
		goto out;
	for (int reg = 0; reg < UW_NREGS; reg++) {
		Dwarf_Op mem[3], *o = NULL;
		size_t n = 0;
		if (dwarf_frame_register(fr, reg, mem, &o, &n) != 0)
			continue; /* unknown: the caller's value is not known */
		uint64_t v;
		if (!n) {
			/* NULL: the same value as in this frame; mem: undefined */
			if (!o && (in->valid & (1u << reg))) {
				out->r[reg] = in->r[reg];
				out->valid |= 1u << reg;
			}
			continue;
		}
		enum uw_step e = eval_ops(o, n, in, true, cfa, st, &v, &val);
		if (e == UW_STEP_OK && !val)
			e = uw_stack_read(st, v, &v);
		if (e != UW_STEP_OK) {
			if (reg == UW_RIP) {
				r = e; /* the return address is the one that counts */
				goto out;
			}
			continue;
		}
		out->r[reg] = v;
		out->valid |= 1u << reg;
	}
	r = finish_step(in, cfa, out);
out:
	free(fr);
	return r;
}

/* ---- the jitdump's code and its unwinding data ---- */

/* One load's unwinding data as an ELF image in memory that libdw reads as
 * it reads any binary's: a PT_GNU_EH_FRAME over the .eh_frame_hdr, the
 * .eh_frame before it, at the addresses the runtime encoded them for (just
 * after the code, at its size rounded up to 8). */
struct blob {
	unsigned char *img;
	size_t len;
	uint64_t base; /* the code's address the blob's addresses assume */
	Elf *elf;
	Dwarf_CFI *cfi;
	bool tried;
};

#define NO_BLOB UINT32_MAX

struct jcode {
	uint64_t start, end, order;
	uint32_t blob; /* NO_BLOB: the dump gave this code no (or empty) unwinding data */
};

/* A template a binary of the process exports, and the copies found of it. */
#define TMPL_MAX 64
struct tmpl {
	unsigned char code[TMPL_MAX];
	size_t len;
	/* the binary's own CFI for it, when it has an FDE there (libdwfl owns it) */
	Dwarf_CFI *cfi;
	uint64_t cfi_addr;  /* the template's link-time address in that CFI */
	uint8_t rows[TMPL_MAX]; /* without: CFA = rsp + rows[off] at each byte */
	bool has_rows;
};

/* Copies of templates seen, by the address looked at: a direct-mapped cache
 * (a collision only costs another read of the process's memory). */
#define COPY_CACHE 1024
struct copy_seen {
	uint64_t pc;     /* 0: empty */
	uint64_t start;  /* the copy's start, 0: pc is in no copy */
	uint32_t tmpl;
	bool act;
};

struct uw_jit {
	struct jcode *codes;
	size_t ncodes, acodes;
	bool sorted;
	struct blob *blobs;
	size_t nblobs, ablobs;
	size_t bytes;       /* what codes and blobs take, within the JIT budget */
	uint64_t order;
	struct tally_jitdump_cursor cur;
	unsigned char *buf; /* what a refresh reads the dump into */
	size_t abuf;
	uint32_t miss_wait, miss_left; /* addresses not in the dump until the next look at it */
	bool over_budget;
	/* templates, looked for in the process's binaries until found: again
	 * whenever it maps more (its first samples can come before the
	 * interpreter's library is mapped) */
	size_t tmpl_nmaps;
	bool tmpl_looked;
	struct tmpl *tmpls;
	size_t ntmpls;
	struct copy_seen *copies;
};

void uw_jit_free(struct uw_jit *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->nblobs; i++) {
		if (j->blobs[i].cfi)
			dwarf_cfi_end(j->blobs[i].cfi);
		if (j->blobs[i].elf)
			elf_end(j->blobs[i].elf);
		free(j->blobs[i].img);
	}
	free(j->blobs);
	free(j->codes);
	free(j->buf);
	free(j->tmpls);
	free(j->copies);
	tally_jitdump_cursor_release(&j->cur);
	free(j);
}

size_t uw_jit_nranges(const struct uw_jit *j)
{
	return j ? j->ncodes : 0;
}

#define ALIGN8(x) (((x) + 7) & ~(uint64_t)7)

/* The ELF image of one load's unwinding data (see struct blob): the ELF
 * header, one program header, the .eh_frame, the .eh_frame_hdr. */
static bool make_blob(struct blob *b, const struct tally_jit_code_event *ev)
{
	size_t eh_len = ev->unwind_len - ev->eh_frame_hdr_len,
	       hoff = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
	if (!eh_len || ev->size > UINT64_MAX / 2 ||
	    ev->addr > UINT64_MAX - ALIGN8(ev->size) - ev->unwind_len)
		/* an empty .eh_frame (V8's code without unwinding info) says nothing */
		return false;
	uint64_t eh_vaddr = ev->addr + ALIGN8(ev->size);
	b->len = hoff + ev->unwind_len;
	b->img = xcalloc(1, b->len);
	b->base = ev->addr;
	Elf64_Ehdr eh = { 0 };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(Elf64_Ehdr);
	eh.e_ehsize = sizeof(Elf64_Ehdr);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 1;
	Elf64_Phdr ph = { 0 };
	ph.p_type = PT_GNU_EH_FRAME;
	ph.p_flags = PF_R;
	ph.p_offset = hoff + eh_len;
	ph.p_vaddr = ph.p_paddr = eh_vaddr + eh_len;
	ph.p_filesz = ph.p_memsz = ev->eh_frame_hdr_len;
	ph.p_align = 4;
	memcpy(b->img, &eh, sizeof(eh));
	memcpy(b->img + sizeof(eh), &ph, sizeof(ph));
	memcpy(b->img + hoff, ev->unwind, ev->unwind_len);
	return true;
}

static Dwarf_CFI *blob_cfi(struct blob *b)
{
	if (!b->tried) {
		b->tried = true;
		elf_version(EV_CURRENT);
		b->elf = elf_memory((char *)b->img, b->len);
		b->cfi = b->elf ? dwarf_getcfi_elf(b->elf) : NULL;
	}
	return b->cfi;
}

static int cmp_jcode(const void *x, const void *y)
{
	const struct jcode *a = x, *b = y;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

/* The code covering addr loaded last, or NULL. Code a runtime freed and
 * loaded again overlaps: the last load names it. */
static struct jcode *find_code(struct uw_jit *j, uint64_t addr)
{
	if (!j->sorted) {
		tally_qsort(j->codes, j->ncodes, sizeof(*j->codes), cmp_jcode);
		j->sorted = true;
	}
	size_t hi = TALLY_UPPER_U64(j->codes, j->ncodes, start, addr);
	struct jcode *best = NULL;
	for (size_t i = hi; i-- > 0 && hi - i <= 64;)
		if (addr < j->codes[i].end && (!best || j->codes[i].order > best->order))
			best = &j->codes[i];
	return best;
}

struct scan_ctx {
	struct uw_jit *j;
	size_t budget;
	size_t added;
};

static void on_code(void *arg, const struct tally_jit_code_event *ev);

void uw_jit_feed(struct uw_jit **jp, const struct tally_jit_code_event *ev, size_t budget)
{
	if (!*jp)
		*jp = xcalloc(1, sizeof(**jp));
	struct scan_ctx s = { *jp, budget ? budget : SIZE_MAX, 0 };
	on_code(&s, ev);
}

bool uw_jit_lookup_dump(struct uw_jit *j, uint64_t pc, bool activation, struct uw_jit_where *w)
{
	uint64_t look = activation ? pc : pc - 1;
	struct jcode *c = j ? find_code(j, look) : NULL;
	memset(w, 0, sizeof(*w));
	if (!c || c->blob == NO_BLOB)
		return false;
	struct blob *b = &j->blobs[c->blob];
	w->cfi = blob_cfi(b);
	w->addr = look - c->start + b->base;
	return w->cfi != NULL;
}

static void on_code(void *arg, const struct tally_jit_code_event *ev)
{
	struct scan_ctx *s = arg;
	struct uw_jit *j = s->j;
	uint32_t blob = NO_BLOB;
	size_t cost = 0; /* of a blob made here */
	if (ev->move) {
		/* the same code elsewhere: its unwinding data moves with it */
		struct jcode *old = find_code(j, ev->old_addr);
		if (!old || old->start != ev->old_addr)
			return;
		blob = old->blob;
	} else if (ev->unwind) {
		size_t need = sizeof(struct blob) + sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr) +
			      ev->unwind_len;
		if (j->bytes + need > s->budget) {
			j->over_budget = true;
			return;
		}
		struct blob b = { 0 };
		if (make_blob(&b, ev)) {
			GROW(j->blobs, j->ablobs, j->nblobs + 1);
			j->blobs[j->nblobs] = b;
			blob = (uint32_t)j->nblobs++;
			j->bytes += cost = need;
		}
	}
	if (j->bytes + sizeof(struct jcode) > s->budget) {
		j->over_budget = true;
		if (cost) {
			/* the code refused: its blob, made for it alone, goes too */
			free(j->blobs[--j->nblobs].img);
			j->bytes -= cost;
		}
		return;
	}
	GROW(j->codes, j->acodes, j->ncodes + 1);
	j->codes[j->ncodes++] =
		(struct jcode){ ev->addr, ev->addr + (ev->size ? ev->size : 1), j->order++, blob };
	j->bytes += sizeof(struct jcode);
	j->sorted = false;
	s->added++;
}

/* Reads what the runtime appended to its jitdump since the last look, from
 * the descriptor the recorder checked it on: the loads and moves it holds
 * join the table. Returns how many. */
static size_t refresh_dump(struct uw_jit *j, struct tally_agg *a, struct tally_proc *p)
{
	struct stat st;
	if (!p->jitdump || p->jitdump_fd < 0 || j->cur.done || j->over_budget ||
	    fstat(p->jitdump_fd, &st) != 0 || (uint64_t)st.st_size <= j->cur.off)
		return 0;
	struct scan_ctx s = { j, a->jit_budget ? a->jit_budget : SIZE_MAX, 0 };
	size_t want = 65536;
	/* the file's whole records, a buffer at a time (a load's code is skipped, not read) */
	while (!j->cur.done && j->cur.off < (uint64_t)st.st_size && !j->over_budget) {
		if (want > j->abuf) {
			free(j->buf);
			j->buf = xmalloc(want);
			j->abuf = want;
		}
		ssize_t n;
		while ((n = pread(p->jitdump_fd, j->buf, want, (off_t)j->cur.off)) < 0 &&
		       errno == EINTR)
			;
		if (n <= 0)
			break;
		uint64_t before = j->cur.off;
		size_t need = tally_jitdump_scan(&j->cur, j->buf, (size_t)n, (uint64_t)st.st_size,
						 on_code, &s);
		if (j->cur.off != before)
			continue;
		if (need > (size_t)n && (size_t)n == want) {
			want = need; /* a record larger than the buffer */
			continue;
		}
		break; /* the rest is being written */
	}
	return s.added;
}

/* ---- templates: CPython's perf trampoline ---- */

/* The symbols that bound a template in the binary that exports it. */
static const struct {
	const char *start, *end;
} known_templates[] = {
	/* CPython 3.12+ (Python/asm_trampoline.S): one copy per Python code
	 * object, calls the evaluator in rcx: `sub $8,%rsp; call *%rcx;
	 * add $8,%rsp; ret`, an endbr64 first in CET builds */
	{ "_Py_trampoline_func_start", "_Py_trampoline_func_end" },
};

/* The CFA's distance from rsp at each byte of a template, from its
 * instructions, for a binary that has no CFI for it (CPython's has none: its
 * .S file has no .cfi directives). Straight-line code of the few
 * instructions such a trampoline is made of; anything else and the template
 * is not used. */
static bool derive_rows(const unsigned char *c, size_t len, uint8_t *rows)
{
	unsigned h = 8; /* at entry the CFA is rsp + 8: the return address */
	size_t o = 0;
	bool ret = false;
	while (o < len && !ret) {
		size_t il;
		int dh = 0;
		size_t left = len - o;
		if (left >= 4 && !memcmp(c + o, "\xf3\x0f\x1e\xfa", 4)) {
			il = 4; /* endbr64 */
		} else if (left >= 4 && c[o] == 0x48 && c[o + 1] == 0x83 &&
			   (c[o + 2] == 0xec || c[o + 2] == 0xc4) && c[o + 3] < 0x80 &&
			   !(c[o + 3] & 7)) {
			il = 4; /* sub/add $imm8,%rsp */
			dh = c[o + 2] == 0xec ? c[o + 3] : -(int)c[o + 3];
		} else if (left >= 2 && c[o] == 0xff && (c[o + 1] & 0xf8) == 0xd0) {
			il = 2; /* call *%reg */
		} else if (left >= 3 && c[o] == 0x41 && c[o + 1] == 0xff &&
			   (c[o + 2] & 0xf8) == 0xd0) {
			il = 3; /* call *%r8..%r15 */
		} else if (c[o] == 0x90) {
			il = 1; /* nop */
		} else if (c[o] == 0xc3) {
			il = 1;
			ret = true;
			if (h != 8)
				return false;
		} else {
			return false;
		}
		for (size_t k = o; k < o + il; k++)
			rows[k] = (uint8_t)h;
		if ((int)h + dh < 8 || h + dh > 255)
			return false;
		h = (unsigned)((int)h + dh);
		o += il;
	}
	return ret && o == len;
}

/* The bytes at a link-time address of a module's ELF file. */
static bool elf_bytes(Elf *elf, uint64_t addr, unsigned char *out, size_t len)
{
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) != 0)
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || addr < ph.p_vaddr ||
		    addr - ph.p_vaddr > ph.p_filesz || ph.p_filesz - (addr - ph.p_vaddr) < len)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(
			elf, (int64_t)(ph.p_offset + (addr - ph.p_vaddr)), len, ELF_T_BYTE);
		if (!d || !d->d_buf || d->d_size < len)
			return false;
		memcpy(out, d->d_buf, len);
		return true;
	}
	return false;
}

/* A template's two symbols in a module's dynamic symbol table (the
 * interpreter exports them: libpython, or a python built with
 * -export-dynamic). */
static bool find_template(Elf *elf, const char *sname, const char *ename, uint64_t *start,
			  uint64_t *end)
{
	Elf_Scn *scn = NULL;
	bool hs = false, he = false;
	while ((scn = elf_nextscn(elf, scn)) && !(hs && he)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? d->d_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n && !(hs && he); i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			const char *nm = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!nm || nm[0] != '_')
				continue;
			if (!strcmp(nm, sname)) {
				*start = sym.st_value;
				hs = true;
			} else if (!strcmp(nm, ename)) {
				*end = sym.st_value;
				he = true;
			}
		}
	}
	return hs && he && *end > *start && *end - *start <= TMPL_MAX;
}

struct tmpl_look {
	struct uw_jit *j;
};

static int look_module(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr low, void *arg)
{
	(void)ud;
	(void)name;
	(void)low;
	struct uw_jit *j = ((struct tmpl_look *)arg)->j;
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	if (!elf)
		return DWARF_CB_OK;
	for (size_t k = 0; k < ARRAY_SIZE(known_templates); k++) {
		uint64_t s = 0, e = 0;
		if (!find_template(elf, known_templates[k].start, known_templates[k].end, &s, &e))
			continue;
		struct tmpl t = { .len = (size_t)(e - s) };
		if (!elf_bytes(elf, s, t.code, t.len))
			continue;
		/* the binary's own CFI when it has some for the whole template */
		Dwarf_Addr cbias;
		Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &cbias);
		bool all = cfi != NULL;
		for (uint64_t a = s; a < e && all; a++) {
			Dwarf_Frame *fr = NULL;
			all = dwarf_cfi_addrframe(cfi, a, &fr) == 0;
			free(fr);
		}
		if (all) {
			t.cfi = cfi;
			t.cfi_addr = s;
		}
		t.has_rows = !t.cfi && derive_rows(t.code, t.len, t.rows);
		if (!t.cfi && !t.has_rows)
			continue;
		j->tmpls = xrealloc(j->tmpls, (j->ntmpls + 1) * sizeof(*j->tmpls));
		j->tmpls[j->ntmpls++] = t;
	}
	return DWARF_CB_OK;
}

/* Reads len bytes of process pid's memory at addr. */
static bool read_proc(int pid, uint64_t addr, void *out, size_t len)
{
	struct iovec l = { out, len }, r = { (void *)(uintptr_t)addr, len };
	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* Whether an indirect call (call *%reg) ends at byte o of code. */
static bool call_ends_at(const unsigned char *code, size_t o)
{
	return (o >= 2 && code[o - 2] == 0xff && (code[o - 1] & 0xf8) == 0xd0) ||
	       (o >= 3 && code[o - 3] == 0x41 && code[o - 2] == 0xff &&
		(code[o - 1] & 0xf8) == 0xd0);
}

/* Whether pc lies in a copy of one of the templates: a return address just
 * after one of its calls, or, for the sampled pc, at any of its bytes. The
 * candidate copy is read from the process's memory (once per address: the
 * answer is kept) and compared byte for byte with the template. */
static bool find_copy(struct uw_jit *j, int pid, uint64_t pc, bool act, uint64_t *start,
		      uint32_t *ti)
{
	if (!j->copies)
		j->copies = xcalloc(COPY_CACHE, sizeof(*j->copies));
	struct copy_seen *c = &j->copies[tally_hash_u64(pc ^ act) & (COPY_CACHE - 1)];
	if (c->pc == pc && c->act == act) {
		*start = c->start;
		*ti = c->tmpl;
		return c->start != 0;
	}
	*c = (struct copy_seen){ pc, 0, 0, act };
	for (uint32_t t = 0; t < j->ntmpls; t++) {
		const struct tmpl *tp = &j->tmpls[t];
		for (size_t o = 0; o < tp->len; o++) {
			if ((!act && !call_ends_at(tp->code, o)) || pc - o == 0 || pc < o)
				continue;
			unsigned char mem[TMPL_MAX];
			if (!read_proc(pid, pc - o, mem, tp->len) || memcmp(mem, tp->code, tp->len))
				continue;
			c->start = pc - o;
			c->tmpl = t;
			*start = c->start;
			*ti = t;
			return true;
		}
	}
	return false;
}

void uw_jit_forget(struct uw_jit *j, uint64_t start, uint64_t end)
{
	if (!j || !j->copies || end <= start)
		return;
	for (size_t i = 0; i < COPY_CACHE; i++) {
		/* an answer for pc compared the bytes within TMPL_MAX of it */
		uint64_t pc = j->copies[i].pc;
		if (pc &&
		    (pc >= start ? pc - start < end - start + TMPL_MAX : start - pc < TMPL_MAX))
			j->copies[i] = (struct copy_seen){ 0 };
	}
}

bool uw_jit_add_template(struct uw_jit **jp, const unsigned char *code, size_t len)
{
	if (!*jp)
		*jp = xcalloc(1, sizeof(**jp));
	struct uw_jit *j = *jp;
	struct tmpl t = { .len = len };
	if (len > TMPL_MAX)
		return false;
	memcpy(t.code, code, len);
	if (!derive_rows(t.code, t.len, t.rows))
		return false;
	t.has_rows = true;
	j->tmpls = xrealloc(j->tmpls, (j->ntmpls + 1) * sizeof(*j->tmpls));
	j->tmpls[j->ntmpls++] = t;
	j->tmpl_looked = true;
	return true;
}

/* ---- the entry points ---- */

bool uw_jit_find(struct uw_jit **jp, struct tally_agg *a, struct tally_proc *p, Dwfl *dwfl,
		 uint64_t pc, bool activation, struct uw_jit_where *w)
{
	const struct tally_map *m = tally_proc_find_map(p, pc);
	if (m && m->image != TALLY_MAP_ANON)
		return false;
	if (!*jp)
		*jp = xcalloc(1, sizeof(**jp));
	struct uw_jit *j = *jp;
	uint64_t look = activation ? pc : pc - 1;
	memset(w, 0, sizeof(*w));
	/* the dump's unwinding data */
	if (p->jitdump) {
		struct jcode *c = find_code(j, look);
		if (!c) {
			if (j->miss_left) {
				j->miss_left--;
			} else if (refresh_dump(j, a, p)) {
				j->miss_wait = 0;
				c = find_code(j, look);
			} else {
				/* not described (yet): look again after 1, 3, 7, ... 63 such
				 * addresses */
				j->miss_wait = j->miss_wait >= 63 ? 63 : 2 * j->miss_wait + 1;
				j->miss_left = j->miss_wait;
			}
		}
		if (c && c->blob != NO_BLOB) {
			struct blob *b = &j->blobs[c->blob];
			w->cfi = blob_cfi(b);
			w->addr = look - c->start + b->base;
			if (w->cfi)
				return true;
		}
	}
	/* copies of a template */
	if (!j->tmpl_looked || (!j->ntmpls && j->tmpl_nmaps != p->nmaps)) {
		j->tmpl_looked = true;
		j->tmpl_nmaps = p->nmaps;
		struct tmpl_look tl = { j };
		dwfl_getmodules(dwfl, look_module, &tl, 0);
	}
	uint64_t start;
	uint32_t ti;
	if (!j->ntmpls || !find_copy(j, p->pid, pc, activation, &start, &ti))
		return false;
	const struct tmpl *t = &j->tmpls[ti];
	if (t->cfi) {
		w->cfi = t->cfi;
		w->addr = t->cfi_addr + (look - start);
	} else {
		w->rows = t->rows;
		w->off = look - start;
	}
	return true;
}

enum uw_step uw_jit_step(const struct uw_jit_where *w, const struct uw_regs *in,
			 const struct uw_stack *st, struct uw_regs *out)
{
	if (w->cfi)
		return uw_cfi_step(w->cfi, w->addr, in, st, out);
	if (!w->rows || w->off >= TMPL_MAX || !(in->valid & (1u << UW_RSP)))
		return UW_STEP_NOCFI;
	/* a template's rows: the CFA from rsp, the return address below it,
	 * every other register as the frame left it */
	uint64_t cfa = in->r[UW_RSP] + w->rows[w->off], ra;
	enum uw_step r = uw_stack_read(st, cfa - 8, &ra);
	if (r != UW_STEP_OK)
		return r;
	/* the callee-saved registers (rbx rbp r12..r15) as the frame left them */
	const uint32_t kept = 1u << 3 | 1u << 6 | 1u << 12 | 1u << 13 | 1u << 14 | 1u << 15;
	*out = *in;
	out->valid = (in->valid & kept) | 1u << UW_RIP | 1u << UW_RSP;
	out->r[UW_RIP] = ra;
	out->r[UW_RSP] = cfa;
	return finish_step(in, cfa, out);
}
