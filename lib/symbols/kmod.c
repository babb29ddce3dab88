/* Kernel modules: finding .ko files, reading (and decompressing) them, placing
 * their symbols at the running kernel's addresses. */
#define _GNU_SOURCE
#include "internal.h"

/* ---- kernel modules ---- */

/* The module name of a .ko file name (ext4.ko.xz: ext4), '-' written '_' as the
 * kernel does; NULL when it is not a module file. */
static char *ko_norm(const char *file)
{
	static const char *const ext[] = { ".ko", ".ko.xz", ".ko.gz", ".ko.zst", ".ko.bz2" };
	size_t n = strlen(file);
	for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
		size_t e = strlen(ext[i]);
		if (n > e && !strcmp(file + n - e, ext[i])) {
			char *m = xstrndup(file, n - e);
			for (char *c = m; *c; c++)
				if (*c == '-')
					*c = '_';
			return m;
		}
	}
	return NULL;
}

/* Every .ko under dir, depth first in name order; symlinked directories are not
 * followed (no loops), files may be symlinks. At most *left entries are looked
 * at (a container's root given as --image-path can hold a whole system). */
static void ko_walk(struct tally_resolver *r, const char *dir, int depth, size_t *cap, size_t *left)
{
	struct dirent **ents = NULL;
	int n = depth > 12 || !*left ? -1 : scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		unsigned char t = ents[i]->d_type;
		struct strbuf p = STRBUF_INIT;
		struct stat st;
		char *norm = NULL;
		if ((nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2]))) || !*left)
			goto next;
		--*left;
		strbuf_addf(&p, "%s/%s", dir, nm);
		if (t == DT_UNKNOWN && lstat(p.buf, &st) == 0)
			t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISLNK(st.st_mode) ? DT_LNK : DT_REG;
		if (t == DT_DIR)
			ko_walk(r, p.buf, depth + 1, cap, left);
		else if ((t == DT_REG || t == DT_LNK) && (norm = ko_norm(nm)) &&
			 (t == DT_REG || (stat(p.buf, &st) == 0 && S_ISREG(st.st_mode)))) {
			GROW(r->ko, *cap, r->nko + 1);
			r->ko[r->nko++] = (struct kofile){ norm, strbuf_detach(&p) };
			norm = NULL;
		}
	next:
		free(norm);
		strbuf_release(&p);
		free(ents[i]);
	}
	free(ents);
}

/* Where module files are looked for, in order: each --image-path (opreport's
 * role for modules), /lib/modules/RELEASE of the recording, and its debug tree. */
static size_t ko_roots(struct tally_resolver *r, const char **roots, char **own, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; r->o.image_path && r->o.image_path[i] && n + 2 < max; i++)
		roots[n++] = r->o.image_path[i];
	*own = NULL;
	if (r->modules_dir && r->archive) {
		roots[n++] = r->modules_dir;
	} else if (r->modules_dir) {
		roots[n++] = r->modules_dir;
		struct strbuf d = STRBUF_INIT;
		strbuf_addf(&d, "/usr/lib/debug%s", r->modules_dir);
		*own = strbuf_detach(&d);
		roots[n++] = *own;
	}
	return n;
}

#define KO_WALK_MAX 200000

static void ko_index(struct tally_resolver *r)
{
	if (r->ko_walked)
		return;
	r->ko_walked = true;
	const char *roots[64];
	char *own;
	size_t n = ko_roots(r, roots, &own, 64), cap = 0;
	for (size_t i = 0; i < n; i++) {
		size_t left = KO_WALK_MAX;
		ko_walk(r, roots[i], 0, &cap, &left);
		if (!left)
			strbuf_addf(&r->ko_note, "the search under '%s' stopped after %d entries; ",
				    roots[i], KO_WALK_MAX);
	}
	free(own);
}

