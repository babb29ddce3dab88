/* The debug-file search: the candidate paths for an image's separate debug file
 * (docs/symbols.md), opening and checking them, and libdwfl's find_debuginfo callback. */
#define _GNU_SOURCE
#include "internal.h"

/* ---- where debug files may be (docs/symbols.md) ---- */

void sym_add_cand(struct cand **c, size_t *n, size_t *a, const char *why, bool dl, const char *fmt,
		  ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*c)[i].path, sb.buf)) {
			strbuf_release(&sb);
			return;
		}
	GROW(*c, *a, *n + 1);
	(*c)[(*n)++] = (struct cand){ strbuf_detach(&sb), why, dl };
}

/* The directory of path as a prefix of "DIR/NAME": "" for the root, which
 * tally_dirname calls "/" ("//NAME" would be the same file under another name). */
static char *dirname_of(const char *path)
{
	char *d = tally_dirname(path);
	if (!strcmp(d, "/"))
		d[0] = '\0';
	return d;
}

/* Candidates in order: per --debug-dir the build-id tree, then the binary's own
 * path and its debuglink under it; the system's build-id tree; the debuglink
 * next to the binary, in .debug/ and under /usr/lib/debug; the --mapfile
 * entries with this build-id. */
static void debug_cands(struct tally_resolver *r, const struct tally_db_image *di,
			const char *main_path, const char *debuglink, struct cand **c, size_t *n)
{
	size_t a = 0;
	bool bid = !strcmp(di->id_kind, "build-id") && strlen(di->id) > 2;
	const char *orig = di->path;
	char *odir = dirname_of(orig);
	char *mdir = main_path ? dirname_of(main_path) : NULL;
	for (size_t i = 0; r->o.debug_dirs && r->o.debug_dirs[i]; i++) {
		const char *d = r->o.debug_dirs[i];
		if (bid)
			sym_add_cand(c, n, &a, "--debug-dir build-id", false,
				     "%s/.build-id/%.2s/%s.debug", d, di->id, di->id + 2);
		if (orig[0] == '/') {
			sym_add_cand(c, n, &a, "--debug-dir with the binary's path", false, "%s%s",
				     d, orig);
			sym_add_cand(c, n, &a, "--debug-dir with the binary's path", false,
				     "%s%s.debug", d, orig);
		}
		if (debuglink && orig[0] == '/')
			sym_add_cand(c, n, &a,
				     "--debug-dir with the binary's directory and its debuglink",
				     true, "%s%s/%s", d, odir, debuglink);
	}
	/* the build-id cache's copy: the same file as the system's, its DWARF
	 * decompressed (a report reads only what it needs of it) */
	char key[TALLY_CACHE_KEY_MAX];
	struct tally_cache *cache =
		bid && tally_cache_key(di->id_kind, di->id, key) ? sym_cache(r) : NULL;
	/* a regular file, never a link */
	if (cache && tally_cache_has(cache, key, TALLY_CACHE_DEBUG))
		sym_add_cand(c, n, &a, "the build-id cache", false, "%s/%s/debug", cache->path,
			     key);
	if (bid && r->archive)
		sym_add_cand(c, n, &a, "the archive's build-id directory", false,
			     "%s/debug/.build-id/%.2s/%s.debug", r->archive, di->id, di->id + 2);
	else if (bid)
		sym_add_cand(c, n, &a, "system build-id directory", false,
			     "/usr/lib/debug/.build-id/%.2s/%s.debug", di->id, di->id + 2);
	if (debuglink) {
		const char *dirs[2] = { mdir, odir };
		for (int k = 0; k < 2; k++) {
			if (!dirs[k] || (k == 1 && mdir && !strcmp(mdir, odir)))
				continue;
			/* an archive's debuglink files sit next to its copy of the image, and
			 * nothing outside it is looked at */
			if (r->archive && (k == 1 || !main_path))
				continue;
			sym_add_cand(c, n, &a, ".gnu_debuglink next to the binary", true, "%s/%s",
				     dirs[k], debuglink);
			sym_add_cand(c, n, &a, ".gnu_debuglink in .debug/", true, "%s/.debug/%s",
				     dirs[k], debuglink);
			if ((dirs[k][0] == '/' || !dirs[k][0]) && !r->archive)
				sym_add_cand(c, n, &a, ".gnu_debuglink under /usr/lib/debug", true,
					     "/usr/lib/debug%s/%s", dirs[k], debuglink);
		}
	}
	if (bid && r->o.map) {
		size_t first, m = tally_imgmap_find(r->o.map, di->id, &first);
		for (size_t i = 0; i < m; i++)
			if (r->o.map->e[first + i].flags &
			    (TALLY_IMGMAP_DEBUG | TALLY_IMGMAP_SYMTAB))
				sym_add_cand(c, n, &a, "--mapfile", false, "%s",
					     r->o.map->e[first + i].path);
	}
	free(odir);
	free(mdir);
}

