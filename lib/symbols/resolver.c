/* The resolver: creating and freeing it, its per-image cache and notes, loading
 * an image on first use by its kind, and the public lookups (tally_resolve,
 * notes, addresses, modules, JIT functions and the files it used). */
#define _GNU_SOURCE
#include "internal.h"

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       char **file_name, Elf **elfp)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
	return -1;
}

int tally_resolver_new(struct tally_resolver **out, const struct tally_db *db,
		       const struct tally_resolver_opts *o)
{
	struct tally_resolver *r = xcalloc(1, sizeof(*r));
	elf_version(EV_CURRENT);
	r->db = db;
	r->archive = db->archive;
	if (o)
		r->o = *o;
	if (r->o.debuginfod_timeout <= 0)
		r->o.debuginfod_timeout = 10;
	r->cache.fd = -1;
	r->im = xcalloc(db->nimages + 1, sizeof(*r->im));
	for (size_t i = 0; i < db->nimages; i++) {
		r->im[i].image = (uint32_t)i;
		r->im[i].r = r;
	}
	/* our own callbacks: the search order is ours (docs/symbols.md), every
	 * candidate is verified, and nothing goes to the network unless asked */
	r->cb.find_elf = no_find_elf;
	r->cb.find_debuginfo = sym_find_debuginfo_cb;
	r->cb.section_address = dwfl_offline_section_address;
	r->cb.debuginfo_path = &r->debuginfo_path;
	const char *rel = tally_meta_get(&db->session, "kernel-release");
	if (r->archive) {
		/* the archive's own modules, never this machine's /lib/modules */
		struct strbuf md = STRBUF_INIT;
		strbuf_addf(&md, "%s/kernel/modules", r->archive);
		r->modules_dir = strbuf_detach(&md);
	} else if (r->o.modules_dir)
		r->modules_dir = xstrdup(r->o.modules_dir);
	else if (rel && *rel && !strchr(rel, '/')) {
		struct strbuf md = STRBUF_INIT;
		strbuf_addf(&md, "/lib/modules/%s", rel);
		r->modules_dir = strbuf_detach(&md);
	}
	*out = r;
	return 0;
}

static void imgsyms_release(struct imgsyms *s)
{
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
	free(s->demangled);
	free(s->symframe);
	strbuf_release(&s->log);
	free(s->file);
	free(s->debug_file);
	free(s->dwarf_err);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	tally_jitdump_release(s->jd);
	free(s->jd);
	for (size_t k = 0; k < s->nkmods; k++) {
		struct kmod *km = &s->kmods[k];
		imgsyms_release(&km->sub);
		free(km->mem);
		free(km->name);
		free(km->img.path);
	}
	free(s->kmods);
	free(s->ksym_kmod);
	free(s->ksym_delta);
	free(s->ksym_placed);
}

void tally_resolver_free(struct tally_resolver *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->db->nimages; i++)
		imgsyms_release(&r->im[i]);
	for (size_t i = 0; i < r->nko; i++) {
		free(r->ko[i].norm);
		free(r->ko[i].path);
	}
	free(r->ko);
	strbuf_release(&r->ko_note);
	free(r->modules_dir);
	free(r->fc);
	free(r->frames);
	tally_hidx_release(&r->fc_idx);
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->paths);
	tally_hidx_release(&r->path_idx);
	if (r->dfd)
		r->dfd_end(r->dfd);
	tally_cache_close(&r->cache);
	/* libdebuginfod stays loaded: libcurl and its TLS library keep global state
	 * that unloading would turn into leaks (and a second resolver reuses it) */
	free(r->im);
	free(r);
}

struct tally_cache *sym_cache(struct tally_resolver *r)
{
	if (!r->cache_state)
		r->cache_state =
			r->archive || r->o.no_cache || tally_cache_open(&r->cache, false) ? -1 : 1;
	return r->cache_state == 1 ? &r->cache : NULL;
}

