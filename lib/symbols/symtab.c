/* Symbol tables and libdwfl: finding an image's file, reporting it to libdwfl,
 * reading its symbol tables, and loading file-backed and JIT images. */
#define _GNU_SOURCE
#include "internal.h"

/* ---- loading an image ---- */

static char *strip_deleted(const char *path)
{
	const char *del = strstr(path, " (deleted)");
	return del ? xstrndup(path, (size_t)(del - path)) : xstrdup(path);
}

/* Whether path is a separate debug file (objcopy --only-keep-debug, a distro's
 * .debug): its code sections are there but empty (SHT_NOBITS), so it has the
 * image's build-id and symbols but never its code nor its file offsets. */
static bool debug_only(const char *path)
{
	int fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL);
	if (fd < 0)
		return false;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t code = 0, empty = 0;
	Elf_Scn *scn = NULL;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR))
			continue;
		code++;
		empty += sh.sh_type == SHT_NOBITS;
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return code && empty == code;
}

/* The image file: --image-path, then --mapfile, then the recorded path, then
 * the build-id cache's copy; the first that is the recorded file. *mismatch
 * when one was found but was another file (and changed says the first such).
 * Logged. */
static char *find_file(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		       bool *mismatch, struct strbuf *damaged, struct strbuf *changed)
{
	struct cand *c = NULL;
	size_t n = 0, a = 0;
	char *p = strip_deleted(di->path);
	for (size_t i = 0; r->o.image_path && r->o.image_path[i]; i++) {
		/* opreport's --image-path: the file by name under each directory, then by its whole
		 * path */
		sym_add_cand(&c, &n, &a, "--image-path", false, "%s/%s", r->o.image_path[i],
			     tally_basename(p));
		if (p[0] == '/')
			sym_add_cand(&c, &n, &a, "--image-path with the recorded path", false,
				     "%s%s", r->o.image_path[i], p);
	}
	if (r->o.map && strcmp(di->id_kind, "none")) {
		size_t first, m = tally_imgmap_find(r->o.map, di->id, &first);
		for (size_t i = 0; i < m; i++)
			sym_add_cand(&c, &n, &a, "--mapfile", false, "%s",
				     r->o.map->e[first + i].path);
	}
	if (r->archive) {
		/* never the file that has the recorded path on this machine */
		struct strbuf m = STRBUF_INIT;
		tally_db_image_member(di, &m);
		sym_add_cand(&c, &n, &a, "in the archive", false, "%s/%s", r->archive, m.buf);
		strbuf_release(&m);
	} else {
		sym_add_cand(&c, &n, &a, "recorded path", false, "%s", p);
	}
	free(p);
	/* last, the copy a recording kept (not when the recorded path is the file) */
	char key[TALLY_CACHE_KEY_MAX];
	struct tally_cache *cache = tally_cache_key(di->id_kind, di->id, key) ? sym_cache(r) : NULL;
	size_t ncache = SIZE_MAX;
	/* a regular file only: never a link, even in the user's own cache */
	if (cache && tally_cache_has(cache, key, TALLY_CACHE_IMAGE)) {
		ncache = n;
		sym_add_cand(&c, &n, &a, "the build-id cache", false, "%s/%s/image", cache->path,
			     key);
	}
	char *found = NULL;
	struct strbuf why = STRBUF_INIT;
	for (size_t i = 0; i < n && !found; i++) {
		if (access(c[i].path, F_OK) != 0) {
			sym_logf_(s, "image file '%s' (%s): not there", c[i].path, c[i].why);
			continue;
		}
		int ok = sym_check_file(di, c[i].path, &why);
		if (ok == 1 && debug_only(c[i].path)) {
			/* the right id, but no code: the debug search may use it, the image is
			 * elsewhere */
			sym_logf_(
				s,
				"image file '%s' (%s): %s, but it is a separate debug file (its code sections are empty): not the image",
				c[i].path, c[i].why, why.buf);
			continue;
		}
		sym_logf_(s, "image file '%s' (%s): %s%s", c[i].path, c[i].why, why.buf,
			  ok == 1 ? ": used" : "");
		if (ok == 0 && !*mismatch && changed)
			strbuf_addstr(changed, c[i].path);
		if (ok == 0)
			*mismatch = true;
		if (ok == -2 && !damaged->len)
			strbuf_addf(damaged, "'%s' %s", c[i].path, why.buf);
		struct stat st;
		/* a FIFO, a device or a directory where the file was: said, not "not there" */
		if (ok == -1 && !damaged->len && stat(c[i].path, &st) == 0 && !S_ISREG(st.st_mode))
			strbuf_addstr(damaged, why.buf);
		if (ok == 1)
			found = xstrdup(c[i].path);
		if (ok == 1 && i == ncache) {
			s->from_cache = true;
			tally_cache_touch(cache, key);
		}
	}
	strbuf_release(&why);
	sym_free_cands(c, n);
	return found;
}

