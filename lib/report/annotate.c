/* Annotation of one function (see annotate.h): its sampled addresses from the
 * database, their source lines from DWARF or a jitdump, its instructions from
 * capstone. Works on link-time addresses, as objdump and the line table do. */
#define _GNU_SOURCE
#include "tally/annotate.h"
#include "tally/jitdump.h"
#include "tally/demangle.h"
#include "tally/util.h"

#include <capstone/capstone.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CODE_LIMIT (4u << 20) /* bytes of one function we disassemble at most */

struct pt {
	uint64_t addr, n, r; /* r: the number of samples, n their value */
};

struct cand {
	uint32_t image;
	const char *name;
	uint64_t addr, size, samples, raw;
	struct pt *pts;
	size_t npts, apts;
};

/* Entry i's number of samples of event ev: the counts are the weights once
 * the database is weighed, and the sample counts are then beside them. */
static uint64_t raw_of(const struct tally_db *db, size_t i, int ev)
{
	const uint64_t *raw = db->weighed ? db->weights : db->counts;
	return raw ? raw[i * (size_t)db->nevents + (size_t)ev] : 0;
}

static bool image_matches(const struct tally_db_image *im, const char *want)
{
	return !strcmp(im->name, want) || !strcmp(im->path, want) ||
	       !strcmp(tally_basename(im->path), want);
}

static int cmp_pt(const void *a, const void *b)
{
	const struct pt *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The sampled addresses of a function, sorted and each once (their samples
 * added), into f's points; returns how many remain in pts. */
static size_t points_merge(struct tally_annot_func *f, struct pt *pts, size_t n)
{
	tally_qsort(pts, n, sizeof(*pts), cmp_pt);
	size_t u = 0;
	for (size_t i = 0; i < n; i++) {
		if (u && pts[u - 1].addr == pts[i].addr) {
			pts[u - 1].n += pts[i].n;
			pts[u - 1].r += pts[i].r;
		} else
			pts[u++] = pts[i];
	}
	f->npts = u;
	f->pt_addr = xmalloc((u + 1) * sizeof(uint64_t));
	f->pt_samples = xmalloc((u + 1) * sizeof(uint64_t));
	f->pt_raw = xmalloc((u + 1) * sizeof(uint64_t));
	for (size_t i = 0; i < u; i++) {
		f->pt_addr[i] = pts[i].addr;
		f->pt_samples[i] = pts[i].n;
		f->pt_raw[i] = pts[i].r;
	}
	return u;
}

/* ---- building one function ---- */

struct builder {
	struct tally_annot_func *f;
	struct tally_hidx idx; /* (file, line) -> lines */
	size_t alines, afiles, ainsns;
	uint32_t *ins_file, *ins_line; /* per instruction, before lines are sorted */
	const char *comp_dir; /* the CU's compilation directory: relative file names are under it */
};

/* a/b/../c/./d as a/c/d: the path the compiler meant, without asking the file system */
static void normalize(char *p)
{
	char *out = p, *in = p;
	bool abs = *p == '/';
	char **segs = NULL;
	size_t ns = 0, as = 0;
	while (*in) {
		while (*in == '/')
			in++;
		if (!*in)
			break;
		char *seg = in;
		while (*in && *in != '/')
			in++;
		if (*in)
			*in++ = '\0';
		if (!strcmp(seg, "."))
			continue;
		if (!strcmp(seg, "..") && ns && strcmp(segs[ns - 1], "..")) {
			ns--;
			continue;
		}
		GROW(segs, as, ns + 1);
		segs[ns++] = seg;
	}
	struct strbuf sb = STRBUF_INIT;
	if (abs)
		strbuf_addch(&sb, '/');
	for (size_t i = 0; i < ns; i++)
		strbuf_addf(&sb, "%s%s", i ? "/" : "", segs[i]);
	memcpy(out, sb.buf ? sb.buf : "", sb.len + 1);
	strbuf_release(&sb);
	free(segs);
}

static uint32_t intern_file(struct builder *b, const char *name)
{
	struct tally_annot_func *f = b->f;
	struct strbuf full = STRBUF_INIT;
	/* (a relative compilation directory libdw has already joined is not
	 * joined twice: lib/symbols/dwarf.c, abs_srcpath) */
	size_t dl = b->comp_dir ? strlen(b->comp_dir) : 0;
	if (name[0] != '/' && b->comp_dir &&
	    (b->comp_dir[0] == '/' || strncmp(name, b->comp_dir, dl) || name[dl] != '/'))
		strbuf_addf(&full, "%s/", b->comp_dir);
	strbuf_addstr(&full, name);
	if (b->comp_dir)
		normalize(full.buf);
	for (size_t i = 0; i < f->nfiles; i++)
		if (!strcmp(f->files[i], full.buf)) {
			strbuf_release(&full);
			return (uint32_t)i;
		}
	GROW(f->files, b->afiles, f->nfiles + 1);
	f->files[f->nfiles] = xstrdup(full.buf);
	strbuf_release(&full);
	return (uint32_t)f->nfiles++;
}

struct line_key {
	uint32_t file, line;
};

static bool line_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_annot_func *f = ctx;
	const struct line_key *k = key;
	return f->lines[idx].file == k->file && f->lines[idx].line == k->line;
}

