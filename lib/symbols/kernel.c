/* The kernel: kallsyms and vmlinux symbols, finding a vmlinux, loading the kernel image. */
#define _GNU_SOURCE
#include "internal.h"

static bool ksym_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_db *db = ctx;
	return !strcmp(db->ksyms[idx].name, key);
}

static int cmp_delta(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* --vmlinux: verified against the recorded kernel build-id, then placed where
 * the recorded kernel.syms say the running kernel was (KASLR). */
static void load_vmlinux(struct tally_resolver *r, struct imgsyms *s,
			 const struct tally_db_image *di, const char *path)
{
	if (path == r->o.vmlinux) {
		struct strbuf why = STRBUF_INIT;
		int ok = sym_check_file(di, path, &why);
		sym_logf_(s, "--vmlinux '%s': %s%s", path, why.buf,
			  ok == 1 ? "" : " (kernel functions still come from kernel.syms)");
		if (ok != 1) {
			sym_set_note(s, "--vmlinux '%s' %s", path, why.buf);
			s->loud = true;
			strbuf_release(&why);
			return;
		}
		strbuf_release(&why);
	}
	Dwfl_Module *mod = sym_report_module(r, s, di, path);
	if (!mod)
		return;
	GElf_Addr bias = 0;
	dwfl_module_getelf(mod, &bias);
	/* the offset between the recorded addresses and vmlinux's: the one most of
	 * the symbols both know agree on. kernel.syms keeps one address per name
	 * and a kernel has many static functions whose name another file uses too:
	 * each other copy gives a wrong offset, whichever comes first in .symtab. */
	int n = dwfl_module_getsymtab(mod);
	struct tally_hidx idx = { 0 };
	const struct tally_db *db = r->db;
	for (size_t i = 0; i < db->nksyms; i++) {
		const char *nm = db->ksyms[i].name;
		uint64_t h = tally_hash_bytes(nm, strlen(nm), 0);
		if (!db->ksyms[i].module &&
		    tally_hidx_get(&idx, h, nm, ksym_eq, db) == TALLY_HIDX_NONE)
			tally_hidx_put(&idx, h, (uint32_t)i);
	}
	uint64_t *ds = NULL;
	size_t nd = 0, ad = 0;
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!sym_func_sym(mod, i, &f) || !f.sym.st_value)
			continue;
		uint32_t k = tally_hidx_get(&idx, tally_hash_bytes(f.name, strlen(f.name), 0),
					    f.name, ksym_eq, db);
		if (k == TALLY_HIDX_NONE)
			continue;
		GROW(ds, ad, nd + 1);
		ds[nd++] = db->ksyms[k].addr - (f.addr - bias);
	}
	tally_hidx_release(&idx);
	tally_qsort(ds, nd, sizeof(*ds), cmp_delta);
	uint64_t delta = 0;
	size_t agree = 0, runner_up = 0;
	for (size_t i = 0, j; i < nd; i = j) {
		for (j = i; j < nd && ds[j] == ds[i]; j++)
			;
		if (j - i > agree) {
			runner_up = agree;
			agree = j - i;
			delta = ds[i];
		} else if (j - i > runner_up) {
			runner_up = j - i;
		}
	}
	free(ds);
	if (!agree || runner_up >= agree) {
		sym_logf_(
			s,
			"vmlinux: no symbol of it is at a consistent offset from the recorded kernel.syms: lines not used");
		sym_set_note(
			s,
			"--vmlinux '%s': its symbols are at no consistent offset from the recorded kernel.syms: no kernel source lines",
			path);
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return;
	}
	s->kdelta = delta;
	s->mod = mod;
	s->bias = bias;
	s->file = xstrdup(path);
	sym_logf_(s,
		  "vmlinux: placed at +0x%" PRIx64
		  " (kernel address layout randomization), from %zu symbols",
		  delta, agree);
	if (nd > agree)
		sym_logf_(
			s,
			"vmlinux: %zu other symbol%s of the same names (static functions that another file names alike) at other offsets: not used",
			nd - agree, nd - agree == 1 ? "" : "s");
}