/* Reports path to a fresh Dwfl as the image's module; NULL with a note on failure. */
Dwfl_Module *sym_report_module_mem(struct tally_resolver *r, struct imgsyms *s,
				   const struct tally_db_image *di, const char *path, void *mem,
				   size_t len)
{
	if (s->dwfl)
		dwfl_end(s->dwfl);
	s->dwfl = dwfl_begin(&r->cb);
	if (!s->dwfl) {
		sym_set_note(s, "libdwfl: %s", dwfl_errmsg(-1));
		return NULL;
	}
	/* opened here, not by libdwfl: a file swapped for a FIFO since it was
	 * checked must not hang the report */
	int fd = -1;
	if (!mem && (fd = tally_open_regular(AT_FDCWD, path, TALLY_OPEN_FOLLOW, 0, NULL)) < 0) {
		sym_logf_(s, "%s", tally_errmsg());
		sym_set_note(s, "%s (skipped)", tally_errmsg());
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return NULL;
	}
	dwfl_report_begin(s->dwfl);
	Dwfl_Module *mod = mem ? dwfl_report_offline_memory(s->dwfl, di->name, path, mem, len)
			       : dwfl_report_offline(s->dwfl, di->name, path, fd);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (!mod && fd >= 0)
		close(fd); /* libdwfl keeps it only on success */
	if (!mod) {
		sym_logf_(s, "'%s' cannot be read as ELF: %s", path, dwfl_errmsg(-1));
		sym_set_note(s, "'%s' is not a readable ELF file: %s (skipped)", path,
			     dwfl_errmsg(-1));
		s->loud = true;
		dwfl_end(s->dwfl);
		s->dwfl = NULL;
		return NULL;
	}
	void **ud;
	dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = s;
	return mod;
}

Dwfl_Module *sym_report_module(struct tally_resolver *r, struct imgsyms *s,
			       const struct tally_db_image *di, const char *path)
{
	return sym_report_module_mem(r, s, di, path, NULL, 0);
}

/* A symbol of a libdwfl module: addr is libdwfl's (the bias included), shndx the
 * section index resolved, elf the file it came from. */
/* Symbol i of mod, when it is a defined function (or ifunc) with a name. */
bool sym_func_sym(Dwfl_Module *mod, int i, struct fsym *f)
{
	Dwarf_Addr sbias;
	f->name = dwfl_module_getsym_info(mod, i, &f->sym, &f->addr, &f->shndx, &f->elf, &sbias);
	int t = f->name ? GELF_ST_TYPE(f->sym.st_info) : STT_NOTYPE;
	return f->name && *f->name && f->sym.st_shndx != SHN_UNDEF &&
	       (t == STT_FUNC || t == STT_GNU_IFUNC);
}

/* ---- functions without symbols: .eh_frame FDE boundaries ---- */

static bool read_enc4(const uint8_t *p, const uint8_t *end, uint8_t enc, int64_t *v)
{
	/* the encodings linkers write into .eh_frame_hdr: 4-byte values only */
	if ((enc & 0x0f) != 0x03 && (enc & 0x0f) != 0x0b)
		return false;
	if (end - p < 4)
		return false;
	uint32_t u;
	memcpy(&u, p, 4);
	*v = (enc & 0x0f) == 0x0b ? (int64_t)(int32_t)u : (int64_t)u;
	return true;
}