static void add_line(struct builder *b, uint32_t file, uint32_t line, uint64_t n, uint64_t r)
{
	struct tally_annot_func *f = b->f;
	struct line_key k = { file, line };
	uint64_t h = tally_hash_u64(((uint64_t)file << 32) | line);
	uint32_t i = tally_hidx_get(&b->idx, h, &k, line_eq, f);
	if (i == TALLY_HIDX_NONE) {
		GROW(f->lines, b->alines, f->nlines + 1);
		f->lines[f->nlines] = (struct tally_annot_line){ file, line, 0, 0 };
		tally_hidx_put(&b->idx, h, (uint32_t)f->nlines);
		i = (uint32_t)f->nlines++;
	}
	f->lines[i].samples += n;
	f->lines[i].raw += r;
	if (file == f->main_file && line) {
		if (!f->first_line || line < f->first_line)
			f->first_line = line;
		if (line > f->last_line)
			f->last_line = line;
	}
}

static int cmp_line(const void *a, const void *b)
{
	const struct tally_annot_line *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

struct line_find_key {
	const struct tally_annot_func *f;
	struct tally_annot_line line;
};

static bool line_before(const void *ctx, size_t i)
{
	const struct line_find_key *k = ctx;
	return cmp_line(&k->f->lines[i], &k->line) < 0;
}

uint32_t tally_annot_line_find(const struct tally_annot_func *f, uint32_t file, uint32_t line)
{
	struct line_find_key k = { f, { file, line, 0, 0 } };
	size_t lo = tally_partition(f->nlines, line_before, &k);
	return lo < f->nlines && !cmp_line(&f->lines[lo], &k.line) ? (uint32_t)lo
								   : TALLY_ANNOT_NONE;
}

static void set_note(char **note, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_note(char **note, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	free(*note);
	*note = strbuf_detach(&sb);
}

static bool cs_machine(uint32_t mach, cs_arch *arch, cs_mode *mode, bool big)
{
	switch (mach) {
	case EM_X86_64: *arch = CS_ARCH_X86; *mode = CS_MODE_64; return true;
	case EM_386: *arch = CS_ARCH_X86; *mode = CS_MODE_32; return true;
	case EM_AARCH64: *arch = CS_ARCH_ARM64; *mode = CS_MODE_ARM; break;
	case EM_ARM: *arch = CS_ARCH_ARM; *mode = CS_MODE_ARM; break;
	case EM_PPC64: *arch = CS_ARCH_PPC; *mode = CS_MODE_64; break;
	case EM_S390: *arch = CS_ARCH_SYSZ; *mode = CS_MODE_BIG_ENDIAN; return true;
	default: return false;
	}
	if (big)
		*mode = (cs_mode)(*mode | CS_MODE_BIG_ENDIAN);
	return true;
}

/* Every instruction of code (loaded at base); bytes capstone cannot decode
 * become one-byte "(bad)" entries and decoding resumes after them. */
static void disassemble(struct builder *b, const unsigned char *code, size_t len, uint64_t base,
			uint32_t mach, bool big)
{
	struct tally_annot_func *f = b->f;
	cs_arch arch;
	cs_mode mode;
	csh h;
	if (!cs_machine(mach, &arch, &mode, big)) {
		set_note(&f->code_note, "no disassembler for ELF machine %" PRIu32, mach);
		return;
	}
	if (cs_open(arch, mode, &h) != CS_ERR_OK) {
		set_note(&f->code_note, "capstone cannot open ELF machine %" PRIu32, mach);
		return;
	}
	if (len > CODE_LIMIT) {
		set_note(&f->code_note, "only the first %u bytes of %zu are disassembled",
			 CODE_LIMIT, len);
		len = CODE_LIMIT;
	}
	size_t off = 0;
	while (off < len) {
		cs_insn *ins = NULL;
		size_t cnt = cs_disasm(h, code + off, len - off, base + off, 0, &ins);
		for (size_t i = 0; i < cnt; i++) {
			GROW(f->insns, b->ainsns, f->ninsns + 1);
			struct strbuf t = STRBUF_INIT;
			strbuf_addstr(&t, ins[i].mnemonic);
			if (ins[i].op_str[0])
				strbuf_addf(&t, " %s", ins[i].op_str);
			f->insns[f->ninsns++] =
				(struct tally_annot_insn){ ins[i].address,    ins[i].size,     0, 0,
							   strbuf_detach(&t), TALLY_ANNOT_NONE };
			off += ins[i].size;
		}
		if (cnt)
			cs_free(ins, cnt);
		if (off < len) {
			GROW(f->insns, b->ainsns, f->ninsns + 1);
			f->insns[f->ninsns++] = (struct tally_annot_insn){
				base + off, 1, 0, 0, xstrdup("(bad)"), TALLY_ANNOT_NONE
			};
			off++;
		}
	}
	cs_close(&h);
}

/* The x86 PLT entries of elf as (address, name@plt): the lazy-binding .plt
 * (entry k + 1 for the k-th .rela.plt relocation) or, with IBT, .plt.sec
 * (entry k), 16 bytes each, as binutils' objdump names them. */
struct plt_name {
	uint64_t addr;
	char *name;
};

static size_t plt_names(Elf *elf, struct plt_name **out)
{
	*out = NULL;
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return 0;
	Elf_Scn *scn = NULL, *rela = NULL;
	GElf_Shdr plt = { 0 }, pltsec = { 0 }, rsh;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n)
			continue;
		if (!strcmp(n, ".rela.plt") && sh.sh_type == SHT_RELA)
			rela = scn;
		else if (!strcmp(n, ".plt") && sh.sh_type == SHT_PROGBITS)
			plt = sh;
		else if (!strcmp(n, ".plt.sec") && sh.sh_type == SHT_PROGBITS)
			pltsec = sh;
	}
	if (!rela || !gelf_getshdr(rela, &rsh) || !rsh.sh_entsize ||
	    (!plt.sh_size && !pltsec.sh_size))
		return 0;
	Elf_Scn *symscn = elf_getscn(elf, rsh.sh_link);
	GElf_Shdr ssh;
	Elf_Data *rd = elf_getdata(rela, NULL), *sd = symscn ? elf_getdata(symscn, NULL) : NULL;
	if (!rd || !sd || !gelf_getshdr(symscn, &ssh))
		return 0;
	size_t n = rsh.sh_size / rsh.sh_entsize, k = 0;
	*out = xcalloc(n + 1, sizeof(**out));
	for (size_t i = 0; i < n; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		if (!gelf_getrela(rd, (int)i, &r) ||
		    !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		const char *name = elf_strptr(elf, ssh.sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		uint64_t at = pltsec.sh_size ? pltsec.sh_addr + 16 * i : plt.sh_addr + 16 * (i + 1);
		uint64_t end = pltsec.sh_size ? pltsec.sh_addr + pltsec.sh_size
					      : plt.sh_addr + plt.sh_size;
		if (at + 16 > end)
			continue;
		struct strbuf sb = STRBUF_INIT;
		strbuf_addf(&sb, "%s@plt", name);
		(*out)[k++] = (struct plt_name){ at, strbuf_detach(&sb) };
	}
	return k;
}

/* A direct call's or jump's target named as objdump and perf do: the
 * function's own code as <name+0xOFF>, another function <name>, a PLT entry
 * <name@plt> (x86; operands that are one hex address only). */
static void name_targets(struct tally_annot_func *f, Dwfl_Module *mod, GElf_Addr bias, Elf *elf,
			 uint32_t mach)
{
	if (mach != EM_X86_64 && mach != EM_386)
		return;
	struct plt_name *plt = NULL;
	size_t nplt = elf ? plt_names(elf, &plt) : 0;
	for (size_t i = 0; i < f->ninsns; i++) {
		char *t = f->insns[i].text;
		bool branch = t[0] == 'j' || !strncmp(t, "call ", 5);
		const char *op = strchr(t, ' ');
		if (!branch || !op || strncmp(op + 1, "0x", 2))
			continue;
		char *end;
		uint64_t to = strtoull(op + 3, &end, 16);
		if (*end)
			continue;
		struct strbuf sb = STRBUF_INIT;
		if (to >= f->addr && to < f->addr + f->size) {
			strbuf_addf(&sb, "%s <%s+0x%" PRIx64 ">", t, f->name, to - f->addr);
		} else {
			const char *name = NULL;
			for (size_t k = 0; k < nplt && !name; k++)
				if (plt[k].addr == to)
					name = plt[k].name;
			GElf_Off off = 0;
			GElf_Sym sym;
			if (!name && mod)
				name = dwfl_module_addrinfo(mod, to + bias, &off, &sym, NULL, NULL,
							    NULL);
			if (!name || !*name) {
				strbuf_release(&sb);
				continue;
			}
			if (off)
				strbuf_addf(&sb, "%s <%s+0x%" PRIx64 ">", t, name, (uint64_t)off);
			else
				strbuf_addf(&sb, "%s <%s>", t, name);
		}
		free(f->insns[i].text);
		f->insns[i].text = strbuf_detach(&sb);
	}
	for (size_t k = 0; k < nplt; k++)
		free(plt[k].name);
	free(plt);
}

/* The instruction containing addr, or NULL. */
static struct tally_annot_insn *insn_at(struct tally_annot_func *f, uint64_t addr)
{
	size_t lo = TALLY_UPPER_U64(f->insns, f->ninsns, addr, addr);
	if (!lo)
		return NULL;
	struct tally_annot_insn *in = &f->insns[lo - 1];
	return addr < in->addr + in->size ? in : NULL;
}

/* The code bytes of [addr, addr + size) from the section of the ELF file that holds them. */
static const unsigned char *elf_code(Elf *elf, uint64_t addr, uint64_t size, size_t *len)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) ||
		    sh.sh_type != SHT_PROGBITS)
			continue;
		if (addr < sh.sh_addr || addr >= sh.sh_addr + sh.sh_size)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		uint64_t off = addr - sh.sh_addr;
		if (!d || !d->d_buf || off >= d->d_size)
			return NULL;
		*len = (size_t)(size < d->d_size - off ? size : d->d_size - off);
		return (const unsigned char *)d->d_buf + off;
	}
	return NULL;
}