/* A .ko.zst into memory (libdwfl reads .xz, .gz and .bz2 itself); NULL with why. */
static void *zstd_file(const char *path, size_t *len, struct strbuf *why)
{
	struct strbuf in = STRBUF_INIT;
	if (tally_read_regular(&in, AT_FDCWD, path, TALLY_OPEN_FOLLOW, 1u << 30)) {
		strbuf_addstr(why, tally_errmsg());
		return NULL;
	}
	ZSTD_DStream *z = ZSTD_createDStream();
	size_t cap = in.len * 4 + 4096, used = 0;
	char *out = xmalloc(cap);
	ZSTD_inBuffer ib = { in.buf, in.len, 0 };
	size_t rc = z ? ZSTD_initDStream(z) : 0;
	bool bad = !z || ZSTD_isError(rc);
	while (!bad && ib.pos < ib.size) {
		if (cap - used < 65536) {
			if (cap > (1u << 30)) {
				bad = true;
				strbuf_addstr(why, "decompresses to over 1 GiB: not a module");
				break;
			}
			cap *= 2;
			out = xrealloc(out, cap);
		}
		ZSTD_outBuffer ob = { out + used, cap - used, 0 };
		rc = ZSTD_decompressStream(z, &ob, &ib);
		used += ob.pos;
		if (ZSTD_isError(rc)) {
			bad = true;
			strbuf_addf(why, "zstd: %s", ZSTD_getErrorName(rc));
		} else if (!ob.pos && ib.pos < ib.size && rc == 0) {
			break;
		}
	}
	if (!bad && rc != 0) {
		bad = true;
		strbuf_addstr(why, "zstd: the file ends inside a frame (truncated)");
	}
	ZSTD_freeDStream(z);
	strbuf_release(&in);
	if (bad) {
		if (!why->len)
			strbuf_addstr(why, "zstd: cannot decompress");
		free(out);
		return NULL;
	}
	*len = used;
	return out;
}

/* The release a module was built for, from its .modinfo vermagic; NULL when
 * it has none. Allocated. */
static char *ko_vermagic(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(nm, ".modinfo"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			return NULL;
		const char *p = d->d_buf, *end = p + d->d_size;
		while (p < end) {
			size_t l = strnlen(p, (size_t)(end - p));
			if (l > 9 && !strncmp(p, "vermagic=", 9))
				return xstrndup(p + 9, strcspn(p + 9, " "));
			p += l + 1;
		}
	}
	return NULL;
}

struct kosym {
	const char *name;
	uint64_t addr, size;
	uint32_t shndx;
	int count;
};

static bool kosym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct kosym *k = ctx;
	return !strcmp(k[idx].name, key);
}

/* Places the module's kernel.syms symbols in the .ko: each by its name, every
 * symbol of a section at the same distance, no recorded symbol shorter than
 * the .ko's. Returns how many were placed; 0 with why when the file does not
 * fit the recording (another build). */
static size_t kmod_place(struct tally_resolver *r, struct imgsyms *ks, uint32_t k, Dwfl_Module *mod,
			 struct strbuf *why)
{
	const struct tally_db *db = r->db;
	int n = dwfl_module_getsymtab(mod);
	struct kosym *t = xcalloc(n > 0 ? (size_t)n + 1 : 1, sizeof(*t));
	size_t nt = 0;
	struct tally_hidx idx = { 0 };
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!sym_func_sym(mod, i, &f))
			continue;
		uint64_t h = tally_hash_bytes(f.name, strlen(f.name), 0);
		uint32_t j = tally_hidx_get(&idx, h, f.name, kosym_eq, t);
		if (j != TALLY_HIDX_NONE) {
			t[j].count++;
			continue;
		}
		t[nt] = (struct kosym){ f.name, f.addr, f.sym.st_size, f.shndx, 1 };
		tally_hidx_put(&idx, h, (uint32_t)nt++);
	}
	/* per section: the distance its first placed symbol gave */
	uint32_t *sec = NULL;
	uint64_t *sec_delta = NULL;
	size_t nsec = 0, asec = 0, placed = 0, unknown = 0, ambiguous = 0;
	bool ok = true;
	for (size_t i = 0; i < db->nksyms && ok; i++) {
		if (ks->ksym_kmod[i] != k)
			continue;
		const struct tally_ksym *y = &db->ksyms[i];
		uint32_t j = tally_hidx_get(&idx, tally_hash_bytes(y->name, strlen(y->name), 0),
					    y->name, kosym_eq, t);
		if (j == TALLY_HIDX_NONE) {
			unknown++;
			continue;
		}
		if (t[j].count > 1) {
			ambiguous++;
			continue;
		}
		if (y->size && t[j].size > y->size) {
			strbuf_addf(why,
				    "'%s' is %" PRIu64 " bytes in it but %" PRIu64 " when recorded",
				    y->name, t[j].size, y->size);
			ok = false;
			break;
		}
		uint64_t d = y->addr - t[j].addr;
		size_t s;
		for (s = 0; s < nsec && sec[s] != t[j].shndx; s++)
			;
		if (s == nsec) {
			GROW(sec, asec, nsec + 1);
			sec_delta = xrealloc(sec_delta, asec * sizeof(*sec_delta));
			sec[nsec] = t[j].shndx;
			sec_delta[nsec++] = d;
		} else if (sec_delta[s] != d) {
			strbuf_addf(
				why,
				"'%s' is not where the other recorded functions of its section put it",
				y->name);
			ok = false;
			break;
		}
		ks->ksym_delta[i] = d;
		ks->ksym_placed[i] = true;
		placed++;
	}
	if (ok && !placed)
		strbuf_addf(why, "none of the %zu recorded function%s of the module is in it",
			    unknown + ambiguous, unknown + ambiguous == 1 ? "" : "s");
	else if (ok && (unknown || ambiguous))
		strbuf_addf(why,
			    "%zu recorded function%s placed (%zu not in it, %zu named twice in it)",
			    placed, placed == 1 ? "" : "s", unknown, ambiguous);
	else if (ok)
		strbuf_addf(why, "all %zu recorded function%s placed", placed,
			    placed == 1 ? "" : "s");
	if (!ok || !placed) {
		for (size_t i = 0; i < db->nksyms; i++)
			if (ks->ksym_kmod[i] == k)
				ks->ksym_placed[i] = false;
		placed = 0;
	}
	free(sec);
	free(sec_delta);
	free(t);
	tally_hidx_release(&idx);
	return placed;
}