static bool sym_overlaps(const struct tally_sym *syms, size_t n, uint64_t start, uint64_t end)
{
	/* syms sorted by address: the last one starting before end, and the one before it */
	size_t lo = end ? TALLY_UPPER_U64(syms, n, addr, end - 1) : 0;
	for (size_t k = lo; k > 0 && k + 2 >= lo; k--) {
		const struct tally_sym *y = &syms[k - 1];
		if (y->addr < end && start < y->addr + (y->size ? y->size : 1))
			return true;
	}
	return false;
}

/* Every function of an ELF still has an FDE in .eh_frame, with its start and
 * size, even stripped: each FDE that no symbol covers becomes a function named
 * IMAGE+0xADDR (its link-time address, as objdump and perf show it). The start
 * addresses come from the sorted table of .eh_frame_hdr; the ranges from
 * libdw's CFI (dwarf_cfi_addrframe, dwarf_frame_info). Returns how many. */
static size_t add_fde_syms(struct imgsyms *s, Elf *elf, const char *label)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL, *hdr = NULL;
	GElf_Shdr hsh;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (nm = elf_strptr(elf, shstrndx, sh.sh_name)) && !strcmp(nm, ".eh_frame_hdr")) {
			hdr = scn;
			hsh = sh;
			break;
		}
	}
	Elf_Data *d = hdr ? elf_getdata(hdr, NULL) : NULL;
	if (!d || !d->d_buf || d->d_size < 8) {
		if (hdr)
			sym_logf_(
				s,
				".eh_frame_hdr is empty or unreadable: functions without symbols keep the section's name");
		return 0;
	}
	const uint8_t *p = d->d_buf, *end = p + d->d_size;
	/* version, eh_frame_ptr encoding, fde_count encoding, table encoding */
	uint8_t ver = p[0], ptr_enc = p[1], cnt_enc = p[2], tab_enc = p[3];
	int64_t ptr, count;
	if (ver != 1 || ptr_enc == 0xff || cnt_enc == 0xff ||
	    tab_enc != 0x3b /* datarel sdata4 */ || !read_enc4(p + 4, end, ptr_enc, &ptr) ||
	    !read_enc4(p + 8, end, cnt_enc, &count) || count < 0 ||
	    (uint64_t)count > (uint64_t)(end - (p + 12)) / 8) {
		sym_logf_(
			s,
			".eh_frame_hdr has no search table tally reads (version %u, table encoding 0x%x): functions without symbols keep the section's name",
			ver, tab_enc);
		return 0;
	}
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	if (!cfi) {
		sym_logf_(s, ".eh_frame: %s", dwarf_errmsg(-1));
		return 0;
	}
	size_t nreal = s->nsyms, cap = s->nsyms, added = 0;
	const uint8_t *t = p + 12;
	for (int64_t i = 0; i < count; i++, t += 8) {
		int64_t loc, next_loc = INT64_MAX;
		if (!read_enc4(t, end, 0x0b, &loc))
			break;
		if (i + 1 < count && !read_enc4(t + 8, end, 0x0b, &next_loc))
			next_loc = INT64_MAX;
		/* datarel: from the start of .eh_frame_hdr */
		uint64_t start = hsh.sh_addr + (uint64_t)loc,
			 limit = hsh.sh_addr + (uint64_t)next_loc, fend = start;
		/* a function a symbol names already: its FDE's extent is not needed
		 * (walking the CFI rows of every FDE of a libc with symbols was most
		 * of what loading them cost) */
		if (sym_overlaps(s->syms, nreal, start, start + 1))
			continue;
		if (next_loc == INT64_MAX || limit <= start)
			limit = UINT64_MAX;
		/* dwarf_frame_info gives the range of one row of the FDE's table: walk
		 * the rows to the FDE's end (where no FDE, or the next one, begins) */
		for (int rows = 0; rows < 4096 && fend < limit; rows++) {
			Dwarf_Frame *fr = NULL;
			Dwarf_Addr rs, re;
			if (dwarf_cfi_addrframe(cfi, fend, &fr) != 0)
				break;
			bool ok = dwarf_frame_info(fr, &rs, &re, NULL) >= 0 && re > fend;
			free(fr);
			if (!ok)
				break;
			fend = re < limit ? re : limit;
		}
		if (fend <= start || sym_overlaps(s->syms, nreal, start, fend))
			continue;
		struct strbuf nm = STRBUF_INIT;
		strbuf_addf(&nm, "%s+0x%" PRIx64, label, (uint64_t)start);
		GROW(s->owned, s->aowned, s->nowned + 1);
		s->owned[s->nowned++] = strbuf_detach(&nm);
		GROW(s->syms, cap, s->nsyms + 1);
		s->syms[s->nsyms++] = (struct tally_sym){ start, fend - start,
							  s->owned[s->nowned - 1], TALLY_SYM_FDE };
		added++;
	}
	dwarf_cfi_end(cfi); /* made here by dwarf_getcfi_elf: ours to free */
	return added;
}