static void annotate_dwarf(struct builder *b, const struct tally_db *db, struct tally_resolver *res,
			   struct cand *c)
{
	struct tally_annot_func *f = b->f;
	const struct tally_db_image *di = &db->images[c->image];
	GElf_Addr bias = 0;
	Dwfl_Module *mod = tally_resolver_module(res, c->image, &bias);
	if (!mod) {
		const char *why = tally_resolver_note(res, c->image);
		if (!strcmp(di->kind, "kernel"))
			why = "kernel functions are named from the database's kernel.syms, which has no code or line table";
		set_note(&f->line_note, "%s", why ? why : "its file was not found");
		set_note(&f->code_note, "%s", why ? why : "its file was not found");
		return;
	}
	/* lines: the function's own rows of its CU's line table */
	Dwarf_Addr dbias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, c->addr + bias, &dbias);
	if (!cu) {
		set_note(
			&f->line_note,
			"'%s' has no DWARF line table for it (build with -g, or install its debug package)",
			di->path);
	} else {
		Dwarf_Addr lo = c->addr + bias - dbias, hi = lo + c->size;
		Dwarf_Attribute at;
		b->comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &at));
		Dwarf_Die *scopes = NULL;
		int ns = dwarf_getscopes(cu, lo, &scopes);
		for (int i = ns - 1; i >= 0; i--)
			if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
				const char *df = dwarf_decl_file(&scopes[i]);
				int dl = 0;
				if (df) {
					f->main_file = intern_file(b, df);
					if (dwarf_decl_line(&scopes[i], &dl) == 0 && dl > 0)
						f->first_line = f->last_line = (uint32_t)dl;
				}
				break;
			}
		free(scopes);
		Dwarf_Lines *lines;
		size_t nl = 0;
		if (dwarf_getsrclines(cu, &lines, &nl) == 0) {
			for (size_t i = 0; i < nl; i++) {
				Dwarf_Line *l = dwarf_onesrcline(lines, i);
				Dwarf_Addr la;
				int ln;
				const char *file;
				if (!l || dwarf_lineaddr(l, &la) || la < lo || la >= hi ||
				    dwarf_lineno(l, &ln) || ln <= 0 ||
				    !(file = dwarf_linesrc(l, NULL, NULL)))
					continue;
				if (f->main_file == TALLY_ANNOT_NONE)
					f->main_file = intern_file(b, file);
				add_line(b, intern_file(b, file), (uint32_t)ln, 0, 0);
			}
		}
		if (!f->nlines)
			set_note(&f->line_note, "'%s' has no line table rows for it", di->path);
	}
	/* code */
	GElf_Addr ebias;
	Elf *elf = dwfl_module_getelf(mod, &ebias);
	GElf_Ehdr eh;
	size_t len = 0;
	const unsigned char *code = elf ? elf_code(elf, c->addr, c->size, &len) : NULL;
	if (!code || !len || !gelf_getehdr(elf, &eh))
		set_note(&f->code_note,
			 "'%s' has no code bytes for it (a damaged or stripped-of-code file)",
			 di->path);
	else {
		disassemble(b, code, len, c->addr, eh.e_machine,
			    eh.e_ident[EI_DATA] == ELFDATA2MSB);
		name_targets(f, mod, bias, elf, eh.e_machine);
	}
	/* where each sampled address and each instruction comes from */
	for (size_t i = 0; i < c->npts; i++) {
		Dwfl_Line *dl = cu ? dwfl_module_getsrc(mod, c->pts[i].addr + bias) : NULL;
		int ln = 0;
		const char *file = dl ? dwfl_lineinfo(dl, NULL, &ln, NULL, NULL, NULL) : NULL;
		if (file && ln > 0)
			add_line(b, intern_file(b, file), (uint32_t)ln, c->pts[i].n, c->pts[i].r);
		else
			f->no_line += c->pts[i].n, f->no_line_raw += c->pts[i].r;
	}
	b->ins_file = xmalloc((f->ninsns + 1) * sizeof(uint32_t));
	b->ins_line = xmalloc((f->ninsns + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < f->ninsns; i++) {
		Dwfl_Line *dl = cu ? dwfl_module_getsrc(mod, f->insns[i].addr + bias) : NULL;
		int ln = 0;
		const char *file = dl ? dwfl_lineinfo(dl, NULL, &ln, NULL, NULL, NULL) : NULL;
		b->ins_file[i] = file && ln > 0 ? intern_file(b, file) : TALLY_ANNOT_NONE;
		b->ins_line[i] = file && ln > 0 ? (uint32_t)ln : 0;
		if (file && ln > 0)
			add_line(b, b->ins_file[i], (uint32_t)ln, 0, 0);
	}
}

