/* Symbolization at report time (see symbols.h). */
#define _GNU_SOURCE
#include "tally/symbols.h"
#include "tally/util.h"

#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct phdr {
	uint64_t off, filesz, vaddr;
};

struct section {
	uint64_t start, end;
	char *label; /* "[.plt]" */
};

struct imgsyms {
	int state; /* 0 not loaded, 1 loaded */
	struct section *secs; /* executable sections, for code outside any symbol */
	size_t nsecs;
	struct tally_sym secsym;
	char **owned; /* names we had to copy (version suffixes cut) */
	size_t nowned, aowned;
	bool mismatch;
	bool loud; /* the note is a warning every report shows, not only -v */
	char *note;
	struct tally_sym *syms;
	size_t nsyms;
	char *names; /* storage for JIT and kernel names when copied */
	struct phdr *ph;
	size_t nph;
	Dwfl *dwfl;
	uint64_t bias;
};

struct tally_resolver {
	const struct tally_db *db;
	struct tally_resolver_opts o;
	struct imgsyms *im;
	char *debuginfo_path;
	Dwfl_Callbacks cb;
};

int tally_resolver_new(struct tally_resolver **out, const struct tally_db *db, const struct tally_resolver_opts *o)
{
	struct tally_resolver *r = xcalloc(1, sizeof(*r));
	r->db = db;
	if (o)
		r->o = *o;
	r->im = xcalloc(db->nimages + 1, sizeof(*r->im));
	r->cb.find_elf = dwfl_build_id_find_elf;
	r->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	r->cb.section_address = dwfl_offline_section_address;
	r->cb.debuginfo_path = &r->debuginfo_path;
	*out = r;
	return 0;
}

void tally_resolver_free(struct tally_resolver *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->db->nimages; i++) {
		struct imgsyms *s = &r->im[i];
		free(s->note);
		free(s->syms);
		free(s->names);
		free(s->ph);
		for (size_t k = 0; k < s->nsecs; k++)
			free(s->secs[k].label);
		free(s->secs);
		for (size_t k = 0; k < s->nowned; k++)
			free(s->owned[k]);
		free(s->owned);
		if (s->dwfl)
			dwfl_end(s->dwfl);
	}
	free(r->im);
	free(r);
}

static void set_note(struct imgsyms *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_note(struct imgsyms *s, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	free(s->note);
	s->note = strbuf_detach(&sb);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct tally_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* larger first: the enclosing function wins over a zero-size label */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->prio != y->prio)
		return x->prio - y->prio;
	return (int)strlen(x->name) - (int)strlen(y->name);
}

/* Sorted, aliases collapsed, zero sizes extended to the next symbol. */
static void finish_syms(struct imgsyms *s)
{
	tally_qsort(s->syms, s->nsyms, sizeof(*s->syms), cmp_sym);
	size_t u = 0;
	for (size_t i = 0; i < s->nsyms; i++)
		if (!u || s->syms[u - 1].addr != s->syms[i].addr)
			s->syms[u++] = s->syms[i];
	s->nsyms = u;
	for (size_t i = 0; i + 1 < u; i++)
		if (!s->syms[i].size) {
			uint64_t end = s->syms[i + 1].addr;
			for (size_t k = 0; k < s->nsecs; k++)
				if (s->syms[i].addr >= s->secs[k].start && s->syms[i].addr < s->secs[k].end &&
				    s->secs[k].end < end)
					end = s->secs[k].end;
			s->syms[i].size = end - s->syms[i].addr;
		}
}

static bool hex_eq_bytes(const char *hex, const unsigned char *b, int n)
{
	char buf[160];
	if (n <= 0 || n * 2 + 1 > (int)sizeof(buf))
		return false;
	tally_hex(b, (size_t)n, buf);
	return !strcmp(buf, hex);
}

static char *find_file(struct tally_resolver *r, const struct tally_db_image *di)
{
	struct strbuf sb = STRBUF_INIT;
	const char *del = strstr(di->path, " (deleted)");
	char *p = del ? xstrndup(di->path, (size_t)(del - di->path)) : xstrdup(di->path);
	for (size_t i = 0; r->o.image_path && r->o.image_path[i]; i++) {
		/* opreport's --image-path: the file by name under each directory */
		strbuf_reset(&sb);
		strbuf_addf(&sb, "%s/%s", r->o.image_path[i], tally_basename(p));
		if (access(sb.buf, R_OK) == 0) {
			free(p);
			return strbuf_detach(&sb);
		}
		strbuf_reset(&sb);
		strbuf_addf(&sb, "%s%s", r->o.image_path[i], p);
		if (access(sb.buf, R_OK) == 0) {
			free(p);
			return strbuf_detach(&sb);
		}
	}
	strbuf_release(&sb);
	if (access(p, R_OK) == 0)
		return p;
	free(p);
	return NULL;
}