static void load_tables(struct imgsyms *s, const char *path, bool debug_only)
{
	Dwfl_Module *mod = s->mod;
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	s->bias = bias;
	s->have_symtab = sym_elf_has_section(elf, ".symtab");
	size_t nph = 0;
	if (elf && elf_getphdrnum(elf, &nph) == 0) {
		s->ph = xcalloc(nph + 1, sizeof(*s->ph));
		uint64_t base = UINT64_MAX;
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    ph.p_vaddr < base)
				base = ph.p_vaddr;
		}
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (!debug_only)
				s->ph[s->nph++] =
					(struct phdr){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
			else if (ph.p_flags & PF_X)
				/* a debug file keeps the addresses, not the binary's file offsets:
				 * code segments sit at their address from the first sym_load (the
				 * linkers' usual layout) */
				s->ph[s->nph++] =
					(struct phdr){ ph.p_vaddr - base, ph.p_memsz, ph.p_vaddr };
		}
		if (debug_only)
			sym_logf_(s,
				  "file offsets of code taken as address - 0x%" PRIx64
				  " (the debug file has no file offsets of the binary)",
				  base == UINT64_MAX ? 0 : base);
	}
	/* executable sections: a zero-size symbol ends with its section, and code in
	 * no symbol (PLT stubs) is named after its section */
	size_t shstrndx, scap = 0;
	if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
			    (sh.sh_type != SHT_PROGBITS && sh.sh_type != SHT_NOBITS))
				continue;
			const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
			struct strbuf lb = STRBUF_INIT;
			strbuf_addf(&lb, "[%s]", nm ? nm : "?");
			GROW(s->secs, scap, s->nsecs + 1);
			s->secs[s->nsecs++] = (struct section){ sh.sh_addr, sh.sh_addr + sh.sh_size,
								strbuf_detach(&lb) };
		}
	}
	/* libdwfl takes .symtab from the file, else from its debug file (the search
	 * below runs then), else .gnu_debugdata, else .dynsym */
	int n = dwfl_module_getsymtab(mod);
	size_t cap = 0;
	Elf *other = NULL; /* the debug file the symbols came from, looked at once */
	for (int i = 0; i < n; i++) {
		struct fsym f;
		if (!sym_func_sym(mod, i, &f))
			continue;
		const char *name = f.name;
		GElf_Sym sym = f.sym;
		GElf_Addr addr = f.addr;
		if (f.elf != elf && f.elf != other) {
			/* once per file, not once per symbol: a walk of its section
			 * headers for each of libc's thousands of symbols was a third
			 * of what loading it cost */
			other = f.elf;
			s->have_symtab = s->have_symtab || sym_elf_has_section(f.elf, ".symtab");
		}
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
							  b == STB_GLOBAL ? 0
							  : b == STB_WEAK ? 1
									  : 2 };
	}
	if (n < 0)
		sym_logf_(s, "symbol table: %s", dwfl_errmsg(-1));
	size_t named = s->nsyms;
	sym_finish_syms(s);
	if (!debug_only) {
		/* a debug file's .eh_frame is empty: only the binary's is read */
		const struct tally_db_image *di = s->di  ? s->di
						  : s->r ? &s->r->db->images[s->image]
							 : NULL;
		size_t nf = add_fde_syms(
			s, elf, di && di->name && *di->name ? di->name : tally_basename(path));
		s->nfde = nf;
		if (nf) {
			sym_logf_(
				s,
				"%zu function%s without a symbol, from .eh_frame: named IMAGE+0xADDRESS",
				nf, nf == 1 ? "" : "s");
			sym_finish_syms(s);
		}
	}
	if (!named)
		sym_set_note(
			s,
			"'%s' has no function symbols%s (install its debug package, give --debug-dir, or see --explain)",
			path,
			s->nsyms ? ": its functions are named by address, from .eh_frame" : "");
}

