/* DWARF scopes and inlines: source lines and inline chains of an address, the
 * frame cache behind tally_resolve_frames and tally_resolve_leaf. */
#define _GNU_SOURCE
#include "internal.h"

/* ---- DWARF: lines and inline chains ---- */

Dwarf *sym_get_dwarf(struct imgsyms *s)
{
	if (s->dwarf_state)
		return s->dw;
	s->dwarf_state = -1;
	if (!s->mod)
		return NULL;
	Dwarf_Addr b;
	s->dw = dwfl_module_getdwarf(s->mod, &b);
	if (s->dw) {
		s->dwarf_state = 1;
		const char *dbg = NULL, *mainf = NULL;
		dwfl_module_info(s->mod, NULL, NULL, NULL, NULL, NULL, &mainf, &dbg);
		sym_logf_(s, "DWARF (lines, inlines): from '%s'",
			  dbg     ? dbg
			  : mainf ? mainf
				  : s->file);
	} else {
		int e = dwfl_errno();
		sym_logf_(s, "DWARF (lines, inlines): none: %s",
			  e ? dwfl_errmsg(e) : "no debug info found");
	}
	return s->dw;
}

static bool has_pc_attr(Dwarf_Die *d)
{
	return dwarf_hasattr(d, DW_AT_low_pc) || dwarf_hasattr(d, DW_AT_ranges) ||
	       dwarf_hasattr(d, DW_AT_entry_pc);
}

/* The DIEs of the subprogram containing pc and the inlined subroutines within
 * it that contain pc, outermost first. Returns how many (at most max). */
static int scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, int max, int n,
		       int depth)
{
	Dwarf_Die child;
	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return n;
	do {
		switch (dwarf_tag(&child)) {
		case DW_TAG_subprogram:
		case DW_TAG_inlined_subroutine:
			if (dwarf_haspc(&child, pc) == 1) {
				if (n < max)
					chain[n++] = child;
				return scope_chain(&child, pc, chain, max, n, depth + 1);
			}
			break;
		case DW_TAG_lexical_block:
		case DW_TAG_try_block:
		case DW_TAG_catch_block:
			if (!has_pc_attr(&child) || dwarf_haspc(&child, pc) == 1) {
				int m = scope_chain(&child, pc, chain, max, n, depth + 1);
				if (m > n || has_pc_attr(&child))
					return m;
			}
			break;
		case DW_TAG_namespace:
		case DW_TAG_class_type:
		case DW_TAG_structure_type:
		case DW_TAG_union_type:
		case DW_TAG_module: {
			int m = scope_chain(&child, pc, chain, max, n, depth + 1);
			if (m > n)
				return m;
			break;
		}
		default:
			break;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return n;
}

static const char *call_file(Dwarf_Die *cu, Dwarf_Die *die, int *line)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &v) == 0)
		*line = (int)v;
	Dwarf_Files *files;
	size_t nfiles;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &v) != 0 ||
	    dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || v >= nfiles)
		return NULL;
	return dwarf_filesrc(files, v, NULL, NULL);
}

static void push_frame(struct tally_resolver *r, const char *name, const char *file, int line,
		       bool inl, uint64_t addr)
{
	GROW(r->frames, r->aframes, r->nframes + 1);
	r->frames[r->nframes++] = (struct tally_srcframe){ name, file, line, inl, addr };
}

static bool path_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_resolver *r = ctx;
	return !strcmp(r->paths[idx], key);
}

/* sb's text, kept once for the resolver's life; sb is released. */
static const char *intern(struct tally_resolver *r, struct strbuf *sb)
{
	uint64_t h = tally_hash_bytes(sb->buf, strlen(sb->buf), 0);
	uint32_t i = tally_hidx_get(&r->path_idx, h, sb->buf, path_eq, r);
	if (i == TALLY_HIDX_NONE) {
		GROW(r->paths, r->apaths, r->npaths + 1);
		r->paths[r->npaths] = strbuf_detach(sb);
		tally_hidx_put(&r->path_idx, h, (uint32_t)r->npaths);
		i = (uint32_t)r->npaths++;
	}
	strbuf_release(sb);
	return r->paths[i];
}