/* Finds, verifies and places module k's .ko: the first file with its name that
 * has the recorded build-id (or, when none was recorded, the recording's
 * kernel release and a consistent layout). Logged in the module's own log. */
void sym_kmod_load(struct tally_resolver *r, struct imgsyms *ks, uint32_t k)
{
	struct kmod *km = &ks->kmods[k];
	struct imgsyms *s = &km->sub;
	const struct tally_db *db = r->db;
	km->state = -1;
	ko_index(r);
	const char *roots[64];
	char *own;
	size_t nroots = ko_roots(r, roots, &own, 64);
	struct strbuf rs = STRBUF_INIT;
	for (size_t i = 0; i < nroots; i++)
		strbuf_addf(&rs, "%s'%s'%s", i ? ", " : "", roots[i],
			    access(roots[i], F_OK) ? " (not there)" : "");
	free(own);
	sym_logf_(s, "looked for %s.ko (.xz, .gz, .zst, .bz2; '-' or '_') under %s", km->name,
		  nroots ? rs.buf : "nothing (the recording names no kernel release)");
	if (r->ko_note.len)
		sym_logf_(s, "%s(give the directory that holds the modules)", r->ko_note.buf);
	strbuf_release(&rs);
	const char *rel = tally_meta_get(&db->session, "kernel-release");
	const char *want = !strcmp(km->img.id_kind, "build-id") ? km->img.id : NULL;
	if (!want)
		sym_logf_(
			s,
			"no build-id was recorded for it: a file is used when it was built for kernel %s and its functions fit the recorded ones",
			rel ? rel : "(unknown)");
	size_t tried = 0;
	for (size_t f = 0; f < r->nko && km->state < 0; f++) {
		if (strcmp(r->ko[f].norm, km->name))
			continue;
		const char *path = r->ko[f].path;
		struct strbuf why = STRBUF_INIT;
		tried++;
		size_t plen = strlen(path);
		bool zst = plen > 4 && !strcmp(path + plen - 4, ".zst");
		bool plain = plen > 3 && !strcmp(path + plen - 3, ".ko");
		void *mem = NULL;
		size_t len = 0;
		if (zst && !(mem = zstd_file(path, &len, &why))) {
			sym_logf_(s, "'%s': %s: not used", path, why.buf);
			strbuf_release(&why);
			continue;
		}
		if (plain && sym_elf_damaged(path, &why)) {
			sym_logf_(s, "'%s': %s: not used", path,
				  why.buf + (strncmp(why.buf, ", but ", 6) ? 0 : 6));
			strbuf_release(&why);
			continue;
		}
		free(km->img.path);
		km->img.path = xstrdup(path);
		s->debug_searched = false;
		Dwfl_Module *mod = sym_report_module_mem(r, s, &km->img, path, mem, len);
		if (!mod) {
			free(mem);
			sym_logf_(s, "'%s': not a readable module", path);
			strbuf_release(&why);
			continue;
		}
		const unsigned char *bits;
		GElf_Addr vaddr;
		int nb = dwfl_module_build_id(mod, &bits, &vaddr);
		char hex[160] = "";
		if (nb > 0 && nb < 64)
			tally_hex(bits, (size_t)nb, hex);
		GElf_Addr bias;
		char *vm = ko_vermagic(dwfl_module_getelf(mod, &bias));
		bool fits = false;
		if (want && strcmp(hex, want)) {
			strbuf_addf(
				&why,
				"has build-id %s, the recording has %s: another build, not used",
				hex[0] ? hex : "(none)", want);
		} else if (!want && vm && rel && strcmp(vm, rel)) {
			strbuf_addf(&why, "built for kernel %s, the recording ran %s: not used", vm,
				    rel);
		} else {
			if (want)
				strbuf_addf(&why, "build-id %s matches; ", hex);
			else
				strbuf_addf(&why, "built for kernel %s; ",
					    vm ? vm : "(not said: no vermagic)");
			struct strbuf pw = STRBUF_INIT;
			fits = kmod_place(r, ks, k, mod, &pw) > 0;
			strbuf_addf(&why, "%s%s", pw.buf, fits ? ": used" : ": not used");
			strbuf_release(&pw);
		}
		free(vm);
		sym_logf_(s, "'%s': %s", path, why.buf);
		strbuf_release(&why);
		if (fits) {
			km->state = 1;
			km->mem = mem;
			s->mod = mod;
			s->bias = 0; /* addresses below are libdwfl's own (ET_REL: its layout) */
			free(s->file);
			s->file = xstrdup(path);
		} else {
			dwfl_end(s->dwfl);
			s->dwfl = NULL;
			free(mem);
		}
	}
	if (!tried)
		sym_logf_(s, "no file named so: functions from kernel.syms, no source lines");
	else if (km->state < 0) {
		/* a file was there but is not the module that ran: say so in every report */
		struct strbuf n = STRBUF_INIT;
		strbuf_addf(
			&n,
			"%s%smodule %s: no file found fits the recording (%zu tried): its functions are named from kernel.syms, without source lines (see --explain kernel)",
			ks->note ? ks->note : "", ks->note ? "; " : "", km->name, tried);
		free(ks->note);
		ks->note = strbuf_detach(&n);
		ks->loud = true;
	}
}