static void load_dwfl(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di, const char *path)
{
	s->dwfl = dwfl_begin(&r->cb);
	if (!s->dwfl) {
		set_note(s, "libdwfl: %s", dwfl_errmsg(-1));
		return;
	}
	dwfl_report_begin(s->dwfl);
	Dwfl_Module *mod = dwfl_report_offline(s->dwfl, di->name, path, -1);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!mod) {
		set_note(s, "'%s' is not a readable ELF file: %s", path, dwfl_errmsg(-1));
		return;
	}
	/* never symbolize with a file other than the one that ran */
	if (!strcmp(di->id_kind, "build-id")) {
		const unsigned char *bits;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(mod, &bits, &vaddr);
		if (!hex_eq_bytes(di->id, bits, n)) {
			char found[160] = "none";
			if (n > 0 && n < 64)
				tally_hex(bits, (size_t)n, found);
			s->mismatch = true;
			set_note(s, "'%s' has build-id %s but the profile recorded %s: not symbolized (find the original with --image-path)",
				 path, found, di->id);
			return;
		}
	} else if (!strcmp(di->id_kind, "xxh64")) {
		struct tally_elf_info info;
		char hex[32];
		if (tally_elf_info(path, 2, &info) || (snprintf(hex, sizeof(hex), "%016" PRIx64, info.hash), strcmp(hex, di->id))) {
			s->mismatch = true;
			set_note(s, "'%s' differs from the recorded file (content hash %s): not symbolized (find the original with --image-path)",
				 path, di->id);
			return;
		}
	}
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	s->bias = bias;
	size_t nph = 0;
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		s->ph = xcalloc(nph + 1, sizeof(*s->ph));
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
				s->ph[s->nph++] = (struct phdr){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
		}
	}
	/* executable sections: a zero-size symbol ends with its section, and code in
	 * no symbol (PLT stubs) is named after its section */
	size_t shstrndx, scap = 0;
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type != SHT_PROGBITS)
				continue;
			const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
			struct strbuf lb = STRBUF_INIT;
			strbuf_addf(&lb, "[%s]", nm ? nm : "?");
			GROW(s->secs, scap, s->nsecs + 1);
			s->secs[s->nsecs++] = (struct section){ sh.sh_addr, sh.sh_addr + sh.sh_size, strbuf_detach(&lb) };
		}
	}
	int n = dwfl_module_getsymtab(mod);
	size_t cap = 0;
	for (int i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *selfe;
		Dwarf_Addr sbias;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &selfe, &sbias);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF)
			continue;
		int t = GELF_ST_TYPE(sym.st_info);
		if (t != STT_FUNC && t != STT_GNU_IFUNC)
			continue;
		GROW(s->syms, cap, s->nsyms + 1);
		/* names stay valid while the Dwfl lives */
		int b = GELF_ST_BIND(sym.st_info);
		const char *at = strchr(name, '@');
		if (at && at != name) {
			/* memcpy@@GLIBC_2.14 is memcpy to the reader */
			GROW(s->owned, s->aowned, s->nowned + 1);
			s->owned[s->nowned++] = xstrndup(name, (size_t)(at - name));
			name = s->owned[s->nowned - 1];
		}
		s->syms[s->nsyms++] = (struct tally_sym){ addr - bias, sym.st_size, name,
							  b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2 };
	}
	if (!s->nsyms)
		set_note(s, "'%s' has no function symbols (install its debug package, or see --image-path)", path);
	finish_syms(s);
}