/* A line table's file name as an absolute path: a relative name is joined to the
 * CU's DW_AT_comp_dir, and "." and "dir/.." are folded (as the compiler wrote
 * them, without looking at the file system). A relative DW_AT_comp_dir
 * ("./malloc": packages built with -fdebug-prefix-map) leaves the name
 * relative, there being no absolute one to know; and it is not joined to a
 * name libdw has already joined it to (the line table's directory 0 is the
 * same directory: joining it twice made "malloc/malloc/malloc.c").
 * Interned: lives with the resolver. */
static const char *abs_srcpath(struct tally_resolver *r, Dwarf_Die *cu, const char *file)
{
	if (!file)
		return NULL;
	struct strbuf sb = STRBUF_INIT;
	Dwarf_Attribute at;
	const char *dir =
		file[0] == '/' ? NULL : dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &at));
	size_t dl = dir ? strlen(dir) : 0;
	if (dir && dir[0] != '/' && !strncmp(file, dir, dl) && file[dl] == '/')
		dir = NULL;
	if (dir)
		strbuf_addf(&sb, "%s/", dir);
	strbuf_addstr(&sb, file);
	/* fold components in place: out only ever moves back to a '/' it wrote */
	char *start = sb.buf + (sb.buf[0] == '/'), *in = start, *out = start;
	while (*in) {
		char *end = strchrnul(in, '/');
		bool more = *end != '\0'; /* (the '/' written below may land on the NUL) */
		size_t n = (size_t)(end - in);
		bool dotdot = n == 2 && in[0] == '.' && in[1] == '.';
		char *last = out; /* the start of the last component written */
		if (out > start)
			for (last = out - 1; last > start && last[-1] != '/'; last--)
				;
		if (n == 0 || (n == 1 && in[0] == '.')) {
			/* nothing */
		} else if (dotdot && out > start && strncmp(last, "../", 3)) {
			out = last;
		} else {
			memmove(out, in, n);
			out += n;
			*out++ = '/';
		}
		if (!more)
			break;
		in = end + 1;
	}
	if (out > start && out[-1] == '/')
		out--;
	*out = '\0';
	sb.len = (size_t)(out - sb.buf);
	return intern(r, &sb);
}

/* name with the module it is in, " [mod]" as kernel.syms writes it; interned */
static const char *in_module(struct tally_resolver *r, const char *name, const char *mod)
{
	if (!name || !mod)
		return name;
	struct strbuf sb = STRBUF_INIT;
	strbuf_addf(&sb, "%s [%s]", name, mod);
	return intern(r, &sb);
}

/* The DIE that declares die: its abstract origin (an inlined copy), then its
 * specification (a member function defined outside its class). */
static void decl_die(Dwarf_Die *die, Dwarf_Die *out)
{
	*out = *die;
	Dwarf_Attribute a;
	Dwarf_Die d;
	for (int k = 0; k < 4; k++) {
		if (dwarf_attr(out, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &d))
			*out = d;
		else if (dwarf_attr(out, DW_AT_specification, &a) && dwarf_formref_die(&a, &d))
			*out = d;
		else
			break;
	}
}

/* A function's name as the symbol table would give it: its linkage name
 * demangled ("ns::Cls::size() const"), else its name qualified by the
 * namespaces and classes around its declaration ("ns::Cls::size"), so two
 * inlined functions with one bare name are told apart. Interned. */
static const char *die_name(struct tally_resolver *r, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	if (!link)
		link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
	if (link && r->o.no_demangle)
		return link;
	struct strbuf sb = STRBUF_INIT;
	char *d = link ? tally_demangle(link) : NULL;
	if (d) {
		strbuf_addstr(&sb, d);
		free(d);
		return intern(r, &sb);
	}
	const char *name = dwarf_diename(die);
	if (!name)
		return NULL;
	Dwarf_Die decl, *scopes = NULL;
	decl_die(die, &decl);
	int n = dwarf_getscopes_die(&decl, &scopes);
	/* scopes[0] is decl itself, the last its compile unit */
	for (int k = n - 1; k >= 1; k--) {
		int tag = dwarf_tag(&scopes[k]);
		if (tag != DW_TAG_namespace && tag != DW_TAG_class_type &&
		    tag != DW_TAG_structure_type && tag != DW_TAG_union_type &&
		    tag != DW_TAG_module)
			continue;
		const char *sn = dwarf_diename(&scopes[k]);
		strbuf_addf(&sb, "%s::",
			    sn                        ? sn
			    : tag == DW_TAG_namespace ? "(anonymous namespace)"
						      : "(anonymous)");
	}
	free(scopes);
	if (!sb.len)
		return name;
	strbuf_addstr(&sb, name);
	return intern(r, &sb);
}