void sym_load_dwfl(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		   const char *path, bool verify)
{
	struct strbuf why = STRBUF_INIT;
	if (verify) {
		int ok = sym_check_file(di, path, &why);
		sym_logf_(s, "image file '%s': %s%s", path, why.buf, ok == 1 ? ": used" : "");
		if (ok != 1) {
			s->mismatch = ok == 0;
			sym_set_note(s, "'%s' %s", path, why.buf);
			s->loud = true;
			strbuf_release(&why);
			return;
		}
	}
	strbuf_release(&why);
	s->mod = sym_report_module(r, s, di, path);
	if (!s->mod)
		return;
	free(s->file);
	s->file = xstrdup(path);
	load_tables(s, path, false);
}

void sym_load_file(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	bool mismatch = false;
	struct strbuf damaged = STRBUF_INIT, changed = STRBUF_INIT;
	char *path = find_file(r, s, di, &mismatch, &damaged, &changed);
	if (path) {
		sym_load_dwfl(r, s, di, path, false);
		if (s->from_cache && !s->note && changed.len) {
			/* named right, from the file that ran; but its source may have
			 * changed too, which annotate and --lines would show */
			sym_set_note(
				s,
				"'%s' is not the file that was recorded (%s %s%s): named from its copy in the build-id cache ('%s')%s",
				changed.buf, di->id_kind, di->id,
				di->foreign_ns ? "; it was mapped inside a container" : "", path,
				di->foreign_ns ? ""
					       : ", though its source files may have changed too");
			s->loud = true;
		} else if (s->from_cache && !s->note && damaged.len) {
			sym_set_note(s, "%s: named from its copy in the build-id cache ('%s')",
				     damaged.buf, path);
			s->loud = true;
		} else if (s->from_cache && !s->note) {
			sym_set_note(
				s,
				"'%s' is not on this machine: named from its copy in the build-id cache ('%s')",
				di->path, path);
		}
		free(path);
		strbuf_release(&damaged);
		strbuf_release(&changed);
		return;
	}
	strbuf_release(&changed);
	/* no image file: its debug file (found by build-id) has the symbols and
	 * DWARF, and its program headers still map file offsets to addresses */
	char *dpath = NULL;
	int fd = -1;
	if (!strcmp(di->id_kind, "build-id")) {
		sym_logf_(s, "no image file: looking for its debug file instead");
		fd = sym_open_debug(r, s, di, NULL, NULL, 0, &dpath);
	}
	if (fd >= 0) {
		close(fd);
		s->mod = sym_report_module(r, s, di, dpath);
		if (s->mod) {
			s->file = xstrdup(dpath);
			s->debug_file = xstrdup(dpath);
			load_tables(s, dpath, true);
		}
		free(dpath);
		if (damaged.len && !s->nsyms) {
			sym_set_note(s, "%s", damaged.buf);
			s->loud = true;
		}
		strbuf_release(&damaged);
		return;
	}
	if (damaged.len) {
		sym_set_note(s, "%s (and no debug file was found)", damaged.buf);
		s->loud = true;
	} else if (mismatch) {
		s->mismatch = true;
		s->loud = true;
		sym_set_note(
			s,
			"'%s' is not the file that was recorded (%s %s): not symbolized (find the original with --image-path or --mapfile; --explain says where tally looked)",
			di->path, di->id_kind, di->id);
	} else if (r->archive) {
		sym_set_note(
			s,
			"'%s' is not in the archive (it was archived with --exclude-dependent, or its file was not found when archiving)",
			di->path);
	} else {
		sym_set_note(
			s,
			"'%s' is not on this machine%s (copy it here, or point --image-path or --mapfile at it)",
			di->path,
			di->foreign_ns
				? " (it was mapped inside a container: --image-path ROOT finds ROOT/path)"
				: "");
	}
	strbuf_release(&damaged);
}