static void load_jit(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT;
	strbuf_addf(&p, "%s/jit/perf-%d-%s.map", tally_db_image_dir(r->db, (uint32_t)(di - r->db->images)), di->pid, di->id);
	if (strbuf_read_file(&sb, p.buf, 0)) {
		set_note(s, "no copy of the JIT map '%s' in the database", di->path);
		goto out;
	}
	size_t cap = 0, bad = 0;
	s->names = strbuf_detach(&sb);
	char *save = NULL;
	for (char *l = strtok_r(s->names, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *e1, *e2;
		unsigned long long start = strtoull(l, &e1, 16);
		if (e1 == l || *e1 != ' ') {
			bad++;
			continue;
		}
		unsigned long long size = strtoull(e1 + 1, &e2, 16);
		if (e2 == e1 + 1 || *e2 != ' ' || !e2[1]) {
			bad++;
			continue;
		}
		GROW(s->syms, cap, s->nsyms + 1);
		s->syms[s->nsyms++] = (struct tally_sym){ start, size, e2 + 1, 0 };
	}
	if (bad) {
		set_note(s, "the JIT map of pid %d had %zu malformed line%s (skipped)", di->pid, bad, bad == 1 ? "" : "s");
		s->loud = true;
	}
	finish_syms(s);
out:
	strbuf_release(&p);
	strbuf_release(&sb);
}

static void load_kernel(struct tally_resolver *r, struct imgsyms *s)
{
	const struct tally_db *db = r->db;
	s->syms = xcalloc(db->nksyms + 1, sizeof(*s->syms));
	struct strbuf names = STRBUF_INIT;
	size_t *offs = xcalloc(db->nksyms + 1, sizeof(size_t));
	for (size_t i = 0; i < db->nksyms; i++) {
		offs[i] = names.len;
		strbuf_addstr(&names, db->ksyms[i].name);
		if (db->ksyms[i].module)
			strbuf_addf(&names, " [%s]", db->ksyms[i].module);
		strbuf_addch(&names, '\0');
	}
	s->names = strbuf_detach(&names);
	for (size_t i = 0; i < db->nksyms; i++)
		s->syms[i] = (struct tally_sym){ db->ksyms[i].addr, db->ksyms[i].size, s->names + offs[i], 0 };
	s->nsyms = db->nksyms;
	free(offs);
	if (!s->nsyms) {
		const char *why = tally_meta_get(&db->session, "kernel-symbols");
		set_note(s, "the database has no kernel symbols%s%s", why ? ": " : "", why ? why : "");
	}
}

static void load(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = &r->im[image];
	const struct tally_db_image *di = &r->db->images[image];
	s->state = 1;
	if (!strcmp(di->kind, "kernel")) {
		load_kernel(r, s);
	} else if (!strcmp(di->kind, "jit")) {
		load_jit(r, s, di);
	} else if (!strcmp(di->kind, "nomap")) {
		set_note(s, "code outside any file, and no JIT map named it");
	} else if (!strcmp(di->kind, "vdso")) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/vdso.so", tally_db_image_dir(r->db, image));
		if (access(p.buf, R_OK) == 0)
			load_dwfl(r, s, di, p.buf);
		else
			set_note(s, "no copy of the vDSO in the database");
		strbuf_release(&p);
	} else if (!strcmp(di->id_kind, "replaced")) {
		s->mismatch = true;
		set_note(s, "'%s' was replaced or deleted while it was mapped, so the file that ran is unknown: not symbolized (record with --build-id-mmap to keep build-ids)",
			 di->path);
	} else {
		char *path = find_file(r, di);
		if (!path)
			set_note(s, "'%s' is not on this machine (copy it here, or point --image-path at it)", di->path);
		else
			load_dwfl(r, s, di, path);
		free(path);
	}
}

static const struct tally_sym *lookup(const struct imgsyms *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	const struct tally_sym *y = &s->syms[lo - 1];
	return addr < y->addr + (y->size ? y->size : 1) ? y : NULL;
}

const struct tally_sym *tally_resolve(struct tally_resolver *r, uint32_t image, uint64_t offset)
{
	if (image >= r->db->nimages)
		return NULL;
	struct imgsyms *s = &r->im[image];
	if (!s->state)
		load(r, image);
	if (!s->nsyms)
		return NULL;
	uint64_t addr = offset;
	if (s->dwfl) {
		/* a file offset becomes a link-time address through the loadable segments */
		bool found = false;
		for (size_t i = 0; i < s->nph; i++)
			if (offset >= s->ph[i].off && offset < s->ph[i].off + s->ph[i].filesz) {
				addr = offset - s->ph[i].off + s->ph[i].vaddr;
				found = true;
				break;
			}
		if (!found)
			return NULL;
	}
	const struct tally_sym *y = lookup(s, addr);
	if (y)
		return y;
	for (size_t i = 0; i < s->nsecs; i++)
		if (addr >= s->secs[i].start && addr < s->secs[i].end) {
			/* e.g. [.plt]: honest about where, without inventing a function */
			s->secsym = (struct tally_sym){ s->secs[i].start, s->secs[i].end - s->secs[i].start, s->secs[i].label, 0 };
			return &s->secsym;
		}
	return NULL;
}

const char *tally_resolver_note(struct tally_resolver *r, uint32_t image)
{
	if (image >= r->db->nimages)
		return NULL;
	if (!r->im[image].state)
		load(r, image);
	return r->im[image].note;
}

bool tally_resolver_loaded(const struct tally_resolver *r, uint32_t image)
{
	return image < r->db->nimages && r->im[image].state;
}

bool tally_resolver_loud(struct tally_resolver *r, uint32_t image)
{
	if (image >= r->db->nimages)
		return false;
	if (!r->im[image].state)
		load(r, image);
	return r->im[image].mismatch || r->im[image].loud;
}

bool tally_resolver_mismatch(struct tally_resolver *r, uint32_t image)
{
	if (image >= r->db->nimages)
		return false;
	if (!r->im[image].state)
		load(r, image);
	return r->im[image].mismatch;
}