static void compute_frames(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || s->mismatch)
		return;
	const struct tally_db_image *di = &r->db->images[image];
	uint64_t off = offset - (ret && offset ? 1 : 0);
	const struct tally_sym *sym = tally_resolve(r, image, off);
	const char *outer = sym ? sym->name : NULL;
	uint64_t outer_addr = sym ? sym->addr : 0;
	size_t first = r->nframes;
	uint64_t addr = 0;
	Dwarf *dw = NULL;
	/* where the DWARF is: the image's own file, or for the kernel, --vmlinux or a module's .ko
	 */
	struct imgsyms *d = s;
	const char *modname = NULL;
	/* DWARF is for inlines and lines: a --symbols --no-inline report never reads it */
	bool want = !r->o.no_inline || r->o.lines;
	if (want && sym_is_file_kind(di)) {
		if (sym_offset_to_addr(s, off, &addr))
			dw = sym_get_dwarf(s);
	} else if (want && !strcmp(di->kind, "kernel")) {
		/* a module's code: its .ko, never vmlinux */
		struct imgsyms *m = sym_kmod_at(r, s, sym, off, &addr, &modname);
		if (m) {
			d = m;
			dw = sym_get_dwarf(m);
		} else if (!modname && s->mod) {
			addr = off - s->kdelta;
			dw = sym_get_dwarf(s);
		}
	}
	if (dw) {
		Dwarf_Addr modaddr = addr + d->bias, cubias = 0;
		dwfl_errno(); /* clear */
		Dwarf_Die *cu = dwfl_module_addrdie(d->mod, modaddr, &cubias);
		if (cu) {
			Dwarf_Addr pc = modaddr - cubias;
			const char *file = NULL;
			int line = 0;
			Dwarf_Line *l = dwarf_getsrc_die(cu, pc);
			if (l) {
				file = abs_srcpath(r, cu, dwarf_linesrc(l, NULL, NULL));
				dwarf_lineno(l, &line);
			}
			Dwarf_Die chain[32];
			int n = scope_chain(cu, pc, chain, 32, 0, 0);
			if (r->o.no_inline)
				n = n ? 1 : 0;
			/* innermost first: each inlined frame's location, then its call site in the
			 * next */
			for (int i = n - 1; i >= 1; i--) {
				Dwarf_Attribute a;
				Dwarf_Die origin;
				uint64_t key = dwarf_dieoffset(&chain[i]);
				if (dwarf_attr(&chain[i], DW_AT_abstract_origin, &a) &&
				    dwarf_formref_die(&a, &origin))
					key = dwarf_dieoffset(&origin);
				push_frame(r, in_module(r, die_name(r, &chain[i]), modname), file,
					   line, true, key);
				file = abs_srcpath(r, cu, call_file(cu, &chain[i], &line));
			}
			if (!outer && n)
				outer = in_module(r, die_name(r, &chain[0]), modname);
			if (outer || file)
				push_frame(r, outer, file, line, false, outer_addr);
		} else if (sym) {
			/* code the symbol table knows but no compile unit covers: DWARF that is
			 * damaged, or partial (code built without -g) */
			int e = dwfl_errno();
			if (!d->dwarf_missing++ ||
			    (e && !strcmp(d->dwarf_err, "no compile unit covers it"))) {
				free(d->dwarf_err);
				const char *m = e ? dwfl_errmsg(e) : NULL;
				d->dwarf_err = xstrdup(m && !strstr(m, "out of range")
							       ? m
							       : "no compile unit covers it");
			}
		}
	}
	if (r->nframes == first && outer && s->jd) {
		/* JIT code: the jitdump's line records */
		const char *file;
		unsigned line;
		if (!tally_resolver_jit_line(r, image, off, &file, &line))
			push_frame(r, outer, file, (int)line, false, outer_addr);
	}
	if (r->nframes == first && outer)
		push_frame(r, outer, NULL, 0, false, outer_addr);
}