void sym_set_note(struct imgsyms *s, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	free(s->note);
	s->note = strbuf_detach(&sb);
}

void sym_progress(struct tally_resolver *r, const char *fmt, ...)
{
	if (!r->o.progress)
		return;
	char line[128];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	r->o.progress(r->o.progress_ctx, line);
}

void sym_logf_(struct imgsyms *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_addstr(&s->log, "  ");
	strbuf_vaddf(&s->log, fmt, ap);
	strbuf_addch(&s->log, '\n');
	va_end(ap);
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
void sym_finish_syms(struct imgsyms *s)
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
				if (s->syms[i].addr >= s->secs[k].start &&
				    s->syms[i].addr < s->secs[k].end && s->secs[k].end < end)
					end = s->secs[k].end;
			s->syms[i].size = end - s->syms[i].addr;
		}
}

void sym_load(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = &r->im[image];
	const struct tally_db_image *di = &r->db->images[image];
	s->state = 1;
	s->file_kind = sym_is_file_kind(di);
	s->kernel = !strcmp(di->kind, "kernel");
	if (s->kernel) {
		sym_load_kernel(r, s, di);
	} else if (!strcmp(di->kind, "jit")) {
		sym_load_jit(r, s, di);
	} else if (!strcmp(di->kind, "nomap")) {
		sym_set_note(s, "code outside any file, and no JIT map named it");
		sym_logf_(
			s,
			"executable memory backed by no file (and no JIT map named it): nothing to look up");
	} else if (!strcmp(di->kind, "vdso")) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "%s/vdso.so", tally_db_image_dir(r->db, image));
		/* a file of the database: never through a link */
		int fd = tally_open_regular(AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX, NULL);
		if (fd >= 0) {
			close(fd);
			sym_load_dwfl(r, s, di, p.buf, !strcmp(di->id_kind, "build-id"));
		} else if (fd == -ENOENT) {
			sym_logf_(s, "vDSO copy '%s': not there", p.buf);
			sym_set_note(s, "no copy of the vDSO in the database");
		} else {
			sym_logf_(s, "vDSO copy: %s", tally_errmsg());
			sym_set_note(s, "%s: not used", tally_errmsg());
		}
		strbuf_release(&p);
	} else if (!strcmp(di->id_kind, "unreachable")) {
		s->mismatch = true;
		sym_logf_(
			s,
			"mapped inside another mount namespace by a process that exited before its file could be read through /proc/PID/root: which file ran is unknown");
		sym_set_note(
			s,
			"'%s' was mapped inside a container by a process that exited before tally could read it: not symbolized",
			di->path);
	} else if (!strcmp(di->id_kind, "replaced")) {
		s->mismatch = true;
		sym_logf_(
			s,
			"the file at '%s' was replaced or deleted while it was mapped, so which file ran is unknown",
			di->path);
		sym_set_note(
			s,
			"'%s' was replaced or deleted while it was mapped, so the file that ran is unknown: not symbolized (record with --build-id-mmap to keep build-ids)",
			di->path);
	} else {
		sym_progress(r, "reading the symbols of %s", di->name);
		sym_load_file(r, s, di);
	}
}

static const struct tally_sym *lookup(struct imgsyms *s, uint64_t addr)
{
	/* the last answer again when addr lies between the start of its symbol
	 * and the next one's: addresses often come in order (a flat profile's, a
	 * function's), and then no binary search is needed */
	size_t lo = s->last_sym;
	if (!(lo && lo <= s->nsyms && s->syms[lo - 1].addr <= addr &&
	      (lo == s->nsyms || addr < s->syms[lo].addr)))
		lo = s->last_sym = TALLY_UPPER_U64(s->syms, s->nsyms, addr, addr);
	if (!lo)
		return NULL;
	const struct tally_sym *y = &s->syms[lo - 1];
	return addr < y->addr + (y->size ? y->size : 1) ? y : NULL;
}