/* No --vmlinux: the places where distributions and kernel builds leave the
 * running kernel's image (perf looks in the same ones), used only when its
 * build-id is the recorded kernel's. */
static void find_vmlinux(struct tally_resolver *r, struct imgsyms *s,
			 const struct tally_db_image *di)
{
	const char *rel = tally_meta_get(&r->db->session, "kernel-release");
	struct cand *c = NULL;
	size_t n = 0, a = 0;
	bool bid = !strcmp(di->id_kind, "build-id") && strlen(di->id) > 2;
	for (size_t i = 0; bid && r->o.debug_dirs && r->o.debug_dirs[i]; i++)
		sym_add_cand(&c, &n, &a, "--debug-dir build-id", false,
			     "%s/.build-id/%.2s/%s.debug", r->o.debug_dirs[i], di->id, di->id + 2);
	if (r->archive)
		sym_add_cand(&c, &n, &a, "in the archive", false, "%s/kernel/vmlinux", r->archive);
	else if (bid)
		sym_add_cand(&c, &n, &a, "system build-id directory", false,
			     "/usr/lib/debug/.build-id/%.2s/%s.debug", di->id, di->id + 2);
	if (rel && *rel && !strchr(rel, '/') && !r->archive) {
		static const char *const fmts[] = { "/usr/lib/debug/boot/vmlinux-%s",
						    "/usr/lib/debug/lib/modules/%s/vmlinux",
						    "/boot/vmlinux-%s",
						    "/lib/modules/%s/build/vmlinux",
						    "/usr/lib/debug/boot/vmlinux-%s.debug" };
		for (size_t i = 0; i < ARRAY_SIZE(fmts); i++) {
			struct strbuf p = STRBUF_INIT;
			strbuf_addf(&p, fmts[i], rel);
			sym_add_cand(&c, &n, &a, "the usual place", false, "%s", p.buf);
			strbuf_release(&p);
		}
	}
	struct strbuf why = STRBUF_INIT;
	const char *found = NULL;
	for (size_t i = 0; i < n && !found; i++) {
		if (access(c[i].path, F_OK) != 0)
			/* the usual places are usually empty: only files there are logged */
			continue;
		int ok = sym_check_file(di, c[i].path, &why);
		sym_logf_(s, "vmlinux '%s' (%s): %s%s", c[i].path, c[i].why, why.buf,
			  ok == 1 ? ": used" : "");
		if (ok == 1)
			found = c[i].path;
	}
	strbuf_release(&why);
	if (found)
		load_vmlinux(r, s, di, found);
	else
		sym_logf_(
			s,
			"no --vmlinux, and no image of the recorded kernel in %zu usual places (/usr/lib/debug/boot/vmlinux-RELEASE, /boot/vmlinux-RELEASE, ...): kernel functions from kernel.syms, no kernel source lines",
			n);
	sym_free_cands(c, n);
}

void sym_load_kernel(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
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
		s->syms[i] = (struct tally_sym){ db->ksyms[i].addr, db->ksyms[i].size,
						 s->names + offs[i], 0 };
	s->nsyms = db->nksyms;
	free(offs);
	sym_kmods_init(r, s);
	sym_logf_(
		s,
		"kernel.syms in the database: %zu symbols (those the samples needed, read from /proc/kallsyms while recording)",
		db->nksyms);
	if (!s->nsyms) {
		const char *why = tally_meta_get(&db->session, "kernel-symbols");
		sym_set_note(s, "the database has no kernel symbols%s%s", why ? ": " : "",
			     why ? why : "");
	}
	if (r->o.vmlinux)
		load_vmlinux(r, s, di, r->o.vmlinux);
	else
		find_vmlinux(r, s, di);
}