static void annotate_jit(struct builder *b, struct tally_resolver *res, struct cand *c)
{
	struct tally_annot_func *f = b->f;
	uint32_t mach = 0;
	const struct tally_jit_func *jf = tally_resolver_jit_func(res, c->image, c->addr, &mach);
	if (!jf) {
		const char *why = tally_resolver_note(res, c->image);
		set_note(
			&f->line_note, "%s",
			why ? why
			    : "named by a perf map, which has no line records (a jitdump has them)");
		set_note(
			&f->code_note, "%s",
			why ? why
			    : "named by a perf map, which has no copy of the code (a jitdump has it)");
		return;
	}
	/* the jitdump's files: resolver strings, looked up through its line API */
	for (size_t i = 0; i < jf->nlines; i++) {
		const char *file;
		unsigned ln;
		if (tally_resolver_jit_line(res, c->image, jf->lines[i].addr, &file, &ln) == 0) {
			uint32_t fi = intern_file(b, file);
			if (f->main_file == TALLY_ANNOT_NONE)
				f->main_file = fi;
			add_line(b, fi, ln, 0, 0);
		}
	}
	if (!f->nlines)
		set_note(&f->line_note, "the jitdump has no line records for it");
	if (jf->code && jf->size)
		disassemble(b, jf->code, (size_t)jf->size, jf->addr, mach, false);
	else
		set_note(&f->code_note, "the jitdump has no code bytes for it");
	for (size_t i = 0; i < c->npts; i++) {
		const char *file;
		unsigned ln;
		if (tally_resolver_jit_line(res, c->image, c->pts[i].addr, &file, &ln) == 0)
			add_line(b, intern_file(b, file), ln, c->pts[i].n, c->pts[i].r);
		else
			f->no_line += c->pts[i].n, f->no_line_raw += c->pts[i].r;
	}
	b->ins_file = xmalloc((f->ninsns + 1) * sizeof(uint32_t));
	b->ins_line = xmalloc((f->ninsns + 1) * sizeof(uint32_t));
	for (size_t i = 0; i < f->ninsns; i++) {
		const char *file;
		unsigned ln;
		bool ok = tally_resolver_jit_line(res, c->image, f->insns[i].addr, &file, &ln) == 0;
		b->ins_file[i] = ok ? intern_file(b, file) : TALLY_ANNOT_NONE;
		b->ins_line[i] = ok ? ln : 0;
	}
}