static bool fc_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct tally_resolver *r = ctx;
	const struct fcache *k = key, *c = &r->fc[idx];
	return c->image == k->image && c->offset == k->offset && c->ret == k->ret;
}

/* The frame of (image, offset) when it can only be its symbol's (no DWARF to
 * read there, no jitdump): kept once per symbol, not once per offset, since a
 * profile of millions of distinct addresses (a daemon's weeks) would otherwise
 * hold a cache entry, its index slot and its frame for each. 1 or 0 frames;
 * -1 when DWARF or a jitdump may say more (the cache by offset then). */
static int symbol_frame(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret,
			const struct tally_srcframe **out)
{
	struct imgsyms *s = sym_get(r, image);
	if (!s || s->jd)
		return -1;
	bool want = !r->o.no_inline || r->o.lines; /* as compute_frames asks for DWARF */
	if (want && ((s->file_kind && s->dwarf_state != -1) || s->kernel))
		return -1;
	const struct tally_sym *sym =
		s->mismatch ? NULL : tally_resolve(r, image, offset - (ret && offset ? 1 : 0));
	if (!sym) {
		*out = NULL;
		return 0;
	}
	if (sym < s->syms || sym >= s->syms + s->nsyms)
		return -1; /* a section's label, made for the address */
	if (!s->symframe)
		s->symframe = xcalloc(s->nsyms, sizeof(*s->symframe));
	uint32_t *m = &s->symframe[sym - s->syms];
	if (!*m) {
		push_frame(r, sym->name, NULL, 0, false, sym->addr);
		*m = (uint32_t)r->nframes;
	}
	*out = &r->frames[*m - 1];
	return 1;
}

size_t tally_resolve_frames(struct tally_resolver *r, uint32_t image, uint64_t offset, bool ret,
			    const struct tally_srcframe **out)
{
	int one = symbol_frame(r, image, offset, ret, out);
	if (one >= 0)
		return (size_t)one;
	struct fcache k = { image, ret, offset, 0, 0 };
	uint64_t h = tally_hash_u64(offset ^ ((uint64_t)image << 40) ^ ((uint64_t)ret << 63));
	uint32_t i = tally_hidx_get(&r->fc_idx, h, &k, fc_eq, r);
	if (i == TALLY_HIDX_NONE) {
		k.first = (uint32_t)r->nframes;
		compute_frames(r, image, offset, ret);
		k.n = (uint32_t)(r->nframes - k.first);
		GROW(r->fc, r->afc, r->nfc + 1);
		r->fc[r->nfc] = k;
		tally_hidx_put(&r->fc_idx, h, (uint32_t)r->nfc);
		i = (uint32_t)r->nfc++;
	}
	*out = r->fc[i].n ? &r->frames[r->fc[i].first] : NULL;
	return r->fc[i].n;
}

void tally_resolve_leaf(struct tally_resolver *r, uint32_t image, uint64_t offset,
			struct tally_leaf *out)
{
	memset(out, 0, sizeof(*out));
	out->name = "[unknown]";
	if (tally_resolver_mismatch(r, image)) {
		/* a changed file: raw offsets are the only honest answer */
		snprintf(out->buf, sizeof(out->buf), "[offset 0x%" PRIx64 "]", offset);
		out->name = out->buf;
		out->addr = offset;
		out->has_addr = true;
		return;
	}
	const struct tally_srcframe *fr;
	if (!tally_resolve_frames(r, image, offset, false, &fr))
		return;
	if (fr[0].name) {
		out->name = fr[0].name;
		out->addr = fr[0].addr;
		out->has_addr = !fr[0].inlined;
		out->inlined = fr[0].inlined;
	}
	out->file = fr[0].file;
	out->line = fr[0].line;
}