void sym_load_jit(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di)
{
	struct strbuf p = STRBUF_INIT, sb = STRBUF_INIT, why = STRBUF_INIT;
	size_t cap = 0, bad = 0;
	bool have_map = false, have_dump = false;
	strbuf_addf(&p, "%s/jit/perf-%d-%s.map",
		    tally_db_image_dir(r->db, (uint32_t)(di - r->db->images)), di->pid, di->id);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX) == 0) {
		sym_logf_(s, "JIT map copied at record time: '%s'", p.buf);
		have_map = true;
		struct tally_perfmap_sym *ms;
		size_t nms;
		tally_perfmap_parse_why(sb.buf, sb.len, &ms, &nms, &bad, &why);
		s->names = strbuf_detach(&sb);
		GROW(s->syms, cap, s->nsyms + nms);
		for (size_t i = 0; i < nms; i++) {
			s->names[ms[i].name + ms[i].name_len] = '\0'; /* its newline, or the end */
			s->syms[s->nsyms++] = (struct tally_sym){ ms[i].start, ms[i].size,
								  s->names + ms[i].name, 0 };
		}
		free(ms);
	}
	strbuf_reset(&p);
	strbuf_reset(&sb);
	strbuf_addf(&p, "%s/jit/jitdump-%d-%s.txt",
		    tally_db_image_dir(r->db, (uint32_t)(di - r->db->images)), di->pid, di->id);
	if (tally_read_regular(&sb, AT_FDCWD, p.buf, 0, TALLY_DB_FILE_MAX) == 0) {
		sym_logf_(s, "jitdump copied at record time: '%s'", p.buf);
		have_dump = true;
		s->jd = xcalloc(1, sizeof(*s->jd));
		if (tally_jitdump_read_buf(s->jd, sb.buf, sb.len, p.buf)) {
			sym_set_note(s, "%s", tally_errmsg());
			s->loud = true;
			free(s->jd);
			s->jd = NULL;
		} else {
			if (s->jd->warning) {
				sym_set_note(s, "%s", s->jd->warning);
				s->loud = true;
			}
			for (size_t i = 0; i < s->jd->nfuncs; i++) {
				/* a perf map entry at the same address (listed first) wins */
				GROW(s->syms, cap, s->nsyms + 1);
				s->syms[s->nsyms++] = (struct tally_sym){ s->jd->funcs[i].addr,
									  s->jd->funcs[i].size,
									  s->jd->funcs[i].name, 1 };
			}
		}
	}
	if (!have_map && !have_dump)
		sym_set_note(s, "no copy of the JIT map or jitdump '%s' in the database", di->path);
	if (bad) {
		/* after the jitdump copy's own note, if it has one */
		sym_set_note(
			s,
			"%s%sthe JIT map of pid %d had %zu malformed line%s (skipped; the first: %s)",
			s->note ? s->note : "", s->note ? "; " : "", di->pid, bad,
			bad == 1 ? "" : "s", why.buf);
		s->loud = true;
	}
	/* names written by the profiled program: control bytes and bytes that are
	 * not UTF-8 never reach a terminal, an SVG or an HTML page raw */
	for (size_t i = 0; i < s->nsyms; i++) {
		char *e = tally_jit_display_name(s->syms[i].name);
		if (e) {
			GROW(s->owned, s->aowned, s->nowned + 1);
			s->owned[s->nowned++] = e;
			s->syms[i].name = e;
		}
	}
	sym_finish_syms(s);
	strbuf_release(&p);
	strbuf_release(&sb);
	strbuf_release(&why);
}