static void annotate_one(const struct tally_db *db, struct tally_resolver *res, struct cand *c,
			 uint64_t image_samples, struct tally_annot_func *f)
{
	memset(f, 0, sizeof(*f));
	f->image = c->image;
	f->name = xstrdup(c->name);
	f->addr = c->addr;
	f->size = c->size;
	f->samples = c->samples;
	f->raw = c->raw;
	f->image_samples = image_samples;
	f->main_file = TALLY_ANNOT_NONE;
	struct builder b;
	memset(&b, 0, sizeof(b));
	b.f = f;
	c->npts = points_merge(f, c->pts, c->npts);
	if (!strcmp(db->images[c->image].kind, "jit"))
		annotate_jit(&b, res, c);
	else
		annotate_dwarf(&b, db, res, c);
	for (size_t i = 0; i < c->npts; i++) {
		struct tally_annot_insn *in = insn_at(f, c->pts[i].addr);
		if (in) {
			in->samples += c->pts[i].n;
			in->raw += c->pts[i].r;
		}
	}
	tally_qsort(f->lines, f->nlines, sizeof(*f->lines), cmp_line);
	for (size_t i = 0; i < f->ninsns; i++)
		if (b.ins_file && b.ins_file[i] != TALLY_ANNOT_NONE)
			f->insns[i].src = tally_annot_line_find(f, b.ins_file[i], b.ins_line[i]);
	free(b.ins_file);
	free(b.ins_line);
	tally_hidx_release(&b.idx);
}

/* ---- an inlined function ---- */

struct iline {
	const char *file;
	uint32_t line;
	uint64_t n, r;
};

struct into {
	const char *name; /* a function it was inlined into */
	uint64_t n;
};

struct icand {
	uint32_t image;
	uint64_t id; /* the inlined function's DWARF id (tally_srcframe.addr) */
	const char *name;
	uint64_t samples, raw;
	struct pt *pts;
	size_t npts, apts;
	struct iline *ls;
	size_t nls, als;
	struct into *into;
	size_t ninto, ainto;
};

static int cmp_func(const void *a, const void *b);