/* A file offset as a link-time address through the loadable segments. */
bool sym_offset_to_addr(const struct imgsyms *s, uint64_t offset, uint64_t *addr)
{
	for (size_t i = 0; i < s->nph; i++)
		if (offset >= s->ph[i].off && offset < s->ph[i].off + s->ph[i].filesz) {
			*addr = offset - s->ph[i].off + s->ph[i].vaddr;
			return true;
		}
	return false;
}

bool sym_is_file_kind(const struct tally_db_image *di)
{
	return strcmp(di->kind, "kernel") && strcmp(di->kind, "jit") && strcmp(di->kind, "nomap");
}

struct imgsyms *sym_get(struct tally_resolver *r, uint32_t image)
{
	if (image >= r->db->nimages)
		return NULL;
	struct imgsyms *s = &r->im[image];
	if (!s->state)
		sym_load(r, image);
	return s;
}

/* y with its name demangled, once, when it is first looked up: a C++ library
 * has many more symbols than a profile has functions */
static const struct tally_sym *demangled(struct tally_resolver *r, struct imgsyms *s,
					 const struct tally_sym *y)
{
	if (r->o.no_demangle || s->kernel)
		return y;
	size_t i = (size_t)(y - s->syms);
	if (!s->demangled)
		s->demangled = xcalloc(s->nsyms + 1, 1);
	if (!s->demangled[i]) {
		s->demangled[i] = 1;
		char *d = tally_demangle(y->name);
		if (d) {
			GROW(s->owned, s->aowned, s->nowned + 1);
			s->owned[s->nowned++] = d;
			s->syms[i].name = d;
		}
	}
	return y;
}

const struct tally_sym *tally_resolve(struct tally_resolver *r, uint32_t image, uint64_t offset)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || !s->nsyms)
		return NULL;
	uint64_t addr = offset;
	if (s->file_kind && !sym_offset_to_addr(s, offset, &addr))
		return NULL;
	const struct tally_sym *y = lookup(s, addr);
	if (y)
		return demangled(r, s, y);
	for (size_t i = 0; i < s->nsecs; i++)
		if (addr >= s->secs[i].start && addr < s->secs[i].end) {
			/* e.g. [.plt]: honest about where, without inventing a function */
			s->secsym = (struct tally_sym){ s->secs[i].start,
							s->secs[i].end - s->secs[i].start,
							s->secs[i].label, TALLY_SYM_SECTION };
			return &s->secsym;
		}
	return NULL;
}

bool tally_resolver_has_dwarf(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || s->mismatch)
		return false;
	/* the kernel: --vmlinux, or a module's .ko that was used */
	for (size_t k = 0; k < s->nkmods; k++)
		if (s->kmods[k].state == 1 && sym_get_dwarf(&s->kmods[k].sub))
			return true;
	return sym_get_dwarf(s) != NULL;
}

const char *tally_resolver_note(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = sym_get(r, image);
	if (s && !s->note && s->dwarf_missing && s->dwarf_err &&
	    strcmp(s->dwarf_err, "no compile unit covers it")) {
		/* damaged DWARF is worth a warning; code built without -g is not */
		sym_set_note(
			s,
			"its DWARF is damaged (%s): source lines and inlines skipped for %zu address%s",
			s->dwarf_err, s->dwarf_missing, s->dwarf_missing == 1 ? "" : "es");
		s->loud = true;
	}
	return s ? s->note : NULL;
}

bool tally_resolver_loaded(const struct tally_resolver *r, uint32_t image)
{
	return image < r->db->nimages && r->im[image].state;
}

bool tally_resolver_loud(struct tally_resolver *r, uint32_t image)
{
	tally_resolver_note(r, image);
	struct imgsyms *s = sym_get(r, image);
	return s && (s->mismatch || s->loud);
}