/* The kernel's modules with samples, each kernel.syms symbol tied to its module. */
void sym_kmods_init(struct tally_resolver *r, struct imgsyms *s)
{
	const struct tally_db *db = r->db;
	s->ksym_kmod = xcalloc(db->nksyms + 1, sizeof(*s->ksym_kmod));
	s->ksym_delta = xcalloc(db->nksyms + 1, sizeof(*s->ksym_delta));
	s->ksym_placed = xcalloc(db->nksyms + 1, sizeof(*s->ksym_placed));
	size_t cap = 0;
	for (size_t i = 0; i < db->nksyms; i++) {
		const char *m = db->ksyms[i].module;
		s->ksym_kmod[i] = UINT32_MAX;
		if (!m)
			continue;
		uint32_t k;
		for (k = 0; k < s->nkmods && strcmp(s->kmods[k].name, m); k++)
			;
		if (k == s->nkmods) {
			GROW(s->kmods, cap, s->nkmods + 1);
			struct kmod *km = &s->kmods[s->nkmods++];
			memset(km, 0, sizeof(*km));
			km->name = xstrdup(m);
			const struct tally_db_module *rec = NULL;
			for (size_t j = 0; j < db->nmods && !rec; j++)
				if (!strcmp(db->mods[j].name, m))
					rec = &db->mods[j];
			km->img = (struct tally_db_image){
				.name = km->name,
				.path = xstrdup(m),
				.id = rec && rec->build_id ? rec->build_id : (char *)"",
				.id_kind =
					rec && rec->build_id ? (char *)"build-id" : (char *)"none",
				.kind = (char *)"kmod"
			};
		}
		s->ksym_kmod[i] = k;
	}
	/* the subs point at their own identity (stable now: kmods is not grown again) */
	for (size_t k = 0; k < s->nkmods; k++) {
		s->kmods[k].sub.r = r;
		s->kmods[k].sub.image = s->image;
		s->kmods[k].sub.di = &s->kmods[k].img;
		s->kmods[k].sub.state = 1;
	}
}

/* For a kernel address in a module's function: the module's .ko (loaded on
 * first use) and the address in it; NULL when there is none to use. */
struct imgsyms *sym_kmod_at(struct tally_resolver *r, struct imgsyms *s,
			    const struct tally_sym *sym, uint64_t addr, uint64_t *koaddr,
			    const char **modname)
{
	if (!sym || !s->ksym_kmod || sym < s->syms || sym >= s->syms + s->nsyms)
		return NULL;
	size_t i = (size_t)(sym - s->syms);
	uint32_t k = s->ksym_kmod[i];
	if (k == UINT32_MAX)
		return NULL;
	struct kmod *km = &s->kmods[k];
	*modname = km->name;
	if (!km->state)
		sym_kmod_load(r, s, k);
	if (km->state != 1 || !s->ksym_placed[i])
		return NULL;
	*koaddr = addr - s->ksym_delta[i];
	return &km->sub;
}