static int cmp_into(const void *a, const void *b)
{
	const struct into *x = a, *y = b;
	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The line where the inlined function with DWARF id `id` is declared, or 0. */
static uint32_t inline_decl_line(struct tally_resolver *res, uint32_t image, uint64_t id)
{
	GElf_Addr bias;
	Dwfl_Module *mod = tally_resolver_module(res, image, &bias);
	Dwarf_Addr dbias;
	Dwarf *dw = mod ? dwfl_module_getdwarf(mod, &dbias) : NULL;
	Dwarf_Die die;
	int line = 0;
	if (!dw || !dwarf_offdie(dw, id, &die) || dwarf_decl_line(&die, &line) != 0 || line < 0)
		return 0;
	return (uint32_t)line;
}

static void annotate_inline_one(const struct tally_db *db, struct tally_resolver *res,
				struct icand *c, uint64_t image_samples, struct tally_annot_func *f)
{
	(void)db;
	memset(f, 0, sizeof(*f));
	f->image = c->image;
	f->name = xstrdup(c->name);
	f->inlined = true;
	f->samples = c->samples;
	f->raw = c->raw;
	f->image_samples = image_samples;
	f->main_file = TALLY_ANNOT_NONE;
	struct builder b;
	memset(&b, 0, sizeof(b));
	b.f = f;
	/* the file with most samples is where the function is written */
	const char *mainf = NULL;
	uint64_t best = 0;
	for (size_t i = 0; i < c->nls; i++) {
		uint64_t s = 0;
		for (size_t k = 0; k < c->nls; k++)
			if (c->ls[k].file && c->ls[i].file && !strcmp(c->ls[k].file, c->ls[i].file))
				s += c->ls[k].n;
		if (c->ls[i].file && s > best) {
			best = s;
			mainf = c->ls[i].file;
		}
	}
	if (mainf) {
		f->main_file = intern_file(&b, mainf);
		uint32_t decl = inline_decl_line(res, c->image, c->id);
		if (decl)
			f->first_line = f->last_line = decl;
	}
	for (size_t i = 0; i < c->nls; i++) {
		if (c->ls[i].file && c->ls[i].line)
			add_line(&b, intern_file(&b, c->ls[i].file), c->ls[i].line, c->ls[i].n,
				 c->ls[i].r);
		else
			f->no_line += c->ls[i].n, f->no_line_raw += c->ls[i].r;
	}
	tally_qsort(f->lines, f->nlines, sizeof(*f->lines), cmp_line);
	if (!f->nlines)
		set_note(&f->line_note, "DWARF gives no source line for its code");
	c->npts = points_merge(f, c->pts, c->npts);
	tally_qsort(c->into, c->ninto, sizeof(*c->into), cmp_into);
	f->inlined_into = xcalloc(c->ninto + 1, sizeof(char *));
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < c->ninto; i++) {
		f->inlined_into[f->ninlined_into++] = xstrdup(c->into[i].name);
		if (i < 3)
			strbuf_addf(&sb, "%s%s", i ? ", " : "", c->into[i].name);
	}
	if (c->ninto > 3)
		strbuf_addf(&sb, " and %zu more", c->ninto - 3);
	set_note(
		&f->code_note,
		"an inlined function has no code of its own: its instructions are in the function%s it was inlined into (%s): annotate %s with --asm",
		c->ninto == 1 ? "" : "s", sb.buf, c->ninto == 1 ? "it" : "those");
	strbuf_release(&sb);
	tally_hidx_release(&b.idx);
}

/* annotate NAME where NAME is an inlined function: the samples whose inline
 * chain has it (its innermost instance), at the line within it. 0 with the
 * functions in *out (maybe none), or -EINVAL (several images). */
static int annotate_inlined(const struct tally_db *db, struct tally_resolver *res,
			    const struct tally_annotate_opts *o, const uint64_t *img_samples,
			    struct tally_annot_func **out, size_t *n)
{
	struct icand *cands = NULL;
	size_t nc = 0, ac = 0;
	int ret = 0;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (o->image && !image_matches(&db->images[pf->image], o->image))
			continue;
		for (size_t i = pf->first; i < pf->end; i++) {
			uint64_t cnt = db->counts[i * (size_t)db->nevents + (size_t)o->event];
			uint64_t raw = raw_of(db, i, o->event);
			if (!cnt)
				continue;
			const struct tally_srcframe *fr;
			size_t nf = tally_resolve_frames(res, pf->image, db->entries[i].offset,
							 false, &fr);
			size_t k = 0;
			while (k < nf && !(fr[k].inlined && fr[k].name &&
					   tally_name_matches(fr[k].name, o->symbol)))
				k++;
			if (k == nf)
				continue;
			struct icand *c = NULL;
			for (size_t q = 0; q < nc && !c; q++)
				if (cands[q].image == pf->image && cands[q].id == fr[k].addr)
					c = &cands[q];
			if (!c) {
				GROW(cands, ac, nc + 1);
				c = &cands[nc++];
				memset(c, 0, sizeof(*c));
				*c = (struct icand){ .image = pf->image,
						     .id = fr[k].addr,
						     .name = fr[k].name };
			}
			c->samples += cnt;
			c->raw += raw;
			uint64_t la;
			if (!tally_resolver_addr(res, pf->image, db->entries[i].offset, &la)) {
				GROW(c->pts, c->apts, c->npts + 1);
				c->pts[c->npts++] = (struct pt){ la, cnt, raw };
			}
			size_t q = 0;
			while (q < c->nls && !(c->ls[q].line == (uint32_t)fr[k].line &&
					       (c->ls[q].file == fr[k].file ||
						(c->ls[q].file && fr[k].file &&
						 !strcmp(c->ls[q].file, fr[k].file)))))
				q++;
			if (q == c->nls) {
				GROW(c->ls, c->als, c->nls + 1);
				c->ls[c->nls++] =
					(struct iline){ fr[k].file,
							(uint32_t)(fr[k].line > 0 ? fr[k].line : 0),
							0, 0 };
			}
			c->ls[q].n += cnt;
			c->ls[q].r += raw;
			/* the function it was inlined into: the outermost frame */
			const char *into = fr[nf - 1].name ? fr[nf - 1].name : "[unknown]";
			q = 0;
			while (q < c->ninto && strcmp(c->into[q].name, into))
				q++;
			if (q == c->ninto) {
				GROW(c->into, c->ainto, c->ninto + 1);
				c->into[c->ninto].name = into;
				c->into[c->ninto++].n = 0;
			}
			c->into[q].n += cnt;
		}
	}
	for (size_t k = 1; k < nc; k++)
		if (cands[k].image != cands[0].image) {
			struct strbuf sb = STRBUF_INIT;
			for (size_t j = 0; j < nc; j++) {
				bool dup = false;
				for (size_t q = 0; q < j; q++)
					dup = dup || cands[q].image == cands[j].image;
				if (!dup)
					strbuf_addf(&sb, "%s%s", sb.len ? ", " : "",
						    db->images[cands[j].image].name);
			}
			ret = tally_seterr(
				-EINVAL,
				"inlined function '%s' is in several images: %s (choose one with --image NAME)",
				o->symbol, sb.buf);
			strbuf_release(&sb);
			goto out;
		}
	*out = nc ? xcalloc(nc, sizeof(**out)) : NULL;
	for (size_t k = 0; k < nc; k++)
		annotate_inline_one(db, res, &cands[k], img_samples[cands[k].image], &(*out)[k]);
	if (nc)
		tally_qsort(*out, nc, sizeof(**out), cmp_func);
	*n = nc;