bool tally_resolver_mismatch(struct tally_resolver *r, uint32_t image)
{
	struct imgsyms *s = sym_get(r, image);
	return s && s->mismatch;
}

Dwfl_Module *tally_resolver_module(struct tally_resolver *r, uint32_t image, GElf_Addr *bias_out)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || !s->mod || s->mismatch)
		return NULL;
	if (bias_out)
		*bias_out = s->bias;
	return s->mod;
}

int tally_resolver_addr(struct tally_resolver *r, uint32_t image, uint64_t offset, uint64_t *addr)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s)
		return -1;
	const struct tally_db_image *di = &r->db->images[image];
	if (!sym_is_file_kind(di)) {
		*addr = offset - s->kdelta;
		return 0;
	}
	if (!s->mod || s->mismatch)
		return -1;
	return sym_offset_to_addr(s, offset, addr) ? 0 : -1;
}

const struct tally_jit_func *tally_resolver_jit_func(struct tally_resolver *r, uint32_t image,
						     uint64_t addr, uint32_t *elf_mach)
{
	if (image >= r->db->nimages || strcmp(r->db->images[image].kind, "jit"))
		return NULL;
	struct imgsyms *s = &r->im[image];
	if (!s->state)
		sym_load(r, image);
	if (!s->jd)
		return NULL;
	if (elf_mach)
		*elf_mach = s->jd->elf_mach;
	return tally_jitdump_find(s->jd, addr);
}

int tally_resolver_jit_line(struct tally_resolver *r, uint32_t image, uint64_t addr,
			    const char **file, unsigned *line)
{
	const struct tally_jit_func *f = tally_resolver_jit_func(r, image, addr, NULL);
	const struct tally_jit_line *l = f ? tally_jitdump_line(f, addr) : NULL;
	if (!l || !l->line)
		return -1;
	*file = r->im[image].jd->files[l->file];
	*line = l->line;
	return 0;
}

static size_t add_rfile(struct tally_resolver_file *out, size_t n, size_t max, const char *path,
			enum tally_rfile_role role, const char *module,
			const struct tally_db_image *di)
{
	if (!path || n >= max)
		return n;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(out[i].path, path))
			return n;
	out[n] = (struct tally_resolver_file){ path, role, module, di->id_kind, di->id };
	return n + 1;
}

size_t tally_resolver_files(struct tally_resolver *r, uint32_t image,
			    struct tally_resolver_file *out, size_t max)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || s->mismatch)
		return 0;
	const struct tally_db_image *di = &r->db->images[image];
	size_t n = 0;
	if (!strcmp(di->kind, "kernel")) {
		if (s->mod)
			n = add_rfile(out, n, max, s->file, TALLY_RFILE_VMLINUX, NULL, di);
		for (size_t k = 0; k < s->nkmods; k++) {
			struct kmod *km = &s->kmods[k];
			if (!km->state)
				sym_kmod_load(r, s, (uint32_t)k);
			if (km->state != 1)
				continue;
			sym_get_dwarf(&km->sub);
			n = add_rfile(out, n, max, km->sub.file, TALLY_RFILE_MODULE, km->name,
				      &km->img);
			n = add_rfile(out, n, max, km->sub.debug_file, TALLY_RFILE_MODULE_DEBUG,
				      km->name, &km->img);
		}
		return n;
	}
	if (!sym_is_file_kind(di) || !strcmp(di->kind, "vdso") || !s->mod)
		return 0; /* JIT maps, jitdumps and the vDSO are copies inside the database */
	sym_get_dwarf(s);
	/* with no image file found, its debug file was loaded in its place */
	if (!s->file || !s->debug_file || strcmp(s->file, s->debug_file))
		n = add_rfile(out, n, max, s->file, TALLY_RFILE_IMAGE, NULL, di);
	n = add_rfile(out, n, max, s->debug_file, TALLY_RFILE_DEBUG, NULL, di);
	return n;
}