void sym_free_cands(struct cand *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].path);
	free(c);
}

/* Opens the first candidate that is this image's debug file; logs every one. */
int sym_open_debug(struct tally_resolver *r, struct imgsyms *s, const struct tally_db_image *di,
		   const char *main_path, const char *debuglink, GElf_Word crc, char **out_path)
{
	struct cand *c = NULL;
	size_t n = 0;
	struct strbuf why = STRBUF_INIT;
	int ret = -1;
	debug_cands(r, di, main_path, debuglink, &c, &n);
	for (size_t i = 0; i < n && ret < 0; i++) {
		if (main_path && !strcmp(c[i].path, main_path))
			continue;
		if (access(c[i].path, F_OK) != 0) {
			sym_logf_(s, "debug file '%s' (%s): not there", c[i].path, c[i].why);
			continue;
		}
		int ok;
		if (c[i].debuglink && strcmp(di->id_kind, "build-id")) {
			/* no build-id to compare: the debuglink's CRC says whether it belongs */
			int fd =
				tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			bool rd = fd >= 0;
			uint32_t got = rd ? sym_crc32_file(fd, &rd) : 0;
			strbuf_reset(&why);
			if (fd < 0)
				strbuf_addstr(&why, tally_errmsg());
			else
				close(fd);
			ok = !rd ? -1 : got == crc ? 1 : 0;
			if (fd >= 0)
				strbuf_addf(
					&why,
					ok < 0 ? "cannot be read"
					: ok   ? "CRC %08x matches the debuglink"
					     : "CRC %08x, the debuglink says %08x: another file, not used",
					got, crc);
		} else {
			ok = sym_check_file(di, c[i].path, &why);
		}
		bool useful = false;
		if (ok == 1) {
			int fd =
				tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
			useful = e && (sym_elf_has_section(e, ".debug_info") ||
				       sym_elf_has_section(e, ".symtab"));
			if (e)
				elf_end(e);
			if (fd >= 0)
				close(fd);
		}
		sym_logf_(
			s, "debug file '%s' (%s): %s%s", c[i].path, c[i].why, why.buf,
			ok == 1 ? (useful ? ": used"
					  : ", but it has neither .debug_info nor .symtab: not used")
				: "");
		if (ok == 1 && useful) {
			ret = tally_open_regular(AT_FDCWD, c[i].path, TALLY_OPEN_FOLLOW, 0, NULL);
			if (ret >= 0)
				*out_path = xstrdup(c[i].path);
			char key[TALLY_CACHE_KEY_MAX];
			if (ret >= 0 && !strcmp(c[i].why, "the build-id cache") &&
			    tally_cache_key(di->id_kind, di->id, key))
				tally_cache_touch(sym_cache(r), key);
		}
	}
	if (ret < 0) {
		char *p = NULL;
		ret = sym_try_debuginfod(r, s, di, &p);
		if (ret >= 0) {
			int ok = sym_check_file(di, p, &why);
			sym_logf_(s, "debug file '%s' (debuginfod): %s%s", p, why.buf,
				  ok == 1 ? ": used" : "");
			if (ok == 1) {
				*out_path = p;
			} else {
				close(ret);
				ret = -1;
				free(p);
			}
		}
	}
	strbuf_release(&why);
	sym_free_cands(c, n);
	return ret;
}

int sym_find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)modname, (void)base;
	struct imgsyms *s = *userdata;
	if (!s)
		return -1;
	const struct tally_db_image *di = s->di ? s->di : &s->r->db->images[s->image];
	if (!strcmp(di->kind, "kernel"))
		return -1; /* vmlinux is given whole */
	char *p = NULL;
	if (s->debug_searched)
		/* libdwfl asks again for DWARF after the symbol table: the answer is the same */
		return -1;
	int fd = sym_open_debug(s->r, s, di, file_name, debuglink_file, debuglink_crc, &p);
	s->debug_searched = fd < 0;
	if (fd >= 0) {
		free(s->debug_file);
		s->debug_file = xstrdup(p);
		*debuginfo_file_name = p;
	}
	return fd;
}