out:
	for (size_t k = 0; k < nc; k++) {
		free(cands[k].pts);
		free(cands[k].ls);
		free(cands[k].into);
	}
	free(cands);
	return ret;
}

/* ---- finding the function ---- */

static int cmp_func(const void *a, const void *b)
{
	const struct tally_annot_func *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int tally_annotate(const struct tally_db *db, struct tally_resolver *res,
		   const struct tally_annotate_opts *o, struct tally_annot_func **out, size_t *n)
{
	struct cand *cands = NULL;
	size_t nc = 0, ac = 0;
	uint64_t *img_samples = xcalloc(db->nimages + 1, sizeof(uint64_t));
	bool image_seen = false;
	const struct tally_sym *last = NULL;
	const char *last_name = NULL;
	bool last_match = false;
	int ret = 0;
	*out = NULL;
	*n = 0;
	for (size_t p = 0; p < db->nprofs; p++) {
		const struct tally_db_prof *pf = &db->profs[p];
		if (o->image && !image_matches(&db->images[pf->image], o->image))
			continue;
		image_seen = true;
		for (size_t i = pf->first; i < pf->end; i++) {
			uint64_t cnt = db->counts[i * (size_t)db->nevents + (size_t)o->event];
			uint64_t raw = raw_of(db, i, o->event);
			if (!cnt)
				continue;
			img_samples[pf->image] += cnt;
			const struct tally_sym *sym =
				tally_resolve(res, pf->image, db->entries[i].offset);
			/* a function's entries come one after another: its name is
			 * compared once, not once per address */
			if (sym && (sym != last || sym->name != last_name)) {
				last = sym;
				last_name = sym->name;
				last_match = tally_name_matches(sym->name, o->symbol);
			}
			if (!sym || !last_match)
				continue;
			uint64_t la;
			if (tally_resolver_addr(res, pf->image, db->entries[i].offset, &la))
				continue;
			struct cand *c = NULL;
			for (size_t k = 0; k < nc && !c; k++)
				if (cands[k].image == pf->image && cands[k].addr == sym->addr)
					c = &cands[k];
			if (!c) {
				GROW(cands, ac, nc + 1);
				c = &cands[nc++];
				*c = (struct cand){ pf->image, sym->name, sym->addr, sym->size, 0,
						    0,         NULL,      0,         0 };
			}
			c->samples += cnt;
			c->raw += raw;
			GROW(c->pts, c->apts, c->npts + 1);
			c->pts[c->npts++] = (struct pt){ la, cnt, raw };
		}
	}
	if (o->image && !image_seen) {
		ret = tally_seterr(-ENOENT,
				   "no image '%s' with samples in '%s' (see 'tally report -i %s')",
				   o->image, db->path, db->path);
		goto out;
	}
	if (!nc) {
		/* not a function of the symbol table: an inlined one? */
		ret = annotate_inlined(db, res, o, img_samples, out, n);
		if (ret || *n)
			goto out;
		const char *why = NULL;
		for (size_t p = 0; o->image && p < db->nprofs && !why; p++)
			if (image_matches(&db->images[db->profs[p].image], o->image))
				why = tally_resolver_note(res, db->profs[p].image);
		if (why)
			/* the image could not be read: that is the answer, not the name */
			ret = tally_seterr(-ENOENT, "no function '%s' in image '%s' of '%s': %s",
					   o->symbol, o->image, db->path, why);
		else if (o->image)
			ret = tally_seterr(
				-ENOENT,
				"no function '%s' with %s samples in image '%s' of '%s' (see 'tally report -i %s --symbols --image %s')",
				o->symbol, db->events[o->event], o->image, db->path, db->path,
				o->image);
		else
			ret = tally_seterr(
				-ENOENT,
				"no function '%s' with %s samples in '%s' (see 'tally report -i %s --symbols')",
				o->symbol, db->events[o->event], db->path, db->path);
		goto out;
	}
	bool several = false;
	for (size_t k = 1; k < nc; k++)
		several = several || cands[k].image != cands[0].image;
	if (several) {
		/* name images by file name, or by path where two share one */
		struct strbuf sb = STRBUF_INIT;
		uint32_t *seen = xmalloc(nc * sizeof(uint32_t));
		size_t ns = 0;
		for (size_t k = 0; k < nc; k++) {
			bool dup = false;
			for (size_t j = 0; j < ns; j++)
				dup = dup || seen[j] == cands[k].image;
			if (dup)
				continue;
			seen[ns++] = cands[k].image;
			const struct tally_db_image *im = &db->images[cands[k].image];
			bool clash = false;
			for (size_t j = 0; j < nc; j++)
				clash = clash ||
					(cands[j].image != cands[k].image &&
					 !strcmp(db->images[cands[j].image].name, im->name));
			strbuf_addf(&sb, "%s%s", ns > 1 ? ", " : "",
				    clash && im->path[0] ? im->path : im->name);
		}
		free(seen);
		ret = tally_seterr(
			-EINVAL,
			"function '%s' is in several images: %s (choose one with --image NAME)",
			o->symbol, sb.buf);
		strbuf_release(&sb);
		goto out;
	}
	*out = xcalloc(nc, sizeof(**out));
	for (size_t k = 0; k < nc; k++)
		annotate_one(db, res, &cands[k], img_samples[cands[k].image], &(*out)[k]);
	tally_qsort(*out, nc, sizeof(**out), cmp_func);
	*n = nc;
out:
	for (size_t k = 0; k < nc; k++)
		free(cands[k].pts);
	free(cands);
	free(img_samples);
	return ret;
}

void tally_annotate_free(struct tally_annot_func *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].name);
		for (size_t k = 0; k < f[i].nfiles; k++)
			free(f[i].files[k]);
		free(f[i].files);
		free(f[i].lines);
		for (size_t k = 0; k < f[i].ninsns; k++)
			free(f[i].insns[k].text);
		free(f[i].insns);
		free(f[i].pt_addr);
		free(f[i].pt_samples);
		free(f[i].pt_raw);
		free(f[i].line_note);
		free(f[i].code_note);
		for (size_t k = 0; k < f[i].ninlined_into; k++)
			free(f[i].inlined_into[k]);
		free(f[i].inlined_into);
	}
	free(f);
}

/* ---- source files ---- */

static int try_source(const char *path, char **text, char ***lines, size_t *nlines, char **found)
{
	struct strbuf sb = STRBUF_INIT;
	/* a regular file: a FIFO at a source path must not hang annotate */
	if (tally_read_regular(&sb, AT_FDCWD, path, TALLY_OPEN_FOLLOW, 64u << 20)) {
		strbuf_release(&sb);
		return -ENOENT;
	}
	char **ls = NULL;
	size_t n = 0, cap = 0;
	char *p = sb.buf;
	while (p && *p) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		size_t l = strlen(p);
		if (l && p[l - 1] == '\r')
			p[l - 1] = '\0';
		GROW(ls, cap, n + 1);
		ls[n++] = p;
		p = nl ? nl + 1 : NULL;
	}
	*text = strbuf_detach(&sb);
	if (!*text)
		*text = xstrdup("");
	*lines = ls;
	*nlines = n;
	*found = xstrdup(path);
	return 0;
}

int tally_annot_source(const char *file, const char **dirs, char **text, char ***lines,
		       size_t *nlines, char **found)
{
	if (try_source(file, text, lines, nlines, found) == 0)
		return 0;
	struct strbuf sb = STRBUF_INIT;
	int r = -ENOENT;
	for (size_t i = 0; dirs && dirs[i] && r; i++) {
		const char *eq = strchr(dirs[i], '=');
		if (eq) {
			size_t ol = (size_t)(eq - dirs[i]);
			if (ol && !strncmp(file, dirs[i], ol)) {
				strbuf_reset(&sb);
				strbuf_addf(&sb, "%s%s", eq + 1, file + ol);
				r = try_source(sb.buf, text, lines, nlines, found);
			}
			continue;
		}
		/* the path under DIR, then ever shorter tails of it */
		for (const char *t = file; t && r; t = strchr(t, '/')) {
			while (*t == '/')
				t++;
			if (!*t)
				break;
			strbuf_reset(&sb);
			strbuf_addf(&sb, "%s/%s", dirs[i], t);
			r = try_source(sb.buf, text, lines, nlines, found);
		}
	}
	strbuf_release(&sb);
	return r;
}
